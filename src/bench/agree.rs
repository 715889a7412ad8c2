//! `sebulba bench agree`: the same PPO updates of the same batch from the
//! same initial weights on the fused CPU engine and on burn on the run's
//! `learner.devices`, and how far apart their parameters end. On a GPU
//! machine (`--learner-devices cuda:0`) it is the check that CUDA computes
//! what the CPU does (to TF32's rounding, which its tensor cores apply to
//! f32 products); on `cpu` it is the same check between the two CPU
//! engines, which CI runs so that the device script cannot rot.

use super::learner::{conv_layers, synthetic_update};
use sebulba_algorithms::data::UpdateData;
use sebulba_algorithms::engine::EngineChoice;
use sebulba_algorithms::ppo::{self, PpoStats};
use sebulba_algorithms::trainer::Trainer;
use sebulba_core::config::{LearnerEngine, RunConfig};
use serde::Serialize;
use std::time::Instant;

/// One engine's side of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct EngineSide {
    /// `fused` or `burn`.
    pub engine: String,
    pub devices: Vec<String>,
    /// Seconds of the updates (the first one's start-up included: this is a
    /// check, not a benchmark).
    pub seconds: f64,
    /// The last update's means.
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub grad_norm: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    pub env_id: String,
    pub image: Option<[usize; 3]>,
    pub conv: Vec<[usize; 4]>,
    /// The IMPALA stacks, `[channels, blocks]` per stack.
    pub stacks: Vec<[usize; 2]>,
    pub hidden: Vec<usize>,
    pub samples_per_update: usize,
    pub epochs: usize,
    pub minibatches: usize,
    pub updates: usize,
    /// The length (L2 norm) of the parameters' change on the fused engine.
    pub moved: f64,
    /// The length of the difference between the two engines' parameters.
    pub apart: f64,
    /// `apart / moved`: the share of the update the engines disagree on.
    /// (A length, not the largest element: Adam moves a parameter whose
    /// gradient is nearly zero by a whole step either way, so one such
    /// element's sign, rounding's choice, says nothing of the update.)
    pub relative_diff: f64,
    /// The largest single parameter difference, for the record.
    pub max_param_diff: f32,
    /// How far the fused engine ends from itself when its start is nudged by
    /// a few units in the last place ([`nudge`]), as a share of the move:
    /// what rounding alone does to these updates. Where it is as large as
    /// `relative_diff`, the updates amplify rounding and no two engines that
    /// add in different orders can agree more closely.
    pub rounding_floor: f64,
    /// The same with the start nudged by TF32's rounding ([`TF32_SHARE`]):
    /// the scale of what a device whose matrix units round f32 operands to
    /// TF32 does to these updates.
    pub tf32_floor: f64,
    /// What burn's matrix products round their operands to on its device:
    /// `f32` on the CPU, `tf32` on CUDA (cubek-matmul stages f32 operands as
    /// TF32 whenever a kernel runs on the tensor cores, and burn 0.21 offers
    /// no way to ask otherwise).
    pub precision: Precision,
    /// The tolerance asked for (`--tolerance`).
    pub tolerance_asked: f64,
    /// The most `relative_diff` may be: the tolerance asked for, or, where
    /// the products are TF32, [`TF32_ALLOWANCE`] times `tf32_floor` if that
    /// is more.
    pub tolerance: f64,
    pub agrees: bool,
    pub fused: EngineSide,
    pub burn: EngineSide,
}

/// What a device's matrix products round their f32 operands to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    Tf32,
}

impl Precision {
    /// TF32 on any CUDA device: the tensor cores' products take it from
    /// Ampere on, and where a GPU lacks it the allowance is only lax.
    fn of(devices: &[String]) -> Self {
        match devices.iter().any(|d| d.starts_with("cuda")) {
            true => Precision::Tf32,
            false => Precision::F32,
        }
    }
}

