//! How an update's data is cut into minibatches, as the network needs it
//! ([`Batching`], chosen once from the network): rows shuffled one by one
//! (a network without memory: CleanRL's shuffling, the same numbers as
//! ever), or whole env sequences shuffled, each minibatch's rows time-major
//! beside its sequences' initial states (a network with memory). PPO asks
//! for epochs of minibatches and never branches on which.

use crate::data::UpdateData;
use crate::engine::EngineError;
use rand::Rng;
use rand::seq::SliceRandom;
use sebulba_fused::Batching;

/// An epoch's cut of one update's data, reshuffled each epoch.
pub struct Minibatches {
    batching: Batching,
    /// The units shuffled: row indices, or sequence indices.
    order: Vec<usize>,
    /// Units per minibatch.
    per: usize,
    /// Steps per sequence (1 for rows).
    steps: usize,
}

impl Minibatches {
    /// `count` minibatches of `data` as `batching` asks; a network with
    /// memory needs the data's rows as whole sequences, with initial states
    /// of its width.
    pub fn new(batching: Batching, data: &UpdateData, count: usize) -> Result<Self, EngineError> {
        let (units, steps) = match (batching, &data.sequences) {
            (Batching::Rows, _) => (data.len(), 1),
            (Batching::Sequences { width }, Some(s)) if s.initial.width() == width => {
                (s.len(), s.steps)
            }
            (Batching::Sequences { width }, Some(s)) => {
                return Err(EngineError::State {
                    what: "the update's initial states",
                    reason: format!(
                        "{} floats per env where the network keeps {width}",
                        s.initial.width()
                    ),
                });
            }
            (Batching::Sequences { .. }, None) => {
                return Err(EngineError::Unsupported(
                    "a network with memory on rows that are not whole env sequences (a game's, or a replay memory's draws)".into(),
                ));
            }
        };
        Ok(Self {
            batching,
            order: (0..units).collect(),
            per: units / count.max(1),
            steps,
        })
    }

    /// Rows or sequences the data holds: what is shuffled.
    pub fn units(&self) -> usize {
        self.order.len()
    }

    /// The next epoch's shuffle (of the previous epoch's order, as CleanRL
    /// reshuffles one index array).
    pub fn shuffle<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        self.order.shuffle(rng);
    }

    /// Minibatch `k` of this epoch: its rows into `idx` and, for sequences,
    /// which into `sequences` (rows time-major: step `t` of every sequence,
    /// then step `t + 1`).
    pub fn minibatch(
        &self,
        k: usize,
        data: &UpdateData,
        idx: &mut Vec<usize>,
        sequences: &mut Vec<usize>,
    ) {
        let units = &self.order[k * self.per..(k + 1) * self.per];
        idx.clear();
        sequences.clear();
        match (self.batching, &data.sequences) {
            (Batching::Sequences { .. }, Some(s)) => {
                sequences.extend_from_slice(units);
                for t in 0..self.steps {
                    idx.extend(units.iter().map(|&u| s.row(u, t)));
                }
            }
            _ => idx.extend_from_slice(units),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Sequences;
    use crate::trajectory::BatchActions;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use sebulba_fused::PolicyState;

    /// 2 batches of 3 steps of 4 envs, one float per row: its row index.
    fn data(sequences: bool) -> UpdateData {
        let n = 2 * 3 * 4;
        UpdateData {
            obs_dim: 1,
            observations: (0..n).map(|i| i as f32).collect::<Vec<_>>().into(),
            actions: BatchActions::Discrete(vec![0; n]),
            masks: None,
            old_log_probs: vec![0.0; n],
            advantages: vec![0.0; n],
            returns: vec![0.0; n],
            old_values: vec![0.0; n],
            weights: None,
            sequences: sequences.then(|| Sequences {
                steps: 3,
                envs: 4,
                starts: vec![0; n],
                initial: PolicyState::zeros(0, 8),
            }),
        }
    }

    #[test]
    fn rows_are_the_shuffle_cleanrl_makes() {
        let d = data(true);
        let mut cut = Minibatches::new(Batching::Rows, &d, 4).unwrap();
        let (mut rng, mut same) = (StdRng::seed_from_u64(5), StdRng::seed_from_u64(5));
        let mut order: Vec<usize> = (0..24).collect();
        let (mut idx, mut seqs) = (Vec::new(), Vec::new());
        for _epoch in 0..3 {
            cut.shuffle(&mut rng);
            order.shuffle(&mut same);
            for (k, want) in order.chunks_exact(6).enumerate() {
                cut.minibatch(k, &d, &mut idx, &mut seqs);
                assert_eq!(idx, want);
                assert!(seqs.is_empty());
            }
        }
    }

    #[test]
    fn sequences_are_whole_and_time_major_and_cover_the_data_once() {
        let d = data(true);
        let mut cut = Minibatches::new(Batching::Sequences { width: 0 }, &d, 2).unwrap();
        assert_eq!(cut.units(), 8);
        cut.shuffle(&mut StdRng::seed_from_u64(9));
        let (mut idx, mut seqs) = (Vec::new(), Vec::new());
        let mut seen = vec![0; 24];
        for k in 0..2 {
            cut.minibatch(k, &d, &mut idx, &mut seqs);
            assert_eq!((idx.len(), seqs.len()), (12, 4));
            for (j, &row) in idx.iter().enumerate() {
                let (t, s) = (j / 4, seqs[j % 4]);
                // Sequence s = b * 4 + e: batch b's env e, row (b*3 + t)*4 + e.
                assert_eq!(
                    row,
                    ((s / 4) * 3 + t) * 4 + s % 4,
                    "step {t} of sequence {s}"
                );
                seen[row] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
        // Without the sequences (rows left out), a network with memory is refused.
        let err = Minibatches::new(Batching::Sequences { width: 0 }, &data(false), 2)
            .err()
            .unwrap();
        assert!(err.to_string().contains("whole env sequences"), "{err}");
        // Nor are initial states of another width taken.
        let err = Minibatches::new(Batching::Sequences { width: 3 }, &d, 2)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("0 floats per env where the network keeps 3"),
            "{err}"
        );
    }
}
