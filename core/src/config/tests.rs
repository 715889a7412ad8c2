//! The configuration's resolution, refusals and presets.

use super::*;

#[test]
fn every_env_has_a_valid_preset() {
    for id in sebulba_envs::ENV_IDS {
        let c = RunConfig::resolve(Some(id), None, &[]).unwrap();
        assert_eq!(c.env.id, *id);
    }
}

#[test]
fn set_overrides_and_keeps_types() {
    let c = RunConfig::resolve(
        Some("CartPole-v1"),
        None,
        &[
            "ppo.learning_rate=1".into(),
            "network.hidden=[32, 16]".into(),
            "network.activation=relu".into(),
        ],
    )
    .unwrap();
    assert_eq!(c.ppo.learning_rate, 1.0);
    assert_eq!(c.network.hidden, vec![32, 16]);
    assert_eq!(c.network.activation, Activation::Relu);
    // `auto` picks the fused engine exactly where it applies.
    let engine = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let mut c = RunConfig::resolve(Some("CartPole-v1"), None, &sets).unwrap();
        crate::device_choice::resolve(&mut c);
        c.learner.engine.use_fused(&c.learner.devices, &c.network)
    };
    assert!(engine(&[]));
    assert!(engine(&["learner.engine=fused"]));
    assert!(!engine(&["learner.engine=burn"]));
    assert!(!engine(&["network.layer_norm=pre"]));
    assert!(!engine(&["learner.devices=[\"cpu\", \"cpu\"]"]));
    // A run file written before the field existed still reads (as `auto`).
    let mut old = RunConfig::preset("CartPole-v1").unwrap().to_toml();
    old = old.replace("engine = \"auto\"\n", "");
    assert!(!old.contains("engine"));
    let c: RunConfig = toml::from_str(&old).unwrap();
    assert_eq!(c.learner.engine, LearnerEngine::Auto);
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    let e = RunConfig::resolve(Some("CartPole-v1"), None, &["ppo.lerning_rate=0.1".into()])
        .unwrap_err();
    assert_eq!(e.to_string(), "unknown config key `ppo.lerning_rate`");
    let e = RunConfig::resolve(Some("CartPole-v1"), None, &["ppo.epochs=abc".into()]).unwrap_err();
    assert!(e.to_string().contains("`ppo.epochs`"), "{e}");
    let e = RunConfig::resolve(Some("CartPole-v1"), None, &["ppo.gamma=1.5".into()]).unwrap_err();
    assert!(e.to_string().contains("`ppo.gamma`"), "{e}");
    let e = RunConfig::resolve(
        Some("CartPole-v1"),
        None,
        &["network.activation=gelu".into()],
    )
    .unwrap_err();
    assert!(e.to_string().contains("gelu"), "{e}");
    let e = RunConfig::resolve(
        Some("CartPole-v1"),
        None,
        &[
            "learner.engine=fused".into(),
            "learner.devices=[\"cpu\", \"cpu\"]".into(),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("`learner.engine`"), "{e}");
    let e =
        RunConfig::resolve(Some("CartPole-v1"), None, &["learner.engine=jit".into()]).unwrap_err();
    assert!(e.to_string().contains("jit"), "{e}");
    let e = RunConfig::resolve(Some("Nope-v0"), None, &[]).unwrap_err();
    assert!(e.to_string().contains("Nope-v0"), "{e}");
    assert!(matches!(
        RunConfig::resolve(None, None, &["novalue".into()]),
        Err(ConfigError::BadOverride(_))
    ));
}