/// TF32 keeps 10 of f32's 23 fraction bits: rounding to it moves a value by
/// up to 2^-11 of itself.
pub const TF32_SHARE: f32 = 1.0 / (1 << 11) as f32;

/// How many times the TF32 nudge's effect a TF32 device may differ by. The
/// nudge moves each weight by the most TF32 rounding can (2^-11); the
/// tensor cores round both operands of every product, forward and backward
/// (three products a layer), each by a random share of that, about 1.4
/// nudges' worth together. 3 leaves room for that and no more: a wrong
/// gradient parts the updates by most of the move, not a tenth of it.
pub const TF32_ALLOWANCE: f64 = 3.0;

/// `updates` PPO updates of one synthetic batch of `samples` on the fused
/// engine (on `learner.threads`) and on burn (on `learner.devices`), both
/// from the run's initial weights (`run.seed`).
pub fn agree(
    cfg: &RunConfig,
    image: Option<[usize; 3]>,
    samples: usize,
    updates: usize,
    tolerance: f64,
) -> anyhow::Result<Agreement> {
    let (spec, data) = synthetic_update(cfg, image, samples)?;
    let mut fused_cfg = cfg.clone();
    fused_cfg.learner.engine = LearnerEngine::Fused;
    fused_cfg.learner.devices = vec!["cpu".into()];
    let mut burn_cfg = cfg.clone();
    burn_cfg.learner.engine = LearnerEngine::Burn;
    sebulba_core::device_choice::resolve(&mut burn_cfg);
    let mut fused = Trainer::for_run(&spec, &fused_cfg)?;
    anyhow::ensure!(
        fused.engine() == "fused",
        "the fused engine does not cover this network: nothing to compare burn with"
    );
    let mut burn = Trainer::for_run(&spec, &burn_cfg)?;
    let start = fused.state()?.params;
    let burn_start = burn.state()?.params;
    anyhow::ensure!(
        max_diff(&start, &burn_start) == 0.0,
        "the two engines start from different weights"
    );
    let choice = EngineChoice::for_run(&spec, &fused_cfg)?;
    let nudged = |share: f32| -> anyhow::Result<Trainer> {
        let mut state = fused.state()?;
        nudge(&mut state.params, share);
        Ok(Trainer::new(
            &spec,
            &state,
            &choice,
            cfg.ppo.adam_eps,
            cfg.run.seed,
        )?)
    };
    let (mut ulp_nudged, mut tf32_nudged) = (nudged(ULP_SHARE)?, nudged(TF32_SHARE)?);
    let side = |t: &mut Trainer, devices: &[String]| -> anyhow::Result<EngineSide> {
        run_updates(t, devices, &data, cfg, updates)
    };
    let fused_side = side(&mut fused, &fused_cfg.learner.devices)?;
    let burn_side = side(&mut burn, &burn_cfg.learner.devices)?;
    side(&mut ulp_nudged, &fused_cfg.learner.devices)?;
    side(&mut tf32_nudged, &fused_cfg.learner.devices)?;
    let (pf, pb) = (fused.state()?.params, burn.state()?.params);
    let moved = distance(&pf, &start).max(f64::MIN_POSITIVE);
    let apart = distance(&pf, &pb);
    let relative_diff = apart / moved;
    let rounding_floor = distance(&pf, &ulp_nudged.state()?.params) / moved;
    let tf32_floor = distance(&pf, &tf32_nudged.state()?.params) / moved;
    let precision = Precision::of(&burn_cfg.learner.devices);
    let allowed = match precision {
        Precision::F32 => tolerance,
        Precision::Tf32 => tolerance.max(TF32_ALLOWANCE * tf32_floor),
    };
    let max_param_diff = max_diff(&pf, &pb);
    let finite = pf.iter().chain(&pb).all(|x| x.is_finite());
    Ok(Agreement {
        env_id: cfg.env.id.clone(),
        image,
        conv: conv_layers(cfg),
        stacks: super::learner::stacks(cfg),
        hidden: cfg.network.hidden.clone(),
        samples_per_update: samples,
        epochs: cfg.ppo.epochs,
        minibatches: cfg.ppo.minibatches,
        updates: updates.max(1),
        moved,
        apart,
        relative_diff,
        max_param_diff,
        rounding_floor,
        tf32_floor,
        precision,
        tolerance_asked: tolerance,
        tolerance: allowed,
        agrees: finite && moved > 0.0 && relative_diff <= allowed,
        fused: fused_side,
        burn: burn_side,
    })
}

