//! How an update's data is cut into minibatches, as the network needs it
//! ([`Batching`], chosen once from the network): rows shuffled one by one
//! (a network without memory: CleanRL's shuffling, the same numbers as
//! ever), or env sequences shuffled, each minibatch's rows time-major
//! beside the states its sequences start from (a network with memory). The
//! sequences are each env's whole rollout, or chunks of `ppo.bptt` steps
//! of it (Sample Factory's recurrence), each chunk but a rollout's first
//! starting from its env's state after the step before, as the current
//! weights compute it ([`Minibatches::starting_states`]). PPO asks for
//! epochs of minibatches and never branches on which.

use crate::data::{Sequences, UpdateData};
use crate::engine::{EngineError, Steps};
use crate::trainer::Trainer;
use rand::Rng;
use rand::seq::SliceRandom;
use sebulba_fused::{Batching, PolicyState, Sequence};

/// An epoch's cut of one update's data, reshuffled each epoch.
pub struct Minibatches {
    batching: Batching,
    /// The units shuffled: row indices, or chunk indices.
    order: Vec<usize>,
    /// Units per minibatch.
    per: usize,
    /// Steps per chunk (1 for rows).
    steps: usize,
}

impl Minibatches {
    /// `count` minibatches of `data` as `batching` asks; a network with
    /// memory needs the data's rows as whole sequences, with initial states
    /// of its width, cut into chunks of `bptt` steps (0: whole sequences; a
    /// divisor of their length).
    pub fn new(
        batching: Batching,
        data: &UpdateData,
        count: usize,
        bptt: usize,
    ) -> Result<Self, EngineError> {
        let (units, steps) = match (batching, &data.sequences) {
            (Batching::Rows, _) => (data.len(), 1),
            (Batching::Sequences { width }, Some(s))
                if s.initial.width() == width * s.players() =>
            {
                let len = chunk_len(s, bptt)?;
                (s.len() * (s.steps / len), len)
            }
            (Batching::Sequences { width }, Some(s)) => {
                return Err(EngineError::State {
                    what: "the update's initial states",
                    reason: format!(
                        "{} floats per env where the network keeps {width} for each of {} seats",
                        s.initial.width(),
                        s.players()
                    ),
                });
            }
            (Batching::Sequences { .. }, None) => {
                return Err(EngineError::Unsupported(
                    "a network with memory on rows that are not whole env sequences (a game's with moves by others than the newest version left out, or a replay memory's draws)".into(),
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

    /// Rows or chunks the data holds: what is shuffled.
    pub fn units(&self) -> usize {
        self.order.len()
    }

    /// Whether chunks start inside the rollouts, from states the learner
    /// computes (`ppo.bptt` shorter than the rollout).
    pub fn chunked(&self, data: &UpdateData) -> bool {
        matches!((self.batching, &data.sequences),
            (Batching::Sequences { .. }, Some(s)) if self.steps < s.steps)
    }

    /// The next epoch's shuffle (of the previous epoch's order, as CleanRL
    /// reshuffles one index array).
    pub fn shuffle<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        self.order.shuffle(rng);
    }

    /// Minibatch `k` of this epoch: its rows into `idx` and, for sequences,
    /// which chunks into `sequences` (rows time-major: step `t` of every
    /// chunk, then step `t + 1`).
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
                    idx.extend(units.iter().map(|&u| s.chunk_row(u, self.steps, t)));
                }
            }
            _ => idx.extend_from_slice(units),
        }
    }

    /// The state each chunk starts from, in chunk order (empty for rows):
    /// a rollout's first chunk from the state the actor sent, every other
    /// from its env's state after the step before, through the rollout
    /// from that state under the trainer's current weights; in a game,
    /// each seat's where its last move left it (zero when a game began
    /// since, the actor's when it has not moved yet).
    pub fn starting_states(
        &self,
        trainer: &mut Trainer,
        data: &UpdateData,
    ) -> Result<PolicyState, EngineError> {
        let Some(s) = data.sequences.as_ref().filter(|_| self.chunked(data)) else {
            return Ok(match (self.batching, &data.sequences) {
                (Batching::Sequences { .. }, Some(s)) => s.initial.clone(),
                _ => PolicyState::default(),
            });
        };
        let (len, envs, d) = (self.steps, s.envs, data.obs_dim);
        // Each env's state holds every seat's (one for one player).
        let (players, width) = (s.players(), s.initial.width());
        let w = width / players;
        let rows = s.steps * envs;
        let mut states = Vec::with_capacity(self.units() * width);
        for b in 0..s.len() / envs.max(1) {
            let batch = b * rows..(b + 1) * rows;
            let obs = data.observations.to_f32(batch.start * d..batch.end * d);
            let initial = s.initial.select(b * envs..(b + 1) * envs);
            let movers = s
                .seats
                .as_ref()
                .map_or(&[][..], |g| &g.movers[batch.clone()]);
            let starts = &s.starts[batch];
            // Where each later chunk's seats stand, chunk-major, then env,
            // then seat; the states after the rows that left them.
            let at: Vec<SeatAt> = (1..s.steps / len)
                .flat_map(|c| (0..envs * players).map(move |k| (c * len, k)))
                .map(|(t0, k)| seat_at(starts, movers, envs, (t0, k / players, k % players)))
                .collect();
            let left: Vec<usize> = at.iter().filter_map(SeatAt::row).collect();
            let seq = Sequence {
                steps: s.steps,
                envs,
                starts,
                state: &initial,
                continues: &[],
                seats: s.seats_of(movers),
            };
            let after = trainer.states_after(&Steps::sequence(&obs, seq), &left);
            if after.len() != left.len() * w {
                return Err(EngineError::State {
                    what: "the chunks' starting states",
                    reason: format!("{} floats for {} states of {w}", after.len(), left.len()),
                });
            }
            states.extend_from_slice(initial.values());
            let mut next = after.chunks_exact(w.max(1));
            for (k, a) in at.iter().enumerate() {
                let (e, p) = ((k / players) % envs, k % players);
                match a {
                    SeatAt::After(_) => states.extend_from_slice(next.next().unwrap_or(&[])),
                    SeatAt::Zero => states.extend(std::iter::repeat_n(0.0, w)),
                    SeatAt::Initial => states.extend_from_slice(&initial.row(e)[p * w..][..w]),
                }
            }
        }
        PolicyState::from_values(width, self.units(), states).ok_or(EngineError::State {
            what: "the chunks' starting states",
            reason: "not one per chunk".into(),
        })
    }
}

