//! Python environments through the path actors take (`make_vector_env` with
//! the provider installed): Gymnasium's CartPole and Pendulum transition for
//! transition against the native ones, reproducibility under a seed, the
//! spaces of a MuJoCo env, and the ways an env fails.
//!
//! They need a venv with gymnasium (scripts/python-env.sh makes `.venv`). A
//! machine without one skips them, saying so; with `SEBULBA_REQUIRE_PYTHON=1`
//! (as in CI) a missing venv fails them instead.

use pyo3::prelude::*;
use sebulba_envs::{
    Action, ActionBatch, ActionSpace, EnvError, Purpose, StateOrigin, TimeLimit, VectorEnv,
    env_spec_with, make_env, make_vector_env,
};

mod common;
use common::python;

/// A Gymnasium env made in Python beside the one under test, reset with the
/// same seed and stepped with the same actions: its RNG draws the same start
/// states, which the native twin is set to (the native envs' RNG is not
/// NumPy's).
struct Twin(Py<PyAny>);

impl Twin {
    fn new(id: &str, seed: u64) -> Self {
        Python::attach(|py| -> PyResult<Self> {
            let env = py.import("gymnasium")?.call_method1("make", (id,))?;
            env.call_method("reset", (), Some(&[("seed", seed)].into_py_dict(py)?))?;
            Ok(Twin(env.unbind()))
        })
        .expect("twin env")
    }

    fn state(&self) -> Vec<f64> {
        Python::attach(|py| -> PyResult<Vec<f64>> {
            let s = self.0.bind(py).getattr("unwrapped")?.getattr("state")?;
            py.import("numpy")?
                .call_method1("asarray", (s, "float64"))?
                .call_method0("tolist")?
                .extract()
        })
        .expect("state")
    }

    fn step(&self, action: Bound<'_, PyAny>) -> bool {
        let r = self
            .0
            .bind(action.py())
            .call_method1("step", (action,))
            .expect("step");
        let done: (bool, bool) = (
            r.get_item(2).and_then(|x| x.extract()).expect("terminated"),
            r.get_item(3).and_then(|x| x.extract()).expect("truncated"),
        );
        if done.0 || done.1 {
            self.0.bind(r.py()).call_method0("reset").expect("reset");
        }
        done.0 || done.1
    }
}

use pyo3::types::IntoPyDict;

/// Steps `gym:ID` (through the provider, 1 env) and the native ID from the
/// same start states with the same actions for `steps` steps; every
/// observation, reward and end flag must match exactly.
fn replay(id: &str, seed: u64, steps: usize, action: impl Fn(usize) -> Vec<f32>) -> usize {
    let gym_id = format!("gym:{id}");
    let mut py_env =
        make_vector_env(&gym_id, "", 1, seed, sebulba_envs::Purpose::Train).expect("python env");
    let env_seed = sebulba_envs::derive_env_seed(seed, 0);
    let twin = Twin::new(id, env_seed);
    let mut native = TimeLimit::new(make_env(id, 0).expect("native"));
    let d = native.env().spec().obs_dim;
    let (mut obs, mut native_obs) = (vec![0.0; d], vec![0.0; d]);
    py_env.reset(&mut obs).expect("reset");
    let set = |native: &mut TimeLimit, native_obs: &mut [f32], state: Vec<f64>| {
        native.reset(native_obs);
        native
            .env_mut()
            .set_state_from(&state, StateOrigin::Reset)
            .expect("state");
        native.env().observe(native_obs);
    };
    set(&mut native, &mut native_obs, twin.state());
    assert_eq!(obs, native_obs, "{id}: reset observation");
    let mut out = py_env.new_step_out();
    let mut episodes = 0;
    let discrete = py_env.spec().action_space.is_discrete();
    for t in 0..steps {
        let a = action(t);
        let ai = [a[0] as u32];
        let batch = if discrete {
            ActionBatch::Discrete(&ai)
        } else {
            ActionBatch::Continuous(&a)
        };
        py_env.step(batch, &mut out).expect("python step");
        let native_action = if discrete {
            Action::Discrete(ai[0] as usize)
        } else {
            Action::Continuous(&a)
        };
        let r = native.step(native_action, &mut native_obs).expect("native");
        assert_eq!(out.reward[0], r.reward as f32, "{id} step {t}: reward");
        assert_eq!(out.terminated[0], r.terminated, "{id} step {t}: terminated");
        assert_eq!(out.truncated[0], r.truncated, "{id} step {t}: truncated");
        let twin_done = Python::attach(|py| {
            let a = if discrete {
                ai[0].into_pyobject(py).expect("int").into_any()
            } else {
                py.import("numpy")
                    .and_then(|np| np.call_method1("array", (a.clone(), "float32")))
                    .expect("array")
            };
            twin.step(a)
        });
        assert_eq!(
            twin_done,
            r.terminated || r.truncated,
            "{id} step {t}: twin"
        );
        if r.terminated || r.truncated {
            assert_eq!(
                &out.final_obs[..d],
                &native_obs[..],
                "{id} step {t}: final obs"
            );
            assert_eq!(out.episodes.len(), 1);
            assert_eq!(out.episodes[0].length, native.elapsed());
            episodes += 1;
            set(&mut native, &mut native_obs, twin.state());
        }
        assert_eq!(&out.obs[..d], &native_obs[..], "{id} step {t}: observation");
    }
    episodes
}