/// `updates` PPO updates of `data` on `t`, timed, with the last one's means.
fn run_updates(
    t: &mut Trainer,
    devices: &[String],
    data: &UpdateData,
    cfg: &RunConfig,
    updates: usize,
) -> anyhow::Result<EngineSide> {
    let (lr, clip) = (cfg.ppo.learning_rate, cfg.ppo.clip_coef);
    let t0 = Instant::now();
    let mut last = PpoStats::default();
    for _ in 0..updates.max(1) {
        last = ppo::update(t, data, &cfg.ppo, lr, clip)?;
    }
    Ok(EngineSide {
        engine: t.engine().to_string(),
        devices: devices.to_vec(),
        seconds: t0.elapsed().as_secs_f64(),
        policy_loss: last.terms.policy_loss,
        value_loss: last.terms.value_loss,
        entropy: last.terms.entropy,
        grad_norm: last.grad_norm,
    })
}

/// 4 units in f32's 24th significant bit (about 2.4e-7): a change of the
/// size f32 rounding makes.
const ULP_SHARE: f32 = 4.0 / (1 << 24) as f32;

/// Moves every parameter by `share` of its size, up and down in turn.
fn nudge(params: &mut [f32], share: f32) {
    for (i, p) in params.iter_mut().enumerate() {
        let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
        *p *= 1.0 + sign * share;
    }
}

/// The Euclidean distance, in f64 (NaN when either holds one).
fn distance(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let sum: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
        .sum();
    sum.sqrt()
}

/// The largest element-wise difference (NaN counts as infinitely far).
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter().zip(b).fold(0.0, |m, (x, y)| {
        let d = (x - y).abs();
        if d.is_nan() { f32::INFINITY } else { m.max(d) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_is_euclidean_and_nan_is_never_close() {
        assert_eq!(distance(&[0.0, 0.0], &[3.0, 4.0]), 5.0);
        assert!(distance(&[0.0], &[f32::NAN]).is_nan());
        assert_eq!(distance(&[0.0], &[0.0, 1.0]), f64::INFINITY);
    }

    #[test]
    fn nudge_moves_each_parameter_by_its_share_up_and_down_in_turn() {
        let mut p = [1.0f32, 2.0, -4.0, 0.0];
        nudge(&mut p, TF32_SHARE);
        // 2^-11 of each value: exact in f32.
        assert_eq!(
            p,
            [
                1.0 + 1.0 / 2048.0,
                2.0 - 2.0 / 2048.0,
                -4.0 - 4.0 / 2048.0,
                0.0
            ]
        );
    }

    #[test]
    fn only_cuda_devices_round_products_to_tf32() {
        assert_eq!(Precision::of(&["cpu".into()]), Precision::F32);
        assert_eq!(
            Precision::of(&["cuda:0".into(), "cuda:1".into()]),
            Precision::Tf32
        );
        assert_eq!(
            serde_json::to_string(&Precision::Tf32).ok().as_deref(),
            Some("\"tf32\"")
        );
    }

    #[test]
    fn max_diff_is_the_largest_gap_and_nan_is_never_close() {
        assert_eq!(max_diff(&[1.0, 2.0, 3.0], &[1.0, 2.5, 2.0]), 1.0);
        assert_eq!(max_diff(&[0.0], &[f32::NAN]), f32::INFINITY);
        assert_eq!(max_diff(&[0.0], &[0.0, 1.0]), f32::INFINITY);
    }
}