/// Past selves need a game, and no deterministic run; a run file written before
/// the section existed reads as none.
#[test]
fn past_selves_are_refused_where_they_cannot_apply() {
    let set = |id: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        RunConfig::resolve(Some(id), None, &sets)
    };
    let c = set("Nim-v0", &["selfplay.past_fraction=0.2"]).unwrap();
    assert_eq!(c.selfplay.past_fraction, 0.2);
    for (id, sets) in [
        ("CartPole-v1", &["selfplay.past_fraction=0.2"][..]),
        (
            "Nim-v0",
            &["selfplay.past_fraction=0.2", "run.deterministic=true"][..],
        ),
        ("Nim-v0", &["selfplay.past_fraction=1.5"][..]),
    ] {
        let e = set(id, sets).unwrap_err();
        assert!(e.to_string().contains("`selfplay.past_fraction`"), "{e}");
    }
    // Rule players: a game, a fraction within [0, 1] summing with the past
    // one to at most 1; deterministic runs may have them.
    let c = set(
        "BigTwo-v0",
        &["selfplay.rule_fraction=0.3", "selfplay.past_fraction=0.7"],
    )
    .unwrap();
    assert!(c.selfplay.seats_others());
    set(
        "Nim-v0",
        &["selfplay.rule_fraction=1", "run.deterministic=true"],
    )
    .unwrap();
    for (id, sets) in [
        ("CartPole-v1", &["selfplay.rule_fraction=0.2"][..]),
        ("Nim-v0", &["selfplay.rule_fraction=-0.1"][..]),
        (
            "Nim-v0",
            &["selfplay.rule_fraction=0.6", "selfplay.past_fraction=0.5"][..],
        ),
    ] {
        let e = set(id, sets).unwrap_err();
        assert!(e.to_string().contains("`selfplay.rule_fraction`"), "{e}");
    }
    assert!(!SelfPlayConfig::default().seats_others());
    let e = set("Nim-v0", &["selfplay.past_versions=0"]).unwrap_err();
    assert!(e.to_string().contains("`selfplay.past_versions`"), "{e}");
    let old = RunConfig::preset("Nim-v0").unwrap().to_toml();
    let i = old.find("[selfplay]").expect("section");
    let c: RunConfig = toml::from_str(&old[..i]).unwrap();
    assert_eq!(c.selfplay, SelfPlayConfig::default());
}

/// DQN needs discrete actions, one player, the env's own rewards and a
/// replay memory within bounds; a run file written before the algorithm
/// existed reads as PPO with the default `[dqn]` section.
#[test]
fn dqn_is_refused_where_it_cannot_apply() {
    let set = |id: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        RunConfig::resolve(Some(id), None, &sets)
    };
    let c = set(
        "CartPole-v1",
        &["run.algorithm=dqn", "ppo.scale_rewards=false"],
    )
    .unwrap();
    assert_eq!(c.run.algorithm, Algorithm::Dqn);
    for (id, sets, key) in [
        (
            "Pendulum-v1",
            &["run.algorithm=dqn", "ppo.scale_rewards=false"][..],
            "run.algorithm",
        ),
        ("Nim-v0", &["run.algorithm=dqn"][..], "run.algorithm"),
        (
            "CartPole-v1",
            &["run.algorithm=dqn", "ppo.scale_rewards=true"][..],
            "ppo.scale_rewards",
        ),
        (
            "CartPole-v1",
            &["dqn.epsilon_end=1.5"][..],
            "dqn.epsilon_end",
        ),
        (
            "CartPole-v1",
            &["dqn.replay_ratio=0"][..],
            "dqn.replay_ratio",
        ),
    ] {
        let e = set(id, sets).unwrap_err();
        assert!(
            e.to_string().contains(&format!("`{key}`")),
            "{id} {sets:?}: {e}"
        );
    }
    // PPO's minibatch rule does not apply: one step per update of one
    // env, on two devices (each takes a shard of DQN's batch of 128).
    set(
        "Acrobot-v1",
        &["env.rollout_length=1", "learner.devices=[\"cpu\", \"cpu\"]"],
    )
    .unwrap();
    // 10M transitions of 100 floats: over the replay memory's limit.
    let mut big = c.clone();
    big.dqn.buffer_size = 10_000_000;
    let mut spec = sebulba_envs::env_spec("CartPole-v1").unwrap();
    assert!(big.check_dqn(&spec).is_ok());
    spec.obs_dim = 100;
    let e = big.check_dqn(&spec).unwrap_err();
    assert!(e.to_string().contains("`dqn.buffer_size`"), "{e}");
    let e = set("CartPole-v1", &["run.algorithm=sarsa"]).unwrap_err();
    assert!(e.to_string().contains("sarsa"), "{e}");
    let old = RunConfig::preset("CartPole-v1").unwrap().to_toml();
    let old = old.replace("algorithm = \"ppo\"\n", "");
    let old = &old[..old.find("[dqn]").expect("section")];
    let c: RunConfig = toml::from_str(old).unwrap();
    assert_eq!(c.run.algorithm, Algorithm::Ppo);
    assert_eq!(c.dqn, DqnConfig::default());
}

