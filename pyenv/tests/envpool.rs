//! EnvPool (`envpool:` ids) through the path actors take, against
//! Gymnasium's own env of the same id: the same spaces, and a replay in
//! which every transition (observation, reward, terminated, truncated, and
//! at an episode's end the final observation and the statistics) is what
//! Gymnasium's env gives from the same state with the same action. EnvPool
//! resets a finished env on the next step; sebulba's source must reset it in
//! the same step, as every other source does.
//!
//! They need envpool in the venv (scripts/python-env.sh); skipped without
//! it, saying so, and failed instead under `SEBULBA_REQUIRE_PYTHON=1` (CI).

mod common;
use common::{imports, python};

use pyo3::prelude::*;
use sebulba_envs::{ActionBatch, ActionSpace, Purpose, env_spec_with, make_vector_env};

/// Whether envpool imports (the tests skip, saying so, when it does not).
fn envpool() -> bool {
    python() && imports("envpool")
}

type Job = Box<dyn FnOnce() + Send>;

/// Runs `f` on this file's one Python thread, one test at a time.
/// Gymnasium's MuJoCo bindings (the twin) used from one thread after
/// EnvPool's from another hang in the embedded interpreter (seen: a test
/// thread waiting for a GIL nobody holds; both are pybind11 modules, each
/// with its own record of threads). A run does not mix the two in one
/// process: an `envpool:` run's actors and evaluator all use EnvPool (tested
/// in local mode with actor threads).
fn on_python_thread(f: impl FnOnce() + Send + 'static) {
    static JOBS: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<Job>>> =
        std::sync::OnceLock::new();
    let jobs = JOBS.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::spawn(move || rx.into_iter().for_each(|job| job()));
        std::sync::Mutex::new(tx)
    });
    let (done, result) = std::sync::mpsc::channel();
    let job: Job = Box::new(move || {
        // A panic goes back to the test as its failure.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = done.send(r);
    });
    let sent = jobs.lock().unwrap_or_else(|p| p.into_inner()).send(job);
    sent.expect("the Python thread");
    if let Err(panic) = result.recv().expect("the Python thread's answer") {
        std::panic::resume_unwind(panic);
    }
}

/// Gymnasium's env of the same id (`sebulba_twins.Twin` in the fixtures).
struct Twin(Py<PyAny>);

/// What Gymnasium's env gave for one step.
struct Transition {
    obs: Vec<f64>,
    reward: f64,
    terminated: bool,
    truncated: bool,
}

impl Twin {
    fn new(id: &str) -> Self {
        Python::attach(|py| -> PyResult<Self> {
            let twin = py.import("sebulba_twins")?.call_method1("Twin", (id,))?;
            Ok(Twin(twin.unbind()))
        })
        .expect("twin env")
    }

    /// One step of Gymnasium's env from the state `obs` shows.
    fn step(&self, obs: &[f32], action: &[f32], discrete: bool) -> Transition {
        Python::attach(|py| -> PyResult<Transition> {
            let obs: Vec<f64> = obs.iter().map(|&x| f64::from(x)).collect();
            let twin = self.0.bind(py);
            let r = if discrete {
                twin.call_method1("step", (obs, action[0] as i64))?
            } else {
                let a: Vec<f64> = action.iter().map(|&x| f64::from(x)).collect();
                twin.call_method1("step", (obs, a))?
            };
            let (obs, reward, terminated, truncated) = r.extract()?;
            Ok(Transition {
                obs,
                reward,
                terminated,
                truncated,
            })
        })
        .expect("twin step")
    }

    fn reset(&self) {
        Python::attach(|py| self.0.bind(py).call_method0("reset").map(|_| ())).expect("reset");
    }
}

fn close(a: f32, b: f64, tolerance: f64) -> bool {
    (f64::from(a) - b).abs() <= tolerance * (1.0 + b.abs())
}

