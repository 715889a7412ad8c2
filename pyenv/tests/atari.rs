//! Atari through every path users take: `ale:Game` (ALE's own vector env),
//! `gym:ALE/...` (Gymnasium's wrappers) and `envpool:ALE/...` (EnvPool). The frame is a byte image,
//! channels last with the newest frame last; a training env ends the
//! learner's episode at each lost life and clips rewards to their sign,
//! while its episode statistics, and an evaluation env, are whole games at
//! the raw score: the same seeds and actions give the same game in both.
//!
//! They need ale-py in the venv (scripts/python-env.sh); skipped without it,
//! saying so, and failed instead under `SEBULBA_REQUIRE_PYTHON=1` (CI).

mod common;
use common::{imports, python};

use sebulba_envs::{
    ActionBatch, ActionSpace, EpisodeStats, ObsDtype, Purpose, VecStepOut, env_spec_with,
    make_vector_env,
};

fn atari() -> bool {
    python() && imports("ale_py")
}

/// The Atari ids of every source: ALE's vector env, Gymnasium's wrappers,
/// and EnvPool's when it imports (required under CI).
fn sources(game: &str) -> Vec<String> {
    let mut ids = vec![format!("ale:{game}"), format!("gym:ALE/{game}-v5")];
    if imports("envpool") {
        ids.push(format!("envpool:ALE/{game}-v5"));
    }
    ids
}

#[test]
fn an_atari_frame_stack_is_a_byte_image_channels_last() {
    if !atari() {
        return;
    }
    for id in sources("Breakout") {
        let id = id.as_str();
        let spec = env_spec_with(id, "").expect("spec");
        assert_eq!(spec.image, Some([84, 84, 4]), "{id}");
        assert_eq!(spec.obs_dim, 84 * 84 * 4);
        assert_eq!(spec.obs_dtype, ObsDtype::U8);
        assert_eq!(spec.action_space, ActionSpace::Discrete { n: 4 });
        assert_eq!(spec.input_scale(), 1.0 / 255.0);
        assert!(spec.obs_high.iter().all(|&h| h == 255.0));
        // The stack shifts by one frame a step: the newest is the last channel.
        let mut v = make_vector_env(id, "", 2, 3, Purpose::Evaluate).expect("env");
        let mut obs = vec![0.0; 2 * spec.obs_dim];
        v.reset(&mut obs).expect("reset");
        let mut out = v.new_step_out();
        let channel =
            |o: &[f32], c: usize| -> Vec<f32> { o.iter().skip(c).step_by(4).copied().collect() };
        let mut moved = 0;
        for t in 0..40 {
            let before = out.obs.clone();
            v.step(ActionBatch::Discrete(&[1, (t % 4) as u32]), &mut out)
                .expect("step");
            if t == 0 || out.terminated.iter().any(|&d| d) {
                continue;
            }
            for e in 0..2 {
                let (a, b) = (&before[e * spec.obs_dim..], &out.obs[e * spec.obs_dim..]);
                let (a, b) = (&a[..spec.obs_dim], &b[..spec.obs_dim]);
                for c in 0..3 {
                    assert_eq!(
                        channel(b, c),
                        channel(a, c + 1),
                        "{id}: channel {c} at step {t}"
                    );
                }
                moved += usize::from(channel(b, 3) != channel(a, 3));
                assert!(
                    b.iter()
                        .all(|&x| x == x.trunc() && (0.0..=255.0).contains(&x))
                );
            }
        }
        assert!(moved > 0, "{id}: the newest frame never changed");
    }
}