/// The run files under configs/ resolve on their presets; the Acrobot
/// PPO file gives back the PPO preset Acrobot had before DQN.
#[test]
fn the_shipped_run_files_resolve() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let acrobot = dir.join("acrobot-ppo.toml");
    let c = RunConfig::resolve(Some("Acrobot-v1"), Some(&acrobot), &[]).unwrap();
    assert_eq!(c.run.algorithm, Algorithm::Ppo);
    assert_eq!(
        (c.run.total_steps, c.samples_per_update(), c.ppo.epochs),
        (2_000_000, 512, 4)
    );
    assert!(c.network.obs_norm && c.ppo.scale_rewards && !c.network.shared_torso);
    let preset = RunConfig::preset("Acrobot-v1").unwrap();
    assert_eq!(preset.run.algorithm, Algorithm::Dqn);
    let mujoco = dir.join("mujoco.toml");
    RunConfig::resolve(Some("Pendulum-v1"), Some(&mujoco), &[]).unwrap();
}

/// A forced lag needs a deterministic run and must not exceed what the learner
/// keeps; within both it resolves.
#[test]
fn a_forced_lag_needs_a_deterministic_run_and_room_under_the_stale_limit() {
    let set = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        RunConfig::resolve(Some("CartPole-v1"), None, &sets)
    };
    let c = set(&[
        "run.deterministic=true",
        "run.forced_lag=2",
        "learner.max_policy_lag=2",
    ])
    .unwrap();
    assert_eq!(c.run.forced_lag, 2);
    for sets in [
        &["run.forced_lag=1"][..],
        &["run.deterministic=true", "run.forced_lag=3"][..],
        &[
            "run.deterministic=true",
            "run.forced_lag=65",
            "learner.max_policy_lag=100",
        ][..],
    ] {
        let e = set(sets).unwrap_err();
        assert!(e.to_string().contains("`run.forced_lag`"), "{sets:?}: {e}");
    }
}

/// The budget is the further spent of steps and time; the run is over at
/// either end; a deterministic run cannot stop by the clock.
#[test]
fn a_time_limit_ends_the_run_and_the_annealing_with_the_step_budget() {
    let set = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        RunConfig::resolve(Some("CartPole-v1"), None, &sets)
    };
    let steps_only = set(&["run.total_steps=1000"]).unwrap();
    assert_eq!(steps_only.run.time_limit_secs, 0);
    assert_eq!(steps_only.budget_used(250, 1e9), 0.25);
    assert!(!steps_only.budget_spent(999, 1e9));
    assert!(steps_only.budget_spent(1000, 0.0));
    let c = set(&["run.total_steps=1000", "run.time_limit_secs=100"]).unwrap();
    // Time further along than steps, then steps further than time.
    assert_eq!(c.budget_used(250, 50.0), 0.5);
    assert_eq!(c.budget_used(750, 50.0), 0.75);
    assert_eq!(c.budget_used(0, 0.0), 0.0);
    assert!(c.budget_used(10, 150.0) > 1.0);
    assert!(!c.budget_spent(999, 99.9));
    assert!(c.budget_spent(10, 100.0));
    assert!(c.budget_spent(1000, 1.0));
    for (sets, why) in [
        (
            &["run.deterministic=true", "run.time_limit_secs=60"][..],
            "deterministic",
        ),
        (&["run.time_limit_secs=2000000000"][..], "outside"),
        (&["run.time_limit_secs=-5"][..], "run.time_limit_secs"),
    ] {
        let e = set(sets).unwrap_err().to_string();
        assert!(e.contains("`run.time_limit_secs`"), "{sets:?}: {e}");
        assert!(e.contains(why), "{sets:?}: {e}");
    }
}

