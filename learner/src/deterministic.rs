//! Deterministic runs (`run.deterministic`): the pipeline in a fixed order. Each
//! actor has a lane, its place in the list of the run's actors (which `sebulba
//! local` knows by name); the run's g-th batch comes from lane `g mod N` and is
//! acted with version `first + g / B` (`B` = `learner.batches_per_update`), so
//! every update trains on batches of the version it starts from, always in the
//! same order. With the actors' seeds given by lane instead of join order,
//! nothing is left to timing and a run repeats bit for bit.
//!
//! A forced lag `L` (`run.forced_lag`) moves every batch's version `L` back:
//! the update that starts from version `v` trains on batches of `v - L` (of
//! the first version while `v - L` is before it). The learner publishes each
//! version `L` updates after making it ([`Deterministic::published`]), so actors
//! and evaluator see exactly the versions the lanes name, in order.

use crate::batch::DecodedBatch;
use std::collections::VecDeque;

/// The run's lanes and batch order.
#[derive(Debug, Clone)]
pub struct Deterministic {
    names: Vec<String>,
    batches_per_update: usize,
    first_version: u64,
    lag: u64,
}

impl Deterministic {
    /// Lanes for the actors `names` (lane i is `names[i]`), starting from
    /// version `first_version`.
    pub fn new(names: Vec<String>, batches_per_update: usize, first_version: u64) -> Self {
        Self {
            names,
            batches_per_update,
            first_version,
            lag: 0,
        }
    }

    /// The same lanes with every batch acted `lag` versions back.
    pub fn with_lag(mut self, lag: u64) -> Self {
        self.lag = lag;
        self
    }

    pub fn lag(&self) -> u64 {
        self.lag
    }

    /// The version the actors must see once the learner holds `version`:
    /// the one the next update's batches are acted with.
    pub fn published(&self, version: u64) -> u64 {
        version.saturating_sub(self.lag).max(self.first_version)
    }

    pub fn lanes(&self) -> usize {
        self.names.len()
    }

    /// The lane of the actor named `name`, if it is one of the run's.
    pub fn lane_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// What the actor of `lane` is told at Join.
    pub fn wire(&self, lane: usize) -> sebulba_proto::DeterministicLane {
        sebulba_proto::DeterministicLane {
            lane: lane as u32,
            lanes: self.names.len() as u32,
            batches_per_update: self.batches_per_update as u32,
            first_version: self.first_version,
            // Within u32: `run.forced_lag` is at most 64.
            lag: u32::try_from(self.lag).unwrap_or(u32::MAX),
        }
    }
}

/// Batches put back into lane order: the update loop takes the run's batches
/// one after the other by lane; a batch that arrives before its turn waits
/// here (at most `actor.send_queue` per lane, the actor's credit).
#[derive(Debug)]
pub struct LaneOrder {
    /// The run's batch number of the next batch to take.
    next: u64,
    pending: Vec<VecDeque<DecodedBatch>>,
}

impl LaneOrder {
    pub fn new(lanes: usize) -> Self {
        Self {
            next: 0,
            pending: (0..lanes.max(1)).map(|_| VecDeque::new()).collect(),
        }
    }

    /// The lane whose batch is taken next.
    pub fn wanted(&self) -> usize {
        (self.next % self.pending.len() as u64) as usize
    }

    /// Keeps `b`, a batch of `lane`, until its turn.
    pub fn file(&mut self, lane: usize, b: DecodedBatch) {
        if let Some(q) = self.pending.get_mut(lane) {
            q.push_back(b);
        }
    }

    /// The next batch in lane order, when it has come.
    pub fn pop(&mut self) -> Option<DecodedBatch> {
        let lane = self.wanted();
        let b = self.pending[lane].pop_front()?;
        self.next += 1;
        Some(b)
    }

    /// Every batch still waiting (the run is ending).
    pub fn drain(&mut self) -> Vec<DecodedBatch> {
        self.pending.iter_mut().flat_map(|q| q.drain(..)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Shared;
    use sebulba_algorithms::TrajectoryBuilder;
    use sebulba_core::config::RunConfig;

    fn batch(actor: &str, sequence: u64) -> DecodedBatch {
        DecodedBatch::unsent(actor, sequence, TrajectoryBuilder::new(1, 1, 4).build())
    }

    /// Batches filed in any order come out lane by lane, each lane's in the
    /// order it sent them; a lane that has sent nothing holds the rest back.
    #[test]
    fn lane_order_takes_lanes_in_turn() {
        let mut order = LaneOrder::new(3);
        order.file(2, batch("c", 0));
        order.file(1, batch("b", 0));
        order.file(1, batch("b", 1));
        assert!(order.pop().is_none(), "lane 0 has not sent yet");
        order.file(0, batch("a", 0));
        order.file(0, batch("a", 1));
        let mut taken = vec![];
        while let Some(b) = order.pop() {
            taken.push(format!("{}{}", b.actor_id, b.sequence));
        }
        assert_eq!(taken, ["a0", "b0", "c0", "a1", "b1"]);
        assert_eq!(order.wanted(), 2, "lane 2's second batch is next");
        order.file(0, batch("a", 2));
        assert_eq!(order.drain().len(), 1);
    }

    /// A deterministic run seeds its actors by lane, not by join order, and
    /// refuses a name that is not one of its actors.
    #[test]
    fn actors_are_seeded_by_lane_and_strangers_are_refused() {
        let cfg = RunConfig::preset("CartPole-v1").unwrap();
        let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
        let names = vec!["local-0".to_string(), "local-1".to_string()];
        let shared = Shared::new(cfg.clone(), env.clone(), "run".into())
            .with_deterministic(Some(Deterministic::new(names, 2, 0)));
        let (id1, seed1, lane1) = shared.register_actor("local-1").unwrap();
        let (_, seed0, lane0) = shared.register_actor("local-0").unwrap();
        assert_eq!((lane0, lane1), (Some(0), Some(1)));
        assert_eq!(shared.actors.lane_of(&id1), Some(1));
        let free = Shared::new(cfg, env, "run".into());
        let (_, first, _) = free.register_actor("local-1").unwrap();
        let (_, second, _) = free.register_actor("local-0").unwrap();
        assert_eq!(
            (seed0, seed1),
            (first, second),
            "seeds by lane, not join order"
        );
        let e = shared.register_actor("intruder").unwrap_err();
        assert!(
            e.contains("run.deterministic") && e.contains("intruder"),
            "{e}"
        );
    }
}
