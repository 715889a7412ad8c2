//! The PPO update, CleanRL-shaped: epochs of shuffled minibatches (rows, or
//! env sequences or their `ppo.bptt` chunks for a network with memory:
//! [`crate::minibatches`]), each one a
//! step of the update engine (see [`crate::engine`]), with the statistics
//! averaged over the steps taken. The clip range may be annealed and a target
//! KL may end the update early. Minibatch advantage normalisation and the
//! entropy-estimate noise are drawn here, once per minibatch, so they do not
//! depend on the engine or the number of devices.

use crate::data::{Loss, LossTerms, Minibatch, StepStats, UpdateData, normalize_where};
use crate::engine::EngineError;
use crate::minibatches::Minibatches;
use crate::trainer::Trainer;
use rand::Rng;
use sebulba_core::config::{AdvantageNorm, PpoConfig};
use sebulba_core::distribution::ActionDist;

/// Averages over the minibatch steps of one update.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct PpoStats {
    #[serde(flatten)]
    pub terms: LossTerms,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub learning_rate: f64,
    /// The ratio clip range used (after annealing).
    pub clip_coef: f64,
    /// Optimizer steps taken (epochs x minibatches unless stopped early).
    pub minibatch_steps: usize,
    /// A step's approximate KL exceeded `target_kl`, ending the update.
    pub early_stopped: bool,
    /// Steps skipped because the loss or the gradient was not finite (not in
    /// `minibatch_steps` nor in the means).
    pub non_finite_steps: usize,
}

impl PpoStats {
    fn add(&mut self, s: &StepStats) {
        self.terms.add(&s.terms);
        self.grad_norm += s.grad_norm;
        self.minibatch_steps += 1;
    }

    fn into_means(mut self, lr: f64, clip: f64) -> Self {
        let k = self.minibatch_steps.max(1) as f64;
        self.terms = self.terms.over(k);
        self.grad_norm /= k;
        (self.learning_rate, self.clip_coef) = (lr, clip);
        self
    }
}

/// Epochs x minibatches of PPO over `data` at learning rate `lr` and ratio
/// clip range `clip`, cut as the network needs ([`Trainer::batching`]).
/// With fewer samples (rows, or sequences) than one per replica of every
/// minibatch (a game whose moves were nearly all made by past versions)
/// it takes no step, says so, and reports `minibatch_steps = 0`.
pub fn update(
    trainer: &mut Trainer,
    data: &UpdateData,
    cfg: &PpoConfig,
    lr: f64,
    clip: f64,
) -> Result<PpoStats, EngineError> {
    let cut = Minibatches::new(trainer.batching, data, cfg.minibatches, cfg.bptt)?;
    let needed = cfg.minibatches.max(1) * trainer.engine.devices().max(1);
    if cut.units() < needed {
        tracing::warn!(
            units = cut.units(),
            needed,
            "too few samples (rows, or env sequences for a network with memory) for ppo.minibatches over the learner's devices: no step this update"
        );
        return Ok(PpoStats::default().into_means(lr, clip));
    }
    trainer.engine.begin_update(data);
    let stats = epochs(trainer, data, cut, cfg, (lr, clip));
    trainer.engine.end_update();
    Ok(stats?.into_means(lr, clip))
}

/// The epochs of [`update`], each over a fresh shuffle of the samples.
fn epochs(
    trainer: &mut Trainer,
    data: &UpdateData,
    mut cut: Minibatches,
    cfg: &PpoConfig,
    (lr, clip): (f64, f64),
) -> Result<PpoStats, EngineError> {
    let (mut idx, mut sequences) = (Vec::new(), Vec::new());
    let (mut adv, mut noise) = (Vec::new(), Vec::new());
    let mut stats = PpoStats::default();
    let mut states = cut.starting_states(trainer, data)?;
    'epochs: for epoch in 0..cfg.epochs {
        if epoch > 0 && cfg.refresh_states && cut.chunked(data) {
            states = cut.starting_states(trainer, data)?;
        }
        cut.shuffle(&mut trainer.rng);
        for k in 0..cfg.minibatches {
            cut.minibatch(k, data, &mut idx, &mut sequences);
            draw_minibatch(trainer, data, &idx, cfg, &mut adv, &mut noise);
            let mb = Minibatch {
                data,
                idx: &idx,
                sequences: &sequences,
                states: &states,
                adv: &adv,
                noise: &noise,
                lr,
                max_grad_norm: cfg.max_grad_norm,
                loss: Loss::Ppo { cfg, clip },
            };
            let step = trainer.engine.step(&mb)?;
            if step.non_finite {
                stats.non_finite_steps += 1;
                continue;
            }
            if !step.stepped {
                stats.early_stopped = true;
                break 'epochs;
            }
            stats.add(&step);
        }
    }
    Ok(stats)
}

/// The minibatch's advantages (normalised over it when asked, then
/// weighted) and its entropy-estimate noise (continuous actions).
fn draw_minibatch(
    trainer: &mut Trainer,
    data: &UpdateData,
    idx: &[usize],
    cfg: &PpoConfig,
    adv: &mut Vec<f32>,
    noise: &mut Vec<f32>,
) {
    adv.clear();
    adv.extend(idx.iter().map(|&i| data.advantages[i]));
    if cfg.adv_norm == AdvantageNorm::Minibatch {
        normalize_where(adv, |k| data.trains(idx[k]));
    }
    // After normalisation: a sample of weight ~0 contributes ~nothing.
    if let Some(w) = &data.weights {
        for (a, &i) in adv.iter_mut().zip(idx) {
            *a *= w[i];
        }
    }
    noise.clear();
    if matches!(trainer.dist, ActionDist::TanhNormal { .. }) {
        let width = trainer.dist.action_width();
        noise.extend((0..idx.len() * width).map(|_| {
            let z: f32 = trainer.rng.sample(rand_distr::StandardNormal);
            z
        }));
    }
}

mod train;
pub use train::{Schedule, train};

#[cfg(test)]
pub(crate) mod tests;