#[test]
fn big_two_trains_on_wins_with_one_torso_and_a_bad_scoring_is_named() {
    let set = |id: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        RunConfig::resolve(Some(id), None, &sets)
    };
    for id in ["BigTwo-v0", "BigTwo-v1", "BigTwo-v2"] {
        let c = set(id, &[]).unwrap();
        assert_eq!(c.env.kwargs_json(), r#"{"scoring":"wins"}"#, "{id}");
        assert!(c.network.shared_torso, "{id}");
        assert_eq!(c.ppo.learning_rate, 6e-4, "{id}");
        assert_eq!(c.ppo.ent_coef, 0.03, "{id}");
        assert_eq!(c.run.time_limit_secs, 1800, "{id}");
        assert!(
            c.budget_used(20_000_000, 900.0) < 0.5 + 1e-9,
            "{id}: the clock binds"
        );
    }
    assert!(!set("Nim-v0", &[]).unwrap().network.shared_torso);
    assert_eq!(set("Nim-v0", &[]).unwrap().ppo.ent_coef, 0.01);
    assert_eq!(set("Nim-v0", &[]).unwrap().env.kwargs_json(), "");
    let c = set("BigTwo-v1", &["env.kwargs.scoring=game"]).unwrap();
    assert_eq!(c.env.kwargs_json(), r#"{"scoring":"game"}"#);
    let e = set("BigTwo-v1", &["env.kwargs.scoring=cards"]).unwrap_err();
    assert!(e.to_string().contains("env.kwargs.scoring"), "{e}");
}

#[test]
fn file_then_set_precedence() {
    let dir = std::env::temp_dir().join(format!("sebulba-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.toml");
    std::fs::write(
        &path,
        "[env]\nid = \"Pendulum-v1\"\n[ppo]\nepochs = 3\nent_coef = 0.01\n",
    )
    .unwrap();
    let c = RunConfig::resolve(Some("CartPole-v1"), Some(&path), &["ppo.epochs=5".into()]).unwrap();
    assert_eq!(c.env.id, "Pendulum-v1");
    assert_eq!(c.ppo.epochs, 5);
    assert_eq!(c.ppo.ent_coef, 0.01);
    std::fs::write(&path, "[ppo]\nbogus = 1\n").unwrap();
    let e = RunConfig::resolve(None, Some(&path), &[]).unwrap_err();
    assert_eq!(e.to_string(), "unknown config key `ppo.bogus`");
    // The resolved config written to a run dir reads back identically.
    let c2: RunConfig = toml::from_str(&c.to_toml()).unwrap();
    assert_eq!(c, c2);
}

/// `gym:CartPole-v1` learns with `CartPole-v1`'s preset; a `gym:` id with
/// no native twin keeps the generic external preset.
#[test]
fn gymnasium_copies_of_native_envs_get_their_twins_presets() {
    for id in ["CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0"] {
        let native = RunConfig::preset(id).unwrap();
        for source in ["gym", "envpool"] {
            let mut copy = RunConfig::preset(&format!("{source}:{id}")).unwrap();
            assert_eq!(copy.env.id, format!("{source}:{id}"));
            copy.env.id = id.to_string();
            assert_eq!(copy.to_toml(), native.to_toml(), "{source}:{id}");
        }
    }
    // EnvPool's Atari games get the Atari preset, its MuJoCo envs Gymnasium's.
    let atari = RunConfig::preset("envpool:ALE/Breakout-v5").unwrap();
    assert_eq!(
        atari.network,
        RunConfig::preset("ale:Breakout").unwrap().network
    );
    let mut cheetah = RunConfig::preset("envpool:HalfCheetah-v5").unwrap();
    cheetah.env.id = "gym:HalfCheetah-v5".into();
    assert_eq!(
        cheetah.to_toml(),
        RunConfig::preset("gym:HalfCheetah-v5").unwrap().to_toml()
    );
    let other = RunConfig::preset("gym:HalfCheetah-v5").unwrap();
    assert!(other.network.obs_norm);
    assert_eq!(
        other.run.total_steps,
        RunConfig::preset("py:x:Y").unwrap().run.total_steps
    );
}

/// `run.local_actors_as`: processes for Python envs by default, threads for
/// native and ALE envs; either on request; anything else refused by name.
#[test]
fn local_actors_are_processes_for_python_envs_by_default() {
    let resolve = |id: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        RunConfig::resolve(Some(id), None, &sets)
    };
    let hosting = |id: &str| RunConfig::preset(id).unwrap().run.local_actors_as;
    assert!(hosting("gym:HalfCheetah-v5").processes_for("gym:HalfCheetah-v5"));
    assert!(hosting("py:m:E").processes_for("py:m:E"));
    assert!(!hosting("CartPole-v1").processes_for("CartPole-v1"));
    assert!(!hosting("ale:Breakout").processes_for("ale:Breakout"));
    assert!(!hosting("envpool:HalfCheetah-v5").processes_for("envpool:HalfCheetah-v5"));
    assert!(!ActorHosting::Threads.processes_for("gym:Hopper-v5"));
    let c = resolve("CartPole-v1", &["run.local_actors_as=\"processes\""]).unwrap();
    assert!(c.run.local_actors_as.processes_for("CartPole-v1"));
    let e = resolve("CartPole-v1", &["run.local_actors_as=\"fibers\""]).unwrap_err();
    assert!(e.to_string().contains("local_actors_as"), "{e}");
}

#[test]
fn atari_evaluates_epsilon_greedy_and_the_rest_greedy_within_budgets() {
    let set = |id: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        RunConfig::resolve(Some(id), None, &sets)
    };
    let atari = RunConfig::preset("ale:Breakout").unwrap();
    assert_eq!(
        (atari.eval.policy, atari.eval.epsilon),
        (EvalPolicy::Epsilon, 0.05)
    );
    assert_eq!(
        (atari.eval.max_steps, atari.eval.final_max_steps),
        (80_000, 300_000)
    );
    for id in [
        "CartPole-v1",
        "MinAtar/Breakout-v1",
        "BigTwo-v1",
        "Acrobot-v1",
    ] {
        let c = RunConfig::preset(id).unwrap();
        assert_eq!(c.eval.policy, EvalPolicy::Greedy, "{id}");
        assert_eq!(
            (c.eval.max_steps, c.eval.final_max_steps),
            (100_000, 1_000_000),
            "{id}"
        );
        assert_eq!(c.eval.cpu_share, 0.25, "{id}");
    }
    let c = set(
        "CartPole-v1",
        &[
            "eval.policy=sample",
            "eval.epsilon=0.001",
            "eval.cpu_share=1",
        ],
    )
    .unwrap();
    assert_eq!(
        (c.eval.policy, c.eval.epsilon, c.eval.cpu_share),
        (EvalPolicy::Sample, 0.001, 1.0)
    );
    for (sets, key) in [
        (&["eval.policy=argmax"][..], "eval.policy"),
        (&["eval.epsilon=1.5"][..], "eval.epsilon"),
        (&["eval.max_steps=0"][..], "eval.max_steps"),
        (
            &["eval.final_max_steps=2000000000"][..],
            "eval.final_max_steps",
        ),
        (&["eval.cpu_share=0"][..], "eval.cpu_share"),
        // A DQN's head is Q-values: nothing to sample.
        (
            &["run.algorithm=dqn", "eval.policy=sample"][..],
            "eval.policy",
        ),
    ] {
        let e = set("CartPole-v1", sets).unwrap_err().to_string();
        assert!(e.contains(key), "{sets:?}: {e}");
    }
    assert!(set("Acrobot-v1", &["eval.policy=epsilon"]).is_ok());
}

