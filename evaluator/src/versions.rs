//! The earlier versions a game's evaluation plays against: the evaluator
//! keeps the weights of versions it evaluated, at most `eval.earlier_versions`
//! ([`DEFAULT_KEEP`] unless set), thinned by
//! dropping every other one of the older half when full, so they stay
//! spread over the run. The opponent for version v is the kept version
//! nearest v / 2: how the policy fares against itself from half its
//! training ago.

use crate::EvaluatorError;
use sebulba_core::policy::{InferencePolicy, network_from_wire};
use sebulba_proto::Weights;

/// Versions kept unless `eval.earlier_versions` says otherwise (about 2 MB
/// each for Big Two's preset network).
pub const DEFAULT_KEEP: usize = 16;

pub(crate) struct Earlier {
    /// At most this many (at least 2: the first and the newest).
    keep: usize,
    kept: Vec<(u64, Vec<u8>)>,
}

impl Earlier {
    /// Keeps at most `keep` versions (raised to 2).
    pub(crate) fn new(keep: usize) -> Self {
        Self {
            keep: keep.max(2),
            kept: Vec::new(),
        }
    }

    /// Keeps version `version`'s weights (versions arrive in order).
    pub(crate) fn keep(&mut self, version: u64, safetensors: &[u8]) {
        if self.kept.last().is_some_and(|(v, _)| *v >= version) {
            return;
        }
        self.kept.push((version, safetensors.to_vec()));
        if self.kept.len() > self.keep {
            // Every other one of the older half goes (at least the second
            // oldest, so the first and the newest always stay).
            let half = (self.keep / 2).max(2);
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i > half || i % 2 == 1
            });
        }
    }

    /// The kept version nearest `version / 2`, older than `version`.
    pub(crate) fn pick(&self, version: u64) -> Option<&(u64, Vec<u8>)> {
        let target = version / 2;
        self.kept
            .iter()
            .filter(|(v, _)| *v < version)
            .min_by_key(|(v, _)| v.abs_diff(target))
    }

    /// The opponent policy for `w` (same network), or `None` before any
    /// earlier version was kept.
    pub(crate) fn opponent_for(
        &self,
        w: &Weights,
    ) -> Result<Option<(u64, InferencePolicy)>, EvaluatorError> {
        let Some((version, bytes)) = self.pick(w.version) else {
            return Ok(None);
        };
        let bad = |reason: String| EvaluatorError::BadWeights {
            version: *version,
            reason,
        };
        let env = sebulba_envs::env_spec_with(&w.env_id, &w.env_kwargs)
            .map_err(|e| bad(e.to_string()))?;
        let network = network_from_wire(&w.network.clone().unwrap_or_default())
            .map_err(|e| bad(e.to_string()))?;
        let mut p = InferencePolicy::new(&env, &network, sebulba_core::devices::DeviceKind::Cpu)
            .map_err(|e| bad(e.to_string()))?;
        p.load(*version, bytes.clone())
            .map_err(|e| bad(e.to_string()))?;
        Ok(Some((*version, p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(e: &Earlier) -> Vec<u64> {
        e.kept.iter().map(|(v, _)| *v).collect()
    }

    #[test]
    fn every_bound_holds_and_keeps_the_first_and_the_newest() {
        for keep in [2, 3, 4, 5, 16, 17, 256] {
            let mut e = Earlier::new(keep);
            for v in 0..2000 {
                e.keep(v, &[]);
                let kept = versions(&e);
                assert!(kept.len() <= keep, "keep {keep}: {kept:?}");
                assert_eq!(kept.first(), Some(&0), "keep {keep}");
                assert_eq!(kept.last(), Some(&v), "keep {keep}");
                assert!(kept.windows(2).all(|w| w[0] < w[1]), "{kept:?}");
            }
        }
        // Below 2 is 2: the first and the newest.
        let mut one = Earlier::new(1);
        (0..10).for_each(|v| one.keep(v, &[]));
        assert_eq!(versions(&one), [0, 9]);
        // Versions older than the newest kept one are ignored.
        one.keep(5, &[]);
        assert_eq!(versions(&one), [0, 9]);
    }

    #[test]
    fn kept_versions_stay_bounded_and_spread_and_the_pick_is_near_half() {
        let mut e = Earlier::new(DEFAULT_KEEP);
        for v in (0..=1000).step_by(10) {
            e.keep(v, &[]);
        }
        assert!(e.kept.len() <= DEFAULT_KEEP, "{}", e.kept.len());
        let versions: Vec<u64> = e.kept.iter().map(|(v, _)| *v).collect();
        assert_eq!(versions.first(), Some(&0), "{versions:?}");
        assert_eq!(versions.last(), Some(&1000), "{versions:?}");
        assert!(versions.windows(2).all(|w| w[0] < w[1]));
        // Half of 1010 is 505: the nearest kept version.
        let picked = e.pick(1010).map(|(v, _)| *v).expect("a pick");
        let nearest = versions
            .iter()
            .map(|v| v.abs_diff(505))
            .min()
            .expect("kept");
        assert_eq!(picked.abs_diff(505), nearest);
        assert!(e.pick(0).is_none(), "nothing older than version 0");
    }
}
