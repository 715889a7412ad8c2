//! Throughput measurements of the CPU side, printed by `sebulba bench envs` and
//! `sebulba bench inference`: stepping each environment through the vectorised
//! env (auto-reset included), and batched policy inference at batch size E.

use rand::{Rng, SeedableRng};
use sebulba_core::config::NetworkConfig;
use sebulba_core::devices::DeviceKind;
use sebulba_core::policy::InferencePolicy;
use sebulba_envs::{ActionBatch, ActionSpace, ENV_IDS, EnvError, env_spec_with, make_vector_env};
use serde::Serialize;
use std::time::Instant;

pub use super::EnvBench;

/// Steps `num_envs` copies of each of `ids` (every native env, MinAtar's
/// included, when empty) for about `seconds` each with uniformly random
/// actions (no policy), one thread: through the same vector env an actor
/// steps, Python envs included.
/// Turn-based games (every one of them by default too) play random legal
/// moves (`games::bench_game`).
pub fn bench_envs(
    ids: &[String],
    num_envs: usize,
    kwargs: &str,
    seconds: f64,
) -> Result<Vec<EnvBench>, EnvError> {
    let native: Vec<String> = ENV_IDS
        .iter()
        .chain(sebulba_envs::games::GAME_IDS)
        .chain(sebulba_envs::minatar::MINATAR_IDS)
        .map(|s| s.to_string())
        .collect();
    let ids = if ids.is_empty() { &native[..] } else { ids };
    ids.iter()
        .map(|id| match super::games::bench_game(id, num_envs, seconds) {
            Some(r) => r.map_err(|reason| EnvError::External {
                id: id.clone(),
                reason,
            }),
            None => bench_env(id, num_envs, kwargs, seconds),
        })
        .collect()
}