/// `network.core` and `network.core_size` read and range-checked; what a
/// core does not combine with refused naming the field.
#[test]
fn a_recurrent_core_is_read_checked_and_refused_where_it_does_not_fit() {
    let set = |env: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        RunConfig::resolve(Some(env), None, &sets)
    };
    let c = set("CartPole-v1", &[]).unwrap();
    assert_eq!((c.network.core, c.network.core_size), (CoreKind::None, 128));
    let c = set("CartPole-v1", &["network.core=gru", "network.core_size=32"]).unwrap();
    assert_eq!(
        (c.network.core, c.network.state_width()),
        (CoreKind::Gru, 64)
    );
    let c = set("CartPoleNoVel-v1", &[]).unwrap();
    assert_eq!(
        c.network.core,
        CoreKind::Lstm,
        "the memory task's preset remembers"
    );
    let e = set("CartPole-v1", &["network.core=gru", "network.core_size=0"]).unwrap_err();
    assert!(e.to_string().contains("network.core_size"), "{e}");
    let e = set("CartPole-v1", &["network.core=transformer"]).unwrap_err();
    assert!(e.to_string().contains("transformer"), "{e}");
    let e = set("CartPole-v1", &["network.core=lstm", "run.algorithm=dqn"]).unwrap_err();
    assert!(
        e.to_string().contains("network.core") && e.to_string().contains("dqn"),
        "{e}"
    );
    // The state width is the network's.
    for shared in [false, true] {
        let mut n = c.network.clone();
        n.shared_torso = shared;
        let spec =
            crate::model::ModelSpec::new(&sebulba_envs::env_spec("CartPoleNoVel-v1").unwrap(), &n);
        assert_eq!(spec.unwrap().arch().state_width(), n.state_width());
    }
}

mod sequences;