#[test]
fn gymnasium_cartpole_matches_the_native_one_transition_for_transition() {
    if !python() {
        return;
    }
    for seed in [0u64, 7, 42] {
        // A fixed pseudo-random action sequence: mostly alternating, so
        // episodes both terminate (falls) and last.
        let episodes = replay("CartPole-v1", seed, 3000, |t| {
            vec![((t * 7919 + seed as usize) % 5 < 2) as u32 as f32]
        });
        assert!(episodes >= 20, "seed {seed}: {episodes} episodes");
    }
}

#[test]
fn gymnasium_pendulum_matches_the_native_one_including_truncation() {
    if !python() {
        return;
    }
    let episodes = replay("Pendulum-v1", 3, 1000, |t| {
        vec![((t as f32) * 0.37).sin() * 2.5]
    });
    assert_eq!(episodes, 5, "Pendulum truncates every 200 steps");
}

fn run_steps(id: &str, kwargs: &str, seed: u64, steps: usize) -> Vec<f32> {
    let mut v = make_vector_env(id, kwargs, 3, seed, sebulba_envs::Purpose::Train).expect("env");
    let d = v.spec().obs_dim;
    let mut obs = vec![0.0; 3 * d];
    v.reset(&mut obs).expect("reset");
    let mut out = v.new_step_out();
    let mut trace = obs.clone();
    for t in 0..steps {
        let a: Vec<u32> = (0..3).map(|e| ((t + e) % 2) as u32).collect();
        v.step(ActionBatch::Discrete(&a), &mut out).expect("step");
        trace.extend_from_slice(&out.obs);
        trace.extend(out.reward.iter());
    }
    trace
}

#[test]
fn seeds_reproduce_and_differ_across_envs_and_runs() {
    if !python() {
        return;
    }
    let a = run_steps("gym:CartPole-v1", "", 5, 200);
    assert_eq!(a, run_steps("gym:CartPole-v1", "", 5, 200));
    assert_ne!(a, run_steps("gym:CartPole-v1", "", 6, 200));
    assert_ne!(a[0..4], a[4..8], "envs of one vector env start apart");
}

