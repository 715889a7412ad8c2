//! Where an actor's time goes between two batches it sends, carried on the
//! next batch (`TrajectoryBatch.actor_time`): stepping its envs, the policy
//! (inference and sampling), and waiting for the learner's credit. The
//! learner sums them per actor into the run's summary, which `sebulba bench
//! local` reads to say which side of a run to scale.

use sebulba_proto::ActorTime;
use std::time::Instant;

pub(crate) struct Timing {
    since: Instant,
    env: f64,
    inference: f64,
    waiting: f64,
}

impl Timing {
    pub fn new() -> Self {
        Timing {
            since: Instant::now(),
            env: 0.0,
            inference: 0.0,
            waiting: 0.0,
        }
    }

    /// Adds the time since `started` to the envs' part; returns now.
    pub fn env(&mut self, started: Instant) -> Instant {
        let now = Instant::now();
        self.env += (now - started).as_secs_f64();
        now
    }

    /// Adds the time since `started` to the policy's part; returns now.
    pub fn inference(&mut self, started: Instant) -> Instant {
        let now = Instant::now();
        self.inference += (now - started).as_secs_f64();
        now
    }

    pub fn waited(&mut self, seconds: f64) {
        self.waiting += seconds;
    }

    /// The parts since the previous call (or the start), and a new period.
    pub fn take(&mut self) -> ActorTime {
        let now = Instant::now();
        let wall = (now - self.since).as_secs_f64();
        let t = ActorTime {
            wall_seconds: wall,
            env_seconds: self.env,
            inference_seconds: self.inference,
            waiting_seconds: self.waiting,
        };
        *self = Timing {
            since: now,
            ..Timing::new()
        };
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_parts_add_up_to_at_most_the_wall_time_and_start_again() {
        let mut t = Timing::new();
        let a = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let b = t.env(a);
        std::thread::sleep(Duration::from_millis(10));
        t.inference(b);
        t.waited(0.005);
        let first = t.take();
        assert!(first.env_seconds >= 0.02 && first.inference_seconds >= 0.01);
        assert_eq!(first.waiting_seconds, 0.005);
        let parts = first.env_seconds + first.inference_seconds;
        assert!(parts <= first.wall_seconds, "{first:?}");
        let second = t.take();
        assert_eq!(
            (
                second.env_seconds,
                second.inference_seconds,
                second.waiting_seconds
            ),
            (0.0, 0.0, 0.0)
        );
        assert!(second.wall_seconds < first.wall_seconds);
    }
}
