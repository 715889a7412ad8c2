//! Gymnasium's MuJoCo tasks (`gym:HalfCheetah-v5`, `envpool:Hopper-v5`, ...):
//! CleanRL's `ppo_continuous_action` settings for every task, and on top of
//! them what each task's recorded search (`configs/sweeps/`,
//! docs/experiments.md) chose.

use super::*;

/// Gymnasium's MuJoCo environments, by name without the version.
const MUJOCO_TASKS: [&str; 11] = [
    "Ant",
    "HalfCheetah",
    "Hopper",
    "Humanoid",
    "HumanoidStandup",
    "InvertedDoublePendulum",
    "InvertedPendulum",
    "Pusher",
    "Reacher",
    "Swimmer",
    "Walker2d",
];

/// The MuJoCo task a `gym:` or `envpool:` id names (`gym:Hopper-v5` ->
/// `Hopper`), whatever its version.
pub(super) fn mujoco_task(env_id: &str) -> Option<&str> {
    let id = env_id
        .strip_prefix("gym:")
        .or_else(|| env_id.strip_prefix("envpool:"))?;
    let (name, version) = id.rsplit_once("-v")?;
    let numbered = !version.is_empty() && version.chars().all(|c| c.is_ascii_digit());
    (numbered && MUJOCO_TASKS.contains(&name)).then_some(name)
}

impl RunConfig {
    /// CleanRL's settings: 64x64 tanh torsos, observation normalisation and
    /// reward scaling, 2,048 samples per update (2 actors x 8 envs x 128
    /// steps), 10 epochs of 32 minibatches, lr 3e-4 annealed over 1M steps.
    pub(super) fn tune_for_mujoco(&mut self, task: &str) {
        let c = self;
        c.run.total_steps = 1_000_000;
        c.run.local_actors = 2;
        (c.env.envs_per_actor, c.env.rollout_length) = (8, 128);
        c.learner.batches_per_update = 2;
        c.network.hidden = vec![64, 64];
        c.network.activation = Activation::Tanh;
        c.network.obs_norm = true;
        let p = &mut c.ppo;
        (p.gamma, p.gae_lambda) = (0.99, 0.95);
        (p.learning_rate, p.anneal_lr) = (3e-4, true);
        (p.epochs, p.minibatches) = (10, 32);
        (p.clip_coef, p.ent_coef) = (0.2, 0.0);
        p.scale_rewards = true;
        p.max_grad_norm = 0.5;
        c.eval.interval = 20;
        c.network.init_std = 1.0;
        // configs/sweeps/halfcheetah.toml (2026-11-28): a small initial std
        // (the zoo's 0.135) and its gamma 0.98, lambda 0.92 took seeds 1-3
        // from 1,599-3,097 to 5,243-5,531; halfcheetah-round4.toml: std 0.2
        // with lr 5e-4, to 5,508-5,935 (median 5,877, the zoo's 5,819). On
        // Hopper and Walker2d (configs/sweeps/hopper.toml, walker2d.toml)
        // a small std lost a seed in three (378 on Hopper); CleanRL's
        // settings stay.
        if task == "HalfCheetah" {
            (c.ppo.gamma, c.ppo.gae_lambda) = (0.98, 0.92);
            c.network.init_std = 0.2;
            c.ppo.learning_rate = 5e-4;
        }
        // configs/sweeps/ant-round1.toml (2026-11-28/29): initial std 0.5
        // took seeds 1-3 from 898-1,504 (median 1,009) to 1,536-2,306
        // (median 1,992, the zoo's 1,327); std 0.2 with lr 5e-4 gave a
        // median of 1,825, HalfCheetah's whole preset less.
        // humanoid-round1.toml (2026-11-29): std 0.5 took the median from
        // 765 to 958 (CleanRL's 716); std 0.2 did less.
        if task == "Ant" || task == "Humanoid" {
            c.network.init_std = 0.5;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mujoco_ids_are_known_by_name_whatever_the_version_and_source() {
        assert_eq!(mujoco_task("gym:HalfCheetah-v5"), Some("HalfCheetah"));
        assert_eq!(mujoco_task("envpool:Walker2d-v4"), Some("Walker2d"));
        assert_eq!(mujoco_task("gym:Humanoid-v5"), Some("Humanoid"));
        for other in [
            "HalfCheetah-v5",
            "py:HalfCheetah-v5",
            "gym:HalfCheetah",
            "gym:HalfCheetah-v",
            "gym:HalfCheetah-vx",
            "gym:Cheetah-v5",
            "gym:ALE/Breakout-v5",
        ] {
            assert_eq!(mujoco_task(other), None, "{other}");
        }
    }

    #[test]
    fn every_mujoco_task_takes_the_preset_with_no_flags() {
        for task in MUJOCO_TASKS {
            let c = RunConfig::preset(&format!("gym:{task}-v5")).expect("preset");
            assert!(c.network.obs_norm && c.ppo.scale_rewards, "{task}");
            assert_eq!(c.run.total_steps, 1_000_000, "{task}");
            assert_eq!(c.env.envs_per_actor * c.env.rollout_length * 2, 2048);
        }
        let cheetah = RunConfig::preset("envpool:HalfCheetah-v5").expect("preset");
        assert_eq!(cheetah.network.init_std, 0.2);
        assert_eq!(cheetah.ppo.learning_rate, 5e-4);
        assert_eq!((cheetah.ppo.gamma, cheetah.ppo.gae_lambda), (0.98, 0.92));
        let ant = RunConfig::preset("gym:Ant-v5").expect("preset");
        assert_eq!(ant.network.init_std, 0.5);
        assert_eq!(ant.ppo.learning_rate, 3e-4);
        assert_eq!((ant.ppo.gamma, ant.ppo.gae_lambda), (0.99, 0.95));
        let humanoid = RunConfig::preset("gym:Humanoid-v5").expect("preset");
        assert_eq!(humanoid.network.init_std, 0.5);
        assert_eq!(humanoid.ppo, ant.ppo);
        let hopper = RunConfig::preset("gym:Hopper-v5").expect("preset");
        assert_eq!(hopper.network.init_std, 1.0);
        assert_eq!((hopper.ppo.gamma, hopper.ppo.gae_lambda), (0.99, 0.95));
    }

    /// configs/mujoco.toml is CleanRL's settings whatever the task's preset.
    #[test]
    fn the_cleanrl_run_file_undoes_every_task_tuning() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/mujoco.toml");
        let text = std::fs::read_to_string(file).expect("configs/mujoco.toml");
        let table: toml::Table = toml::from_str(&text).expect("toml");
        // The preset, then the file, as `resolve` does (without asking Python
        // whether the env exists).
        let with = |id: &str| {
            let mut value = toml::Table::try_from(RunConfig::preset(id).expect("preset")).unwrap();
            merge_table(&mut value, table.clone(), "").expect("merges");
            let c: RunConfig = toml::Value::Table(value).try_into().expect("a config");
            c
        };
        let (cheetah, hopper) = (with("gym:HalfCheetah-v5"), with("gym:Hopper-v5"));
        assert_eq!(cheetah.network, hopper.network);
        assert_eq!(cheetah.ppo, hopper.ppo);
    }
}
