//! `sebulba bench learner`: PPO-update throughput (samples/s) for a network
//! size, batch size and device list, on synthetic but well-formed data.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_algorithms::data::{Sequences, UpdateData};
use sebulba_algorithms::ppo;
use sebulba_algorithms::trainer::Trainer;
use sebulba_core::config::RunConfig;
use sebulba_core::model::ModelSpec;
use sebulba_core::policy::PolicyState;
use sebulba_envs::{ActionSpace, ObsDtype, Observations, env_spec_with};
use sebulba_fused::kernels::{self, peak::Peak};
use sebulba_learner::batch::BatchActions;
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize)]
pub struct LearnerBench {
    pub env_id: String,
    /// The synthetic images trained on, when not the env's observations.
    pub image: Option<[usize; 3]>,
    /// The convolution stem, `[channels, kernel, stride, padding]` per layer.
    pub conv: Vec<[usize; 4]>,
    /// The IMPALA stacks, `[channels, blocks]` per stack.
    pub stacks: Vec<[usize; 2]>,
    pub hidden: Vec<usize>,
    /// The recurrent core (`lstm 128`), or `none`.
    pub core: String,
    pub devices: Vec<String>,
    /// `fused` or `burn` (see `learner.engine`).
    pub engine: String,
    /// Threads a minibatch step may use (`learner.threads`).
    pub threads: usize,
    pub samples_per_update: usize,
    pub epochs: usize,
    pub minibatches: usize,
    pub updates: usize,
    pub seconds: f64,
    /// Update-batch samples consumed per second (each trained `epochs` times).
    pub samples_per_second: f64,
    /// Sample-gradient evaluations per second: samples/s x epochs.
    pub sample_grads_per_second: f64,
    /// The fused kernels' instruction-set path (`SEBULBA_KERNELS`).
    pub kernels: String,
    /// Floating-point operations of one sample's gradient in the
    /// network's matrix products (`Layout::gradient_flops`).
    pub gradient_flops_per_sample: usize,
    /// Those operations a second: flops per sample x sample-gradients/s.
    pub gflops: f64,
    /// The path's peak on the cores the update ran on (CPU learners on a
    /// path with FMA).
    pub peak: Option<Peak>,
    /// `gflops` over the peak's.
    pub fraction_of_peak: Option<f64>,
}

/// How long the peak's clock and FMA loops run on each core.
const PEAK_TIME: Duration = Duration::from_millis(400);