/// One env source alone: `num_envs` envs of `id` made with `kwargs` (JSON,
/// `""` for none), stepped for about `seconds`.
pub fn bench_env(
    id: &str,
    num_envs: usize,
    kwargs: &str,
    seconds: f64,
) -> Result<EnvBench, EnvError> {
    let mut venv = make_vector_env(id, kwargs, num_envs, 1, sebulba_envs::Purpose::Train)?;
    let spec = venv.spec().clone();
    let mut obs = vec![0.0f32; num_envs * spec.obs_dim];
    venv.reset(&mut obs)?;
    let mut out = venv.new_step_out();
    let actions = RandomActions::new(&spec.action_space, num_envs);
    let mut steps = 0u64;
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < seconds {
        for k in 0..100 {
            venv.step(actions.batch(k), &mut out)?;
            std::hint::black_box(&out);
            steps += num_envs as u64;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(EnvBench {
        env_id: id.to_string(),
        num_envs,
        processes: 1,
        steps,
        seconds: secs,
        steps_per_second: steps as f64 / secs,
        games_per_second: None,
    })
}

/// Uniformly random actions (Gymnasium's `action_space.sample()`), drawn
/// before the clock starts: a cycle of [`RandomActions::BATCHES`] batches,
/// so that the figure is the env's cost alone, as an untrained policy's
/// actions make it.
struct RandomActions {
    discrete: Vec<Vec<u32>>,
    continuous: Vec<Vec<f32>>,
}

impl RandomActions {
    const BATCHES: usize = 64;

    fn new(space: &ActionSpace, num_envs: usize) -> Self {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut out = RandomActions {
            discrete: Vec::new(),
            continuous: Vec::new(),
        };
        for _ in 0..Self::BATCHES {
            match space {
                ActionSpace::Discrete { n } => out.discrete.push(
                    (0..num_envs)
                        .map(|_| rng.random_range(0..*n as u32))
                        .collect(),
                ),
                ActionSpace::Box { low, high } => out.continuous.push(
                    (0..num_envs)
                        .flat_map(|_| low.iter().zip(high))
                        .map(|(&l, &h)| l + (h - l) * rng.random::<f32>())
                        .collect(),
                ),
            }
        }
        out
    }

    fn batch(&self, k: usize) -> ActionBatch<'_> {
        match self.discrete.get(k % Self::BATCHES) {
            Some(d) => ActionBatch::Discrete(d),
            None => ActionBatch::Continuous(&self.continuous[k % Self::BATCHES]),
        }
    }
}

/// `processes` copies of `sebulba bench envs` for `id`, stepping at once
/// (each with its own Python interpreter, as a run's actor processes): the
/// env-only limit of a run with that many actors of `num_envs` envs each.
pub fn bench_env_processes(
    id: &str,
    num_envs: usize,
    kwargs: &str,
    seconds: f64,
    processes: usize,
) -> anyhow::Result<EnvBench> {
    let dir = std::env::temp_dir().join(format!("sebulba-bench-envs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let rows = run_bench_processes(id, (num_envs, kwargs), seconds, processes, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let rows = rows?;
    Ok(EnvBench {
        env_id: id.to_string(),
        num_envs,
        processes,
        steps: rows.iter().map(|r| r.steps).sum(),
        seconds: rows.iter().map(|r| r.seconds).fold(0.0, f64::max),
        steps_per_second: rows.iter().map(|r| r.steps_per_second).sum(),
        games_per_second: None,
    })
}

/// The rows of `processes` concurrent one-process benches of `id`.
fn run_bench_processes(
    id: &str,
    (num_envs, kwargs): (usize, &str),
    seconds: f64,
    processes: usize,
    dir: &std::path::Path,
) -> anyhow::Result<Vec<EnvBench>> {
    use anyhow::Context;
    let exe = std::env::current_exe()?;
    let children = (0..processes)
        .map(|i| {
            let json = dir.join(format!("{i}.json"));
            let child = std::process::Command::new(&exe)
                .args(["bench", "envs", "--env", id, "--processes", "1"])
                .args([
                    "--envs",
                    &num_envs.to_string(),
                    "--seconds",
                    &seconds.to_string(),
                ])
                .args(["--kwargs", kwargs])
                .arg("--json")
                .arg(&json)
                .stdout(std::process::Stdio::null())
                .spawn()
                .context("starting a bench process")?;
            Ok((child, json))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut rows = Vec::new();
    for (mut child, json) in children {
        let status = child.wait()?;
        anyhow::ensure!(
            status.success(),
            "a bench envs process for {id} failed ({status})"
        );
        let text = std::fs::read_to_string(&json)?;
        let mut r: Vec<EnvBench> = serde_json::from_str(&text)?;
        rows.push(r.pop().context("a bench process wrote no row")?);
    }
    Ok(rows)
}

#[derive(Debug, Clone, Serialize)]
pub struct InferenceBench {
    pub env_id: String,
    pub hidden: Vec<usize>,
    pub batch: usize,
    pub calls: u64,
    pub seconds: f64,
    pub calls_per_second: f64,
    pub samples_per_second: f64,
}

/// Policy-head forward passes at batch `batch` (the actor's per-step call) for
/// about `seconds`.
pub fn bench_inference(
    env_id: &str,
    network: &NetworkConfig,
    batch: usize,
    seconds: f64,
) -> anyhow::Result<InferenceBench> {
    let env = env_spec_with(env_id, "")?;
    let policy = InferencePolicy::new(&env, network, DeviceKind::Cpu)?;
    let obs: Vec<f32> = (0..batch * env.obs_dim)
        .map(|i| (i % 7) as f32 * 0.1)
        .collect();
    let mut state = policy.state(batch);
    let mut calls = 0u64;
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < seconds {
        for _ in 0..50 {
            std::hint::black_box(policy.step(&obs, &mut state, None));
            calls += 1;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(InferenceBench {
        env_id: env_id.to_string(),
        hidden: network.hidden.clone(),
        batch,
        calls,
        seconds: secs,
        calls_per_second: calls as f64 / secs,
        samples_per_second: (calls * batch as u64) as f64 / secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benches_cover_every_env_and_count_what_they_did() {
        let rows = bench_envs(&[], 2, "", 0.01).unwrap();
        let games = sebulba_envs::games::GAME_IDS;
        let minatar = sebulba_envs::minatar::MINATAR_IDS;
        assert_eq!(rows.len(), ENV_IDS.len() + games.len() + minatar.len());
        for r in &rows {
            assert!(r.steps > 0 && r.steps % 2 == 0, "{r:?}");
            assert_eq!(
                r.games_per_second.is_some(),
                games.contains(&r.env_id.as_str())
            );
        }
        let nim = rows.iter().find(|r| r.env_id == "Nim-v0").unwrap();
        assert!(nim.games_per_second.unwrap() > 0.0, "{nim:?}");
        let r = bench_inference("Pendulum-v1", &NetworkConfig::default(), 4, 0.01).unwrap();
        assert!(r.calls > 0);
        assert!((r.samples_per_second / r.calls_per_second - 4.0).abs() < 1e-9);
        assert!(bench_inference("Nope-v0", &NetworkConfig::default(), 4, 0.01).is_err());
    }
}