#[test]
fn spaces_become_specs_with_bounds_and_limits() {
    if !python() {
        return;
    }
    let cheetah = env_spec_with("gym:HalfCheetah-v5", "").expect("HalfCheetah");
    assert_eq!(cheetah.obs_dim, 17);
    assert_eq!(cheetah.max_episode_steps, 1000);
    assert!(cheetah.obs_low.iter().all(|x| *x == f32::NEG_INFINITY));
    assert_eq!(
        cheetah.action_space,
        ActionSpace::Box {
            low: vec![-1.0; 6],
            high: vec![1.0; 6]
        }
    );
    // Keyword arguments reach gym.make: a shorter time limit.
    let short = env_spec_with("gym:CartPole-v1", r#"{"max_episode_steps": 20}"#).expect("spec");
    assert_eq!(short.max_episode_steps, 20);
    // Any Box shape is flattened; no registered limit means none.
    let walk = env_spec_with("py:sebulba_fixture_envs:make", "").expect("fixture");
    assert_eq!(walk.obs_dim, 6);
    assert_eq!(walk.max_episode_steps, u32::MAX);
    assert_eq!(walk.action_space, ActionSpace::Discrete { n: 2 });
    // A Tuple of a Discrete and flags arrives flat: a one-hot, then the flags.
    let cards = env_spec_with("py:sebulba_fixture_envs:cards", "").expect("cards");
    assert_eq!(cards.obs_dim, 6);
    assert!(cards.obs_low.iter().all(|&x| x == 0.0));
    assert!(cards.obs_high.iter().all(|&x| x == 1.0));
    let mut v =
        make_vector_env("py:sebulba_fixture_envs:cards", "", 1, 0, Purpose::Train).expect("cards");
    let mut obs = vec![0.0; 6];
    v.reset(&mut obs).expect("reset");
    assert_eq!(obs, [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    let mut out = v.new_step_out();
    for t in 1..=3 {
        v.step(ActionBatch::Discrete(&[0]), &mut out).expect("step");
        let mut want = [0.0f32; 6];
        (want[t % 4], want[4], want[5]) = (1.0, (t % 2) as f32, 1.0);
        assert_eq!(out.obs, want, "step {t}");
    }
}

#[test]
fn wrong_ids_fail_with_one_clear_reason() {
    if !python() {
        return;
    }
    let cases = [
        ("gym:NoSuchEnv-v0", "", "NoSuchEnv"),
        ("py:no_such_module:make", "", "ModuleNotFoundError"),
        ("py:sebulba_fixture_envs:nope", "", "nope"),
        ("py:missing_factory", "", "py:package.module:factory"),
        ("py:sebulba_fixture_envs:make", r#"{"bogus": 1}"#, "bogus"),
        ("gym:CartPole-v1", "[1, 2]", "kwargs"),
    ];
    for (id, kwargs, needle) in cases {
        let err = env_spec_with(id, kwargs).expect_err(id);
        let text = err.to_string();
        assert!(text.contains(id), "{id}: {text}");
        assert!(text.contains(needle), "{id}: {text}");
        if kwargs.is_empty() {
            // A wrong id is said in one line, without a traceback.
            assert_eq!(text.lines().count(), 1, "{id}: {text}");
        }
    }
}

/// A fixture vector env of 2 envs, env 1 told to fail as `kwargs` says (env
/// 0 gets the same kwargs, so faults are placed by call count).
fn walk(kwargs: &str) -> (Box<dyn VectorEnv>, Vec<f32>) {
    let mut v = make_vector_env(
        "py:sebulba_fixture_envs:make",
        kwargs,
        2,
        1,
        sebulba_envs::Purpose::Train,
    )
    .expect("fixture");
    let mut obs = vec![0.0; 12];
    v.reset(&mut obs).expect("reset");
    (v, obs)
}

#[test]
fn an_env_that_raises_is_named_with_its_traceback_and_can_be_restarted() {
    if !python() {
        return;
    }
    let (mut v, mut obs) = walk(r#"{"raise_at": 3}"#);
    let mut out = v.new_step_out();
    for _ in 0..2 {
        v.step(ActionBatch::Discrete(&[1, 1]), &mut out)
            .expect("step");
    }
    let err = v
        .step(ActionBatch::Discrete(&[1, 1]), &mut out)
        .expect_err("raises");
    match &err {
        EnvError::EnvFailed { index, reason, .. } => {
            assert_eq!(*index, 0, "env 0 raises first");
            assert!(reason.contains("step 3 fails on purpose"), "{reason}");
            assert!(reason.contains("Traceback") && reason.contains("sebulba_fixture_envs.py"));
        }
        other => panic!("{other}"),
    }
    v.restart(0, &mut obs).expect("restart");
    assert_eq!(v.restarts(), 1);
    assert!(obs.iter().all(|x| x.is_finite()));
    // The fresh env steps again (its call count starts over).
    v.step(ActionBatch::Discrete(&[0, 0]), &mut out)
        .expect_err("env 1 reaches its own third call");
    v.restart(1, &mut obs).expect("restart");
    v.step(ActionBatch::Discrete(&[0, 0]), &mut out)
        .expect("both fresh");
}

#[test]
fn non_finite_observations_are_caught_before_anything_uses_them() {
    if !python() {
        return;
    }
    let (mut v, _) = walk(r#"{"nan_at": 2}"#);
    let mut out = v.new_step_out();
    v.step(ActionBatch::Discrete(&[1, 0]), &mut out)
        .expect("step 1");
    let err = v
        .step(ActionBatch::Discrete(&[1, 0]), &mut out)
        .expect_err("NaN");
    assert!(
        matches!(
            err,
            EnvError::NonFinite {
                index: 0,
                what: "observation",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_reset_that_raises_is_an_error_naming_the_env() {
    if !python() {
        return;
    }
    let mut v = make_vector_env(
        "py:sebulba_fixture_envs:make",
        r#"{"raise_in_reset": true}"#,
        2,
        1,
        sebulba_envs::Purpose::Train,
    )
    .expect("made");
    let mut obs = vec![0.0; 12];
    let err = v.reset(&mut obs).expect_err("reset raises");
    assert!(
        matches!(&err, EnvError::EnvFailed { index: 0, reason, .. } if reason.contains("reset refused")),
        "{err}"
    );
}

#[test]
fn episodes_are_counted_as_for_native_envs() {
    if !python() {
        return;
    }
    // Always right: each episode terminates at position 5, from a start in
    // -2..=2, so it lasts 3 to 7 steps with reward 1 per step.
    let (mut v, _) = walk("");
    let mut out = v.new_step_out();
    let mut seen = 0;
    for _ in 0..40 {
        v.step(ActionBatch::Discrete(&[1, 1]), &mut out)
            .expect("step");
        for ep in &out.episodes {
            assert!((3..=7).contains(&ep.length), "{ep:?}");
            assert_eq!(ep.episode_return, f64::from(ep.length));
            assert!(out.terminated[ep.env_index] && !out.truncated[ep.env_index]);
            seen += 1;
        }
    }
    assert!(seen >= 10);
}