/// Times `updates` full PPO updates (after one warm-up) of `samples` samples
/// ([`synthetic_update`]) on the run's learner devices and engine.
pub fn bench_learner(
    cfg: &RunConfig,
    image: Option<[usize; 3]>,
    samples: usize,
    updates: usize,
) -> anyhow::Result<LearnerBench> {
    let mut cfg = cfg.clone();
    let cfg = &mut cfg;
    sebulba_core::device_choice::resolve(cfg);
    let (spec, data) = synthetic_update(cfg, image, samples)?;
    let mut trainer = Trainer::for_run(&spec, cfg)?;
    let (lr, clip) = (cfg.ppo.learning_rate, cfg.ppo.clip_coef);
    let mut step = || ppo::update(&mut trainer, &data, &cfg.ppo, lr, clip);
    step()?;
    let t0 = Instant::now();
    for _ in 0..updates {
        step()?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    let sps = (samples * updates) as f64 / seconds.max(1e-9);
    let grads_per_second = sps * cfg.ppo.epochs as f64;
    let flops = sebulba_fused::net::Layout::new(&spec.arch()).gradient_flops();
    let gflops = flops as f64 * grads_per_second / 1e9;
    let on_cpu = cfg.learner.devices.iter().all(|d| d == "cpu");
    let isa = kernels::active();
    let peak = on_cpu
        .then(|| kernels::peak::measure(isa, trainer.threads(), PEAK_TIME))
        .flatten();
    Ok(LearnerBench {
        env_id: cfg.env.id.clone(),
        image,
        conv: conv_layers(cfg),
        stacks: stacks(cfg),
        hidden: cfg.network.hidden.clone(),
        core: match cfg.network.core.cell() {
            Some(c) => format!("{} {}", c.as_str(), cfg.network.core_size),
            None => "none".into(),
        },
        devices: cfg.learner.devices.clone(),
        engine: trainer.engine().to_string(),
        threads: trainer.threads(),
        samples_per_update: samples,
        epochs: cfg.ppo.epochs,
        minibatches: cfg.ppo.minibatches,
        updates,
        seconds,
        samples_per_second: sps,
        sample_grads_per_second: grads_per_second,
        kernels: isa.name().to_string(),
        gradient_flops_per_sample: flops,
        gflops,
        fraction_of_peak: peak.as_ref().map(|p| gflops / p.gflops),
        peak,
    })
}

/// The model and a synthetic update batch of `samples` for the run's env
/// and network: on synthetic `image`s of bytes (0 or 1, as MinAtar's
/// grids) in place of the env's observations when given, kept as bytes up
/// to the minibatch as a byte env's are. A byte env of its own (Atari's
/// frames) gets synthetic bytes over its whole range. A game's samples are
/// positions of random legal play ([`game_positions`]): its masks decide
/// how much of the policy head the update computes.
pub fn synthetic_update(
    cfg: &RunConfig,
    image: Option<[usize; 3]>,
    samples: usize,
) -> anyhow::Result<(ModelSpec, UpdateData)> {
    let mut env = env_spec_with(&cfg.env.id, &cfg.env.kwargs_json())?;
    if let Some([h, w, c]) = image {
        (env.obs_dim, env.image, env.obs_dtype) = (h * w * c, image, ObsDtype::U8);
    }
    let spec = ModelSpec::new(&env, &cfg.network)?;
    let mut data = synthetic(&env.action_space, env.obs_dim, samples, cfg.run.seed);
    if env.is_game() && image.is_none() {
        let (obs, masks, actions) = game_positions(&cfg.env.id, samples, cfg.run.seed)?;
        (data.observations, data.masks) = (obs.into(), Some(masks));
        data.actions = BatchActions::Discrete(actions);
    }
    let width = spec.arch().state_width();
    if width > 0 {
        data.sequences = Some(sequences(
            samples,
            cfg.env.rollout_length,
            width,
            cfg.run.seed,
        )?);
    }
    if env.obs_dtype == ObsDtype::U8 {
        let floats = data.observations.to_f32(0..data.observations.len());
        let byte = |x: f32| match image {
            Some(_) => u8::from(x > 0.0),
            None => ((x + 1.0) * 127.5) as u8,
        };
        data.observations = Observations::U8(floats.iter().map(|&x| byte(x)).collect());
    }
    Ok((spec, data))
}

/// The convolution stem, `[channels, kernel, stride, padding]` per layer.
pub fn conv_layers(cfg: &RunConfig) -> Vec<[usize; 4]> {
    cfg.network
        .conv
        .iter()
        .map(|l| [l.channels, l.kernel, l.stride, l.padding])
        .collect()
}

/// The IMPALA stacks, `[channels, blocks]` per stack.
pub fn stacks(cfg: &RunConfig) -> Vec<[usize; 2]> {
    let stacks = &cfg.network.stacks;
    stacks.iter().map(|s| [s.channels, s.blocks]).collect()
}

/// `n` positions of game `id` under random legal play, game after game:
/// the mover's observation, its legal actions (`[n * actions]` flags) and
/// the move played.
fn game_positions(id: &str, n: usize, seed: u64) -> anyhow::Result<(Vec<f32>, Vec<u8>, Vec<i32>)> {
    use sebulba_envs::games::{game_rng, new_game};
    let mut rng = game_rng(seed);
    let deal =
        |rng: &mut StdRng| new_game(id, rng).ok_or_else(|| anyhow::anyhow!("{id} is not a game"));
    let mut game = deal(&mut rng)?;
    let (d, k) = (game.obs_dim(), game.actions());
    let (mut obs, mut masks) = (vec![0.0; n * d], vec![0u8; n * k]);
    let mut actions = Vec::with_capacity(n);
    let mut legal = vec![false; k];
    for i in 0..n {
        game.observe(game.to_move(), &mut obs[i * d..(i + 1) * d]);
        game.legal_mask(&mut legal);
        let allowed: Vec<usize> = (0..k).filter(|&a| legal[a]).collect();
        anyhow::ensure!(!allowed.is_empty(), "{id}: a position without a legal move");
        for &a in &allowed {
            masks[i * k + a] = 1;
        }
        let a = allowed[rng.random_range(0..allowed.len())];
        actions.push(a as i32);
        if game.play(a).map_err(anyhow::Error::msg)?.is_some() {
            game = deal(&mut rng)?;
        }
    }
    Ok((obs, masks, actions))
}

/// Random observations, valid actions, plausible log-probs and returns.
/// A network with memory's samples as one batch of `steps` steps
/// (`env.rollout_length`) of `samples / steps` envs, each from a zero
/// state, an episode starting at 1% of the rows (as the PyTorch peer's).
fn sequences(samples: usize, steps: usize, width: usize, seed: u64) -> anyhow::Result<Sequences> {
    anyhow::ensure!(
        steps > 0 && samples.is_multiple_of(steps),
        "--samples {samples} is not whole env sequences of env.rollout_length = {steps} steps"
    );
    let envs = samples / steps;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    Ok(Sequences {
        steps,
        envs,
        starts: (0..samples)
            .map(|_| u8::from(rng.random_bool(0.01)))
            .collect(),
        initial: PolicyState::zeros(width, envs),
        seats: None,
    })
}

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
        observations: uniform(n * obs_dim, -1.0, 1.0).into(),
        actions,
        masks: None,
        old_log_probs: uniform(n, -2.0, -0.1),
        advantages: uniform(n, -1.0, 1.0),
        returns: uniform(n, -1.0, 1.0),
        old_values: uniform(n, -1.0, 1.0),
        weights: None,
        sequences: None,
    }
}
