//! A batch's policy states: what a network with memory trains each env
//! sequence from, one state per seat in a game.

use super::{Expect, MAX_MAGNITUDE, Rejection, check_bounded, reject};
use sebulba_proto::{TrajectoryBatch, decode_f32};
use tonic::Code;

impl Expect<'_> {
    /// Floats of each env's state in a batch: every seat's.
    pub(super) fn env_state_width(&self) -> usize {
        self.state_width * self.env.players.max(1)
    }
}

/// Each env's policy state before row 0 (each seat's in a game), `[E,
/// Expect::env_state_width]`: required with
/// a recurrent core, refused without one; finite and within
/// [`MAX_MAGNITUDE`] (a cell state grows with an episode, an LSTM's without
/// bound in principle, but never to this).
pub(super) fn decode_initial_state(
    b: &TrajectoryBatch,
    expect: &Expect<'_>,
    e: u32,
) -> Result<sebulba_core::policy::PolicyState, Rejection> {
    use sebulba_core::policy::PolicyState;
    let w = expect.env_state_width();
    match (w, &b.initial_state) {
        (0, None) => Ok(PolicyState::zeros(0, e as usize)),
        (0, Some(_)) => Err(reject(
            Code::FailedPrecondition,
            "spec",
            "field `initial_state`: this run's network has no memory (network.core = none)",
        )),
        (_, state) => {
            let v = decode_f32(state.as_ref(), "initial_state", &[e, w as u32])?;
            check_bounded("initial_state", &v, MAX_MAGNITUDE)?;
            PolicyState::from_values(w, e as usize, v).ok_or_else(|| {
                reject(
                    Code::InvalidArgument,
                    "shape",
                    format!("field `initial_state`: not {e} states of {w} floats"),
                )
            })
        }
    }
}
