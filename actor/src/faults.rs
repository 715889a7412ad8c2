//! What an actor does when one of its envs fails (a Python env raised, or
//! returned NaN/Inf): the rollout in progress is dropped, never sent half
//! written; the env is replaced by a fresh one and counted; the counts ride
//! on the next batch sent (`TrajectoryBatch.env_faults`). An env that keeps
//! failing ends the actor with the error.

use sebulba_envs::{DiscountedReturn, EnvError, VectorEnv};
use sebulba_proto::EnvFaults;
use tracing::warn;

/// Rollouts in a row that may end in an env failure before the actor gives
/// up: a broken env (a bug, a missing asset) fails every time; a rare
/// numerical blow-up does not.
pub(crate) const MAX_FAILED_ROLLOUTS_IN_A_ROW: u32 = 5;

#[derive(Default)]
pub(crate) struct Faults {
    pending: EnvFaults,
    in_a_row: u32,
}

impl Faults {
    /// A rollout completed.
    pub(crate) fn succeeded(&mut self) {
        self.in_a_row = 0;
    }

    /// The counts for the next batch (and zero after).
    pub(crate) fn take(&mut self) -> Option<EnvFaults> {
        let f = std::mem::take(&mut self.pending);
        (f != EnvFaults::default()).then_some(f)
    }

    /// Handles `err` from a rollout that had taken `steps_lost` env steps:
    /// replaces the failed env (writing every env's observation into `obs`),
    /// or gives the error back when it is not an env failure or the env
    /// keeps failing.
    pub(crate) fn recover(
        &mut self,
        err: EnvError,
        venv: &mut dyn VectorEnv,
        steps_lost: u64,
        obs: &mut [f32],
        returns: Option<&mut DiscountedReturn>,
    ) -> Result<(), EnvError> {
        let (index, non_finite) = match &err {
            EnvError::EnvFailed { index, .. } => (*index, false),
            EnvError::NonFinite { index, .. } => (*index, true),
            _ => return Err(err),
        };
        self.in_a_row += 1;
        if self.in_a_row > MAX_FAILED_ROLLOUTS_IN_A_ROW {
            warn!(
                "{MAX_FAILED_ROLLOUTS_IN_A_ROW} rollouts in a row ended in an env failure: giving up"
            );
            return Err(err);
        }
        warn!(
            env = index,
            "{err}; restarting that env and dropping this rollout"
        );
        let p = &mut self.pending;
        p.env_restarts = p.env_restarts.saturating_add(1);
        p.non_finite = p.non_finite.saturating_add(u64::from(non_finite));
        p.discarded_env_steps = p.discarded_env_steps.saturating_add(steps_lost);
        if let Some(g) = returns {
            g.restart(index);
        }
        venv.restart(index, obs)
    }
}