/// Steps `envpool:ID` (2 envs) for `steps` steps with `action(t, env)`, each
/// transition checked against the twin's (observations within `tolerance`,
/// relative to 1 + |x|); returns (terminations, truncations).
fn replay(
    id: &str,
    steps: usize,
    tolerance: f64,
    action: impl Fn(usize, usize) -> Vec<f32>,
) -> (usize, usize) {
    let pool_id = format!("envpool:{id}");
    let spec = env_spec_with(&pool_id, "").expect("spec");
    let gym = env_spec_with(&format!("gym:{id}"), "").expect("gym spec");
    let same_id = sebulba_envs::EnvSpec {
        id: gym.id.clone(),
        ..spec.clone()
    };
    assert_eq!(same_id, gym, "{id}: the spaces");
    let (e, d) = (2, spec.obs_dim);
    let discrete = spec.action_space.is_discrete();
    let mut v = make_vector_env(&pool_id, "", e, 5, Purpose::Train).expect("env");
    let twins: Vec<Twin> = (0..e).map(|_| Twin::new(id)).collect();
    let mut prev = vec![0.0; e * d];
    v.reset(&mut prev).expect("reset");
    let mut out = v.new_step_out();
    let (mut lengths, mut ends) = (vec![0u32; e], (0, 0));
    for t in 0..steps {
        let actions: Vec<Vec<f32>> = (0..e).map(|i| action(t, i)).collect();
        let flat: Vec<f32> = actions.concat();
        let ints: Vec<u32> = flat.iter().map(|&a| a as u32).collect();
        let batch = if discrete {
            ActionBatch::Discrete(&ints)
        } else {
            ActionBatch::Continuous(&flat)
        };
        v.step(batch, &mut out).expect("step");
        for i in 0..e {
            let want = twins[i].step(&prev[i * d..(i + 1) * d], &actions[i], discrete);
            let at = format!("{id} step {t} env {i}");
            assert!(close(out.reward[i], want.reward, 1e-5), "{at}: reward");
            assert_eq!(out.terminated[i], want.terminated, "{at}: terminated");
            assert_eq!(out.truncated[i], want.truncated, "{at}: truncated");
            lengths[i] += 1;
            let done = want.terminated || want.truncated;
            let next = if done { &out.final_obs } else { &out.obs };
            let next = &next[i * d..(i + 1) * d];
            assert!(
                next.iter()
                    .zip(&want.obs)
                    .all(|(&a, &b)| close(a, b, tolerance)),
                "{at}: {} observation {next:?} against {:?}",
                if done { "final" } else { "next" },
                want.obs
            );
            let stats: Vec<_> = out.episodes.iter().filter(|s| s.env_index == i).collect();
            if done {
                assert_eq!(stats.len(), 1, "{at}: one episode's statistics");
                assert_eq!(stats[0].length, lengths[i], "{at}: episode length");
                // Reset in the same step: a new episode's first observation.
                assert_ne!(&out.obs[i * d..(i + 1) * d], next, "{at}: not reset");
                twins[i].reset();
                lengths[i] = 0;
                ends.0 += usize::from(want.terminated);
                ends.1 += usize::from(want.truncated);
            } else {
                assert!(stats.is_empty(), "{at}: statistics without an end");
            }
        }
        prev.copy_from_slice(&out.obs);
    }
    ends
}

#[test]
fn envpool_cartpole_matches_gymnasium_transition_for_transition() {
    on_python_thread(|| {
        if !envpool() {
            return;
        }
        // Mostly random, with runs of one action so that poles fall.
        let (terminated, truncated) = replay("CartPole-v1", 3000, 1e-5, |t, i| {
            let a = if t % 50 < 35 {
                (t * 7919 + i * 104_729) % 7 < 3
            } else {
                i == 0
            };
            vec![f32::from(u8::from(a))]
        });
        assert!(terminated >= 40, "{terminated} falls");
        assert_eq!(truncated, 0);
    });
}

#[test]
fn envpool_halfcheetah_matches_gymnasium_including_truncation() {
    on_python_thread(|| {
        if !envpool() {
            return;
        }
        // The twin starts each step from the f32 observation, EnvPool from its
        // f64 state: one MuJoCo step (contacts) amplifies that rounding, up to
        // 7e-5 in a 5,000-step replay; a wrong model, action scale or reset
        // would be off by far more.
        let (terminated, truncated) = replay("HalfCheetah-v5", 2100, 1e-3, |t, i| {
            (0..6)
                .map(|j| ((t * 13 + i * 5 + j * 3) as f32 * 0.37).sin())
                .collect()
        });
        assert_eq!(
            (terminated, truncated),
            (0, 4),
            "HalfCheetah truncates at 1,000"
        );
    });
}

#[test]
fn envpool_ids_and_options_are_checked() {
    on_python_thread(|| {
        if !envpool() {
            return;
        }
        let cases = [
            ("envpool:NoSuchEnv-v0", "", "NoSuchEnv"),
            ("envpool:Breakout-v5", "", "envpool:ALE/Breakout-v5"),
            ("envpool:ALE/HalfCheetah-v5", "", "envpool:HalfCheetah-v5"),
            (
                "envpool:CartPole-v1",
                r#"{"num_envs": 4}"#,
                "env.kwargs.num_envs",
            ),
            (
                "envpool:ALE/Pong-v5",
                r#"{"reward_clip": true}"#,
                "env.kwargs.reward_clip",
            ),
        ];
        for (id, kwargs, needle) in cases {
            let text = env_spec_with(id, kwargs).expect_err(id).to_string();
            assert!(text.contains(id) && text.contains(needle), "{id}: {text}");
        }
        // EnvPool's own options pass through (a shorter time limit), and
        // sebulba's `frame_stack` sets its stack.
        let short =
            env_spec_with("envpool:CartPole-v1", r#"{"max_episode_steps": 20}"#).expect("short");
        assert_eq!(short.max_episode_steps, 20);
        let pong = env_spec_with("envpool:ALE/Pong-v5", r#"{"frame_stack": 2}"#).expect("Pong");
        assert_eq!(pong.image, Some([84, 84, 2]));
        assert_eq!(pong.action_space, ActionSpace::Discrete { n: 6 });
        assert_eq!(pong.max_episode_steps, 27_000);
    });
}