/// Where a seat's state stands before a step of its env's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SeatAt {
    /// Where the seat's last move (this row) left it.
    After(usize),
    /// Zero: a new game began since the seat last moved.
    Zero,
    /// As the sequence started: the seat has not moved in it.
    Initial,
}

impl SeatAt {
    fn row(&self) -> Option<usize> {
        match self {
            SeatAt::After(r) => Some(*r),
            _ => None,
        }
    }
}

/// Where seat `seat` of env `e` stands before step `t0` of a sequence of
/// `envs` envs whose rows' movers are `movers` (empty: one player, who
/// moves at every row) and whose episodes start where `starts` says.
fn seat_at(
    starts: &[u8],
    movers: &[u8],
    envs: usize,
    (t0, e, seat): (usize, usize, usize),
) -> SeatAt {
    for t in (0..t0).rev() {
        let r = t * envs + e;
        if movers.get(r).map_or(seat == 0, |&m| usize::from(m) == seat) {
            return SeatAt::After(r);
        }
        if starts[r] != 0 {
            return SeatAt::Zero;
        }
    }
    SeatAt::Initial
}

/// The steps of a chunk of `s`'s sequences for `ppo.bptt = bptt`.
fn chunk_len(s: &Sequences, bptt: usize) -> Result<usize, EngineError> {
    match bptt {
        0 => Ok(s.steps),
        n if n <= s.steps && s.steps.is_multiple_of(n) => Ok(n),
        n => Err(EngineError::State {
            what: "ppo.bptt",
            reason: format!(
                "{n} steps do not cut sequences of {} into whole chunks",
                s.steps
            ),
        }),
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
                seats: None,
            }),
        }
    }

    #[test]
    fn rows_are_the_shuffle_cleanrl_makes() {
        let d = data(true);
        let mut cut = Minibatches::new(Batching::Rows, &d, 4, 0).unwrap();
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
    fn bptt_chunks_are_consecutive_steps_of_one_env_and_cover_the_data_once() {
        // 2 batches of 6 steps of 4 envs, cut into chunks of 2 steps.
        let mut d = data(true);
        let n = 2 * 6 * 4;
        d.observations = (0..n).map(|i| i as f32).collect::<Vec<_>>().into();
        d.old_log_probs = vec![0.0; n];
        d.sequences = Some(Sequences {
            steps: 6,
            envs: 4,
            starts: vec![0; n],
            initial: PolicyState::zeros(0, 8),
            seats: None,
        });
        let mut cut = Minibatches::new(Batching::Sequences { width: 0 }, &d, 4, 2).unwrap();
        assert!(cut.chunked(&d));
        assert_eq!(cut.units(), 24, "8 sequences of 3 chunks");
        cut.shuffle(&mut StdRng::seed_from_u64(3));
        let (mut idx, mut chunks) = (Vec::new(), Vec::new());
        let mut seen = vec![0; n];
        for k in 0..4 {
            cut.minibatch(k, &d, &mut idx, &mut chunks);
            assert_eq!((idx.len(), chunks.len()), (12, 6));
            for (j, &row) in idx.iter().enumerate() {
                let (t, u) = (j / 6, chunks[j % 6]);
                // Chunk u = (b * 3 + c) * 4 + e: batch b's env e, steps 2c, 2c + 1.
                let (b, c, e) = (u / 12, (u / 4) % 3, u % 4);
                assert_eq!(row, (b * 6 + 2 * c + t) * 4 + e, "step {t} of chunk {u}");
                seen[row] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
        // The whole rollout is one chunk; a length that does not divide it
        // is refused.
        let whole = Minibatches::new(Batching::Sequences { width: 0 }, &d, 4, 6).unwrap();
        assert!(!whole.chunked(&d) && whole.units() == 8);
        let err = Minibatches::new(Batching::Sequences { width: 0 }, &d, 4, 4)
            .err()
            .unwrap();
        assert!(err.to_string().contains("ppo.bptt"), "{err}");
    }

    #[test]
    fn sequences_are_whole_and_time_major_and_cover_the_data_once() {
        let d = data(true);
        let mut cut = Minibatches::new(Batching::Sequences { width: 0 }, &d, 2, 0).unwrap();
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
        let err = Minibatches::new(Batching::Sequences { width: 0 }, &data(false), 2, 0)
            .err()
            .unwrap();
        assert!(err.to_string().contains("whole env sequences"), "{err}");
        // Nor are initial states of another width taken.
        let err = Minibatches::new(Batching::Sequences { width: 3 }, &d, 2, 0)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("0 floats per env where the network keeps 3"),
            "{err}"
        );
    }
}
