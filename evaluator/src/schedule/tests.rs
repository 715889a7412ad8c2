use super::*;

fn opts(interval: Option<u64>, episodes: Option<usize>) -> Overrides {
    Overrides {
        interval,
        episodes,
        ..Overrides::default()
    }
}

fn wire(interval: u64, episodes: u32, final_episodes: u32, earlier: u32) -> EvalSchedule {
    EvalSchedule {
        interval,
        episodes,
        final_episodes,
        earlier_versions: earlier,
        ..EvalSchedule::default()
    }
}

#[test]
fn without_a_run_schedule_a_game_plays_matches_of_a_thousand_games() {
    let game = opts(None, None).over("BigTwo-v0", None);
    assert_eq!(
        (
            game.interval,
            game.episodes,
            game.final_episodes,
            game.earlier_versions
        ),
        (100, 1000, 1000, 16)
    );
    let other = opts(None, None).over("CartPole-v1", None);
    assert_eq!(
        (other.interval, other.episodes, other.final_episodes),
        (10, 10, 100)
    );
    assert_eq!(other.policy, EvalPolicy::Greedy);
    assert_eq!(
        (other.max_steps, other.final_max_steps),
        (100_000, 1_000_000)
    );
}

#[test]
fn the_evaluators_own_options_win_over_the_runs_which_win_over_the_defaults() {
    // The Atari preset's schedule, as its learner publishes it.
    let atari = EvalSchedule {
        policy: "epsilon".into(),
        epsilon: 0.05,
        max_steps: 80_000,
        final_max_steps: 300_000,
        cpu_share: 0.25,
        video_every: 10,
        ..wire(250, 8, 30, 16)
    };
    let run = Schedule::published(&atari).expect("in range");
    assert_eq!(run.policy, EvalPolicy::Epsilon);
    assert_eq!((run.max_steps, run.final_max_steps), (80_000, 300_000));
    let followed = opts(None, None).over("ale:Breakout", Some(run));
    assert_eq!(followed, run);
    let mixed = Overrides {
        policy: Some(EvalPolicy::Sample),
        ..opts(Some(40), None)
    }
    .over("ale:Breakout", Some(run));
    assert_eq!(
        (mixed.interval, mixed.episodes, mixed.final_episodes),
        (40, 8, 30)
    );
    assert_eq!((mixed.policy, mixed.epsilon), (EvalPolicy::Sample, 0.05));
    assert_eq!(opts(None, Some(3)).over("Nim-v0", None).episodes, 3);
    // A local run's evaluator takes every value from the config.
    let config = sebulba_core::config::RunConfig::preset("ale:Breakout").expect("preset");
    let local = Overrides::all(&config.eval).over("ale:Breakout", None);
    assert_eq!(local, run);
}

#[test]
fn a_schedule_from_a_learner_before_the_protocol_fields_takes_the_defaults() {
    let old = Schedule::published(&wire(250, 8, 30, 16)).expect("in range");
    let d = Schedule::default_for("");
    assert_eq!(old.policy, EvalPolicy::Greedy);
    assert_eq!(
        (old.max_steps, old.final_max_steps, old.cpu_share),
        (d.max_steps, d.final_max_steps, d.cpu_share)
    );
}

#[test]
fn a_published_schedule_out_of_range_is_refused_naming_the_key() {
    let with = |f: fn(&mut EvalSchedule)| {
        let mut s = wire(250, 8, 30, 16);
        f(&mut s);
        s
    };
    let cases = [
        (wire(0, 8, 30, 16), "eval.interval"),
        (wire(1_000_001, 8, 30, 16), "eval.interval"),
        (wire(250, 0, 30, 16), "eval.episodes"),
        (wire(250, 10_001, 30, 16), "eval.episodes"),
        (wire(250, 8, 0, 16), "eval.final_episodes"),
        (wire(250, 8, u32::MAX, 16), "eval.final_episodes"),
        (wire(250, 8, 30, 1), "eval.earlier_versions"),
        (wire(250, 8, 30, 257), "eval.earlier_versions"),
        (with(|s| s.policy = "argmax".into()), "eval.policy"),
        (with(|s| s.policy = "\u{0}\n".into()), "eval.policy"),
        (with(|s| s.epsilon = 1.5), "eval.epsilon"),
        (with(|s| s.epsilon = -0.1), "eval.epsilon"),
        (with(|s| s.epsilon = f64::NAN), "eval.epsilon"),
        (with(|s| s.max_steps = u64::MAX), "eval.max_steps"),
        (
            with(|s| s.final_max_steps = 1_000_000_001),
            "eval.final_max_steps",
        ),
        (with(|s| s.cpu_share = 1.01), "eval.cpu_share"),
        (with(|s| s.cpu_share = -0.5), "eval.cpu_share"),
        (with(|s| s.cpu_share = f64::INFINITY), "eval.cpu_share"),
        (with(|s| s.video_every = 1_000_001), "eval.video_every"),
    ];
    for (s, key) in cases {
        let e = Schedule::published(&s).expect_err(key).to_string();
        assert!(e.contains(key), "{key}: {e}");
    }
    // The ranges' edges are accepted.
    assert!(Schedule::published(&wire(1, 1, 1, 2)).is_ok());
    assert!(Schedule::published(&wire(1_000_000, 10_000, 10_000, 256)).is_ok());
    let edges = EvalSchedule {
        policy: "sample".into(),
        epsilon: 1.0,
        max_steps: 1,
        final_max_steps: 1_000_000_000,
        cpu_share: 1.0,
        video_every: 1_000_000,
        ..wire(1, 1, 1, 2)
    };
    assert!(Schedule::published(&edges).is_ok());
    // 0 on the wire is never filming, not the default: a run that turned
    // videos off keeps them off.
    assert_eq!(
        Schedule::published(&wire(1, 1, 1, 2))
            .map(|s| s.video_every)
            .ok(),
        Some(0)
    );
}
