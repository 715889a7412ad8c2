//! Trajectories of a chosen shape for tests, benchmarks and examples, so that
//! none spells out every field: zeros and discrete action 0 by default, each
//! field set where a test cares, the shapes checked when built.

use super::{BatchActions, GameRows, Trajectory};
use sebulba_envs::Observations;
use sebulba_fused::PolicyState;

/// A [`Trajectory`] under construction; [`TrajectoryBuilder::build`] checks
/// that every array has its shape.
#[derive(Debug, Clone)]
pub struct TrajectoryBuilder {
    obs_dim: usize,
    trajectory: Trajectory,
    /// Truncated steps (index `t * E + e`) and their true final observations.
    finals: Vec<(usize, Vec<f32>)>,
}

impl TrajectoryBuilder {
    /// T steps of E envs with `obs_dim`-float observations, all zero, discrete
    /// action 0 everywhere, no episode ended.
    pub fn new(rollout_length: usize, envs_per_actor: usize, obs_dim: usize) -> Self {
        let steps = rollout_length * envs_per_actor;
        Self {
            obs_dim,
            trajectory: Trajectory {
                policy_version: 0,
                rollout_length,
                envs_per_actor,
                observations: vec![0.0; (rollout_length + 1) * envs_per_actor * obs_dim].into(),
                actions: BatchActions::Discrete(vec![0; steps]),
                action_masks: None,
                log_probs: vec![0.0; steps],
                rewards: vec![0.0; steps],
                terminated: vec![0; steps],
                truncated: vec![0; steps],
                final_observations: Observations::default(),
                discounted_returns: Vec::new(),
                episode_returns: Vec::new(),
                episode_lengths: Vec::new(),
                game: None,
                initial_state: PolicyState::zeros(0, envs_per_actor),
            },
            finals: Vec::new(),
        }
    }

    fn steps(&self) -> usize {
        self.trajectory.rollout_length * self.trajectory.envs_per_actor
    }

    pub fn policy_version(mut self, version: u64) -> Self {
        self.trajectory.policy_version = version;
        self
    }

    /// `[(T+1) * E * obs_dim]` observation rows, `f32` or bytes (the
    /// final observations then follow in the same dtype).
    pub fn observations(mut self, observations: impl Into<Observations>) -> Self {
        self.trajectory.observations = observations.into();
        self
    }

    /// Each observation float from its index.
    pub fn observations_from(self, f: impl FnMut(usize) -> f32) -> Self {
        let len = self.trajectory.observations.len();
        self.observations((0..len).map(f).collect::<Vec<f32>>())
    }

    /// `[T * E]` action indices.
    pub fn discrete(mut self, actions: Vec<i32>) -> Self {
        self.trajectory.actions = BatchActions::Discrete(actions);
        self
    }

    /// `[T * E * dim]` pre-tanh actions.
    pub fn continuous(mut self, actions: Vec<f32>) -> Self {
        self.trajectory.actions = BatchActions::Continuous(actions);
        self
    }

    /// `[T * E * n]` action masks (1 = allowed).
    pub fn action_masks(mut self, masks: Vec<u8>) -> Self {
        self.trajectory.action_masks = Some(masks);
        self
    }

    pub fn log_probs(mut self, log_probs: Vec<f32>) -> Self {
        self.trajectory.log_probs = log_probs;
        self
    }

    pub fn rewards(mut self, rewards: Vec<f32>) -> Self {
        self.trajectory.rewards = rewards;
        self
    }

    /// Step `i` (`t * E + e`) ends its episode by termination.
    pub fn terminate(mut self, i: usize) -> Self {
        self.trajectory.terminated[i] = 1;
        self
    }

    /// Step `i` (`t * E + e`) ends its episode by truncation, with the true
    /// final observation `final_observation`.
    pub fn truncate(mut self, i: usize, final_observation: Vec<f32>) -> Self {
        self.trajectory.truncated[i] = 1;
        self.finals.push((i, final_observation));
        self
    }

    /// `[T * E]` running discounted returns (a run that scales rewards).
    pub fn discounted_returns(mut self, returns: Vec<f32>) -> Self {
        self.trajectory.discounted_returns = returns;
        self
    }

    /// Finished episodes' returns and lengths.
    pub fn episodes(mut self, returns: Vec<f64>, lengths: Vec<u32>) -> Self {
        self.trajectory.episode_returns = returns;
        self.trajectory.episode_lengths = lengths;
        self
    }

    pub fn game(mut self, game: GameRows) -> Self {
        self.trajectory.game = Some(game);
        self
    }

    /// The trajectory.
    ///
    /// # Panics
    /// When an array does not have its shape, or a step is both terminated
    /// and truncated: a mistake in the test that built it.
    pub fn build(mut self) -> Trajectory {
        let (steps, d) = (self.steps(), self.obs_dim);
        self.finals.sort_by_key(|(i, _)| *i);
        self.finals.dedup_by_key(|(i, _)| *i);
        let t = &mut self.trajectory;
        let mut finals = Observations::with_capacity(t.observations.dtype(), self.finals.len() * d);
        for (_, row) in &self.finals {
            finals.push_f32(row);
        }
        t.final_observations = finals;
        let rows = t.truncated.iter().filter(|&&x| x == 1).count();
        let actions_fit = match &t.actions {
            BatchActions::Discrete(a) => a.len() == steps,
            // `dim` floats a step, for some dim >= 1.
            BatchActions::Continuous(a) => a.len() >= steps && a.len() % steps.max(1) == 0,
        };
        assert!(actions_fit, "trajectory field `actions`");
        for (field, len, want) in [
            (
                "observations",
                t.observations.len(),
                (steps + t.envs_per_actor) * d,
            ),
            ("log_probs", t.log_probs.len(), steps),
            ("rewards", t.rewards.len(), steps),
            ("final_observations", t.final_observations.len(), rows * d),
        ] {
            assert_eq!(len, want, "trajectory field `{field}`");
        }
        assert!(
            t.discounted_returns.is_empty() || t.discounted_returns.len() == steps,
            "trajectory field `discounted_returns`"
        );
        assert!(
            t.terminated
                .iter()
                .zip(&t.truncated)
                .all(|(a, b)| a & b == 0),
            "a step both terminated and truncated"
        );
        self.trajectory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_trajectory_has_every_shape_and_its_finals_in_step_order() {
        let t = TrajectoryBuilder::new(3, 2, 2)
            .truncate(4, vec![4.0, 4.5])
            .truncate(1, vec![1.0, 1.5])
            .terminate(2)
            .policy_version(7)
            .build();
        assert_eq!(t.observations.len(), 4 * 2 * 2);
        assert_eq!(t.final_observations, vec![1.0, 1.5, 4.0, 4.5].into());
        assert_eq!(t.terminated, [0, 0, 1, 0, 0, 0]);
        assert_eq!(t.truncated, [0, 1, 0, 0, 1, 0]);
        assert_eq!((t.policy_version, t.env_steps()), (7, 6));
    }

    #[test]
    #[should_panic(expected = "trajectory field `rewards`")]
    fn a_wrong_shape_is_refused() {
        TrajectoryBuilder::new(3, 2, 2)
            .rewards(vec![0.0; 5])
            .build();
    }
}