/// `env.kwargs.frame_stack` on every path: one frame for a policy with
/// memory, the last channel of the default stack; the backends' own names
/// and bad values refused by name.
#[test]
fn frame_stack_sets_the_frames_an_observation_holds_on_every_path() {
    if !atari() {
        return;
    }
    for id in sources("Breakout") {
        let id = id.as_str();
        let one = env_spec_with(id, r#"{"frame_stack": 1}"#).expect("spec");
        assert_eq!(one.image, Some([84, 84, 1]), "{id}");
        assert_eq!(one.obs_dim, 84 * 84);
        let two = env_spec_with(id, r#"{"frame_stack": 2}"#).expect("spec");
        assert_eq!(two.image, Some([84, 84, 2]), "{id}");
        // The same seed's first frame alone, and newest in a stack of 4.
        let mut single =
            make_vector_env(id, r#"{"frame_stack": 1}"#, 1, 7, Purpose::Evaluate).expect("env");
        let mut stacked = make_vector_env(id, "", 1, 7, Purpose::Evaluate).expect("env");
        let (mut a, mut b) = (vec![0.0; one.obs_dim], vec![0.0; 4 * one.obs_dim]);
        single.reset(&mut a).expect("reset");
        stacked.reset(&mut b).expect("reset");
        let newest: Vec<f32> = b.iter().skip(3).step_by(4).copied().collect();
        assert_eq!(a, newest, "{id}: one frame is the stack's newest");
        for (kwargs, key) in [
            (r#"{"frame_stack": 0}"#, "frame_stack"),
            (r#"{"frame_stack": true}"#, "frame_stack"),
            (r#"{"stack_num": 1}"#, "stack_num"),
        ] {
            let err = env_spec_with(id, kwargs).expect_err("refused").to_string();
            assert!(
                err.contains(&format!("env.kwargs.{key}")),
                "{id} {kwargs}: {err}"
            );
        }
    }
}

/// One env's record of a run: rewards, terminations and whole games.
#[derive(Default)]
struct Record {
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    games: Vec<(usize, EpisodeStats)>,
    obs_sum: Vec<f64>,
}

fn play(id: &str, purpose: Purpose, steps: usize) -> Record {
    let e = 2;
    let mut v = make_vector_env(id, "", e, 11, purpose).expect("env");
    let d = v.spec().obs_dim;
    let mut obs = vec![0.0; e * d];
    v.reset(&mut obs).expect("reset");
    let mut out: VecStepOut = v.new_step_out();
    let mut r = Record::default();
    let n = match &v.spec().action_space {
        ActionSpace::Discrete { n } => *n as u64,
        ActionSpace::Box { .. } => panic!("Atari acts discretely"),
    };
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for t in 0..steps {
        let a: Vec<u32> = (0..e)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % n) as u32
            })
            .collect();
        v.step(ActionBatch::Discrete(&a), &mut out).expect("step");
        r.rewards.extend(&out.reward);
        r.terminated.extend(&out.terminated);
        r.games.extend(out.episodes.iter().map(|g| (t, g.clone())));
        r.obs_sum.push(out.obs.iter().map(|&v| f64::from(v)).sum());
    }
    r
}

#[test]
fn training_ends_the_learners_episode_at_a_lost_life_and_clips_but_scores_whole_games_raw() {
    if !atari() {
        return;
    }
    for id in sources("SpaceInvaders") {
        let id = id.as_str();
        let steps = 1500;
        let train = play(id, Purpose::Train, steps);
        let eval = play(id, Purpose::Evaluate, steps);
        assert_eq!(train.obs_sum, eval.obs_sum, "{id}: the same game on both");
        // Raw scores are in points (5 to 200 an invader); training sees signs.
        assert!(eval.rewards.iter().any(|&r| r >= 5.0), "{id}: no raw score");
        for (t, r) in train.rewards.iter().zip(&eval.rewards) {
            assert_eq!(*t, r.signum() * f32::from(*r != 0.0), "{id}");
        }
        // Every game over ends both; lost lives end only the learner's.
        for (t, e) in train.terminated.iter().zip(&eval.terminated) {
            assert!(*t || !*e, "{id}: a game over training did not see");
        }
        let (lives, games) = (
            train.terminated.iter().filter(|&&t| t).count(),
            eval.terminated.iter().filter(|&&t| t).count(),
        );
        assert!(
            games >= 1 && lives >= 2 * games,
            "{id}: {lives} ends for {games} games"
        );
        // Both count the same whole games at the raw score.
        assert_eq!(train.games, eval.games, "{id}");
        let raw_total: f64 = eval.games.iter().map(|(_, g)| g.episode_return).sum();
        assert!(raw_total >= 5.0, "{id}: games scored {raw_total}");
    }
}

#[test]
fn atari_ids_and_options_are_checked() {
    if !atari() {
        return;
    }
    let e = env_spec_with("ale:NoSuchGame", "").unwrap_err().to_string();
    assert!(e.contains("no_such_game"), "{e}");
    let e = env_spec_with("ale:Pong", r#"{"autoreset_mode": "NextStep"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("env.kwargs.autoreset_mode"), "{e}");
    // ALE's own options pass through: fewer no-op starts, a different game.
    let pong = env_spec_with("ale:Pong", r#"{"noop_max": 10}"#).expect("Pong");
    assert_eq!(pong.image, Some([84, 84, 4]));
    assert_eq!(pong.action_space, ActionSpace::Discrete { n: 6 });
    assert_eq!(pong.max_episode_steps, 27_000);
}
