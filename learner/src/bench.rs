//! `sebulba bench learner`: PPO-update throughput (samples/s) for a network
//! size, batch size and device list, on synthetic but well-formed data.

use crate::LearnerError;
use crate::ppo::{Ppo, UpdateData};
use crate::validate::BatchActions;
use burn::tensor::backend::AutodiffBackend;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_core::config::RunConfig;
use sebulba_core::devices::LearnerDevices;
use sebulba_core::env::{ActionSpace, env_spec};
use sebulba_core::model::ModelSpec;
use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Clone, Serialize)]
pub struct LearnerBench {
    pub env_id: String,
    pub hidden: Vec<usize>,
    pub devices: Vec<String>,
    /// `fused` or `burn` (see `learner.engine`).
    pub engine: String,
    pub samples_per_update: usize,
    pub epochs: usize,
    pub minibatches: usize,
    pub updates: usize,
    pub seconds: f64,
    /// Update-batch samples consumed per second (each trained `epochs` times).
    pub samples_per_second: f64,
    /// Sample-gradient evaluations per second: samples/s x epochs.
    pub sample_grads_per_second: f64,
}

/// Times `updates` full PPO updates (after one warm-up) of `samples` samples.
pub fn bench_learner(
    cfg: &RunConfig,
    samples: usize,
    updates: usize,
) -> Result<LearnerBench, LearnerError> {
    match LearnerDevices::parse(&cfg.learner.devices).map_err(LearnerError::Config)? {
        LearnerDevices::Cpu(n) => {
            run::<sebulba_core::CpuAutodiff>(cfg, samples, updates, vec![Default::default(); n])
        }
        #[cfg(feature = "cuda")]
        LearnerDevices::Cuda(ids) => run::<burn::backend::Autodiff<burn_cuda::Cuda<f32, i32>>>(
            cfg,
            samples,
            updates,
            ids.into_iter().map(burn_cuda::CudaDevice::new).collect(),
        ),
        #[cfg(not(feature = "cuda"))]
        LearnerDevices::Cuda(_) => Err(LearnerError::Config(
            "learner.devices: cuda devices need a binary built with `--features cuda`".into(),
        )),
    }
}

fn run<B: AutodiffBackend>(
    cfg: &RunConfig,
    samples: usize,
    updates: usize,
    devices: Vec<B::Device>,
) -> Result<LearnerBench, LearnerError> {
    let env = env_spec(&cfg.env.id).map_err(|e| LearnerError::Config(e.to_string()))?;
    let spec = ModelSpec::new(&env, &cfg.network);
    let mut ppo = Ppo::<B>::new(&spec, &cfg.ppo, cfg.run.seed, devices)
        .map_err(|e| LearnerError::Config(e.to_string()))?;
    crate::ppo::use_configured_engine(&mut ppo, cfg)
        .map_err(|e| LearnerError::Config(format!("learner.engine: {e}")))?;
    let data = synthetic(&env.action_space, env.obs_dim, samples, cfg.run.seed);
    let step = |ppo: &mut Ppo<B>| {
        ppo.update(&data, &cfg.ppo, cfg.ppo.learning_rate, cfg.ppo.clip_coef)
            .map_err(|e| LearnerError::Update(e.to_string()))
    };
    step(&mut ppo)?;
    let t0 = Instant::now();
    for _ in 0..updates {
        step(&mut ppo)?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    let sps = (samples * updates) as f64 / seconds.max(1e-9);
    Ok(LearnerBench {
        env_id: cfg.env.id.clone(),
        hidden: cfg.network.hidden.clone(),
        devices: cfg.learner.devices.clone(),
        engine: ppo.engine().to_string(),
        samples_per_update: samples,
        epochs: cfg.ppo.epochs,
        minibatches: cfg.ppo.minibatches,
        updates,
        seconds,
        samples_per_second: sps,
        sample_grads_per_second: sps * cfg.ppo.epochs as f64,
    })
}

/// Random observations, valid actions, plausible log-probs and returns.
fn synthetic(space: &ActionSpace, obs_dim: usize, n: usize, seed: u64) -> UpdateData {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut uniform = |k: usize, lo: f32, hi: f32| -> Vec<f32> {
        (0..k).map(|_| rng.random_range(lo..hi)).collect()
    };
    let actions = match space {
        ActionSpace::Discrete { n: a } => {
            BatchActions::Discrete((0..n).map(|i| (i % a) as i32).collect())
        }
        ActionSpace::Box { low, .. } => BatchActions::Continuous(uniform(n * low.len(), -1.0, 1.0)),
    };
    UpdateData {
        obs_dim,
        observations: uniform(n * obs_dim, -1.0, 1.0),
        actions,
        masks: None,
        old_log_probs: uniform(n, -2.0, -0.1),
        advantages: uniform(n, -1.0, 1.0),
        returns: uniform(n, -1.0, 1.0),
        old_values: uniform(n, -1.0, 1.0),
    }
}
