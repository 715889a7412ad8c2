//! The update loop, on its own thread. Each turn: collect `batches_per_update`
//! fresh batches ([`collect`]), train on them ([`sebulba_algorithms::ppo::train`]
//! or the DQN learner's `train`), publish the new version (on the
//! runtime, while the next update trains: [`outbox`]), write a checkpoint when
//! due and a metrics line ([`record`]).

mod checkpointing;
mod collect;
mod memory;
mod outbox;
mod publishing;
mod record;

use crate::accounting::Outcome;
use crate::batch::{BatchOrigin, DecodedBatch};
use crate::checkpoint::Checkpoint;
use crate::error::LearnerError;
use crate::publish::Publisher;
use crate::state::{LiveProgress, Shared};
pub use checkpointing::CheckpointWriter;
pub use memory::LoopMemory;
use record::{MetricsLine, Progress};
use sebulba_algorithms::prepare::{Normalizers, Prepared};
use sebulba_algorithms::trainer::Trainer;
use sebulba_algorithms::{UpdateAt, UpdateRule, UpdateStats};
use sebulba_core::model::ModelSpec;
use sebulba_proto::Weights;
use sebulba_runfiles::tensorboard::MirroredLines;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, info_span, warn};

/// The update loop: the trainer on the learner's backend, and everything
/// else it works with.
pub struct UpdateLoop {
    pub trainer: Trainer,
    pub ctx: LoopContext,
    /// The last version's publish, while it runs on the runtime.
    pub pending_publish: Option<tokio::task::JoinHandle<Result<u64, LearnerError>>>,
    /// With a forced lag (`run.forced_lag`): versions made, not yet published.
    pub held: std::collections::VecDeque<Weights>,
    /// Checkpoints, written on a thread of their own.
    pub checkpoints: CheckpointWriter,
}

/// What the update loop works with besides the trainer, whatever the backend.
pub struct LoopContext {
    pub shared: Arc<Shared>,
    pub live: Arc<LiveProgress>,
    pub model_spec: ModelSpec,
    pub publisher: Publisher,
    pub rt: tokio::runtime::Handle,
    /// `metrics.jsonl` and its TensorBoard mirror.
    pub metrics: MirroredLines,
    /// The run's wall time across resumes.
    pub clock: crate::state::RunClock,
    pub normalizers: Normalizers,
    /// Where checkpoints go (`checkpoint.bin`); `learner.checkpoint_interval` says how often.
    pub run_dir: std::path::PathBuf,
    /// Fires on shutdown: the loop stops taking batches, and a publish still
    /// retrying gives up at once.
    pub stop: CancellationToken,
}

#[derive(Debug, Clone)]
pub struct LoopOutcome {
    pub env_steps: u64,
    pub updates: u64,
    pub final_version: u64,
    /// The step budget was reached (not stopped from outside).
    pub completed: bool,
    /// Why training stopped before the budget, when it could not go on
    /// (updates that found nothing finite to step on).
    pub failure: Option<String>,
    /// What the loop held at its end, in bytes.
    pub memory: LoopMemory,
}

/// A checkpoint's observation statistics fit `spec`'s network: present when
/// it normalises, one mean and one non-negative variance per feature.
fn check_obs_stats(
    spec: &ModelSpec,
    stats: Option<&sebulba_core::model::RunningMeanStd>,
) -> Result<(), LearnerError> {
    let d = spec.obs_dim;
    match stats {
        _ if !spec.network.obs_norm => Ok(()),
        None => Err(LearnerError::Resume(
            "checkpoint: no observation statistics, but the network normalises observations".into(),
        )),
        Some(s) if s.mean.len() != d || s.var.len() != d || s.var.iter().any(|&v| v < 0.0) => {
            Err(LearnerError::Resume(format!(
                "checkpoint: observation statistics of {} means and {} variances (each >= 0), \
                 the observation has {d} features",
                s.mean.len(),
                s.var.len()
            )))
        }
        Some(_) => Ok(()),
    }
}

/// Consecutive updates in which every minibatch step had a non-finite loss or
/// gradient before the run stops: the weights have not moved for that long,
/// and more of the same data will not fix them.
pub const MAX_NON_FINITE_UPDATES: u32 = 3;

/// Logs the steps of an update skipped for a non-finite loss or gradient, with
/// the batches it trained on; returns how many updates in a row (this one
/// included) stepped on nothing finite.
fn non_finite_guard(batches: &[BatchOrigin], stats: &UpdateStats, update: u64, run: u32) -> u32 {
    if stats.non_finite_steps() == 0 {
        return 0;
    }
    let ids: Vec<String> = batches
        .iter()
        .map(|b| format!("{}/{}", b.actor_id, b.sequence))
        .collect();
    warn!(
        update,
        skipped = stats.non_finite_steps(),
        taken = stats.steps(),
        batches = ?ids,
        "non-finite loss or gradient: minibatch steps skipped"
    );
    if stats.steps() == 0 { run + 1 } else { 0 }
}

impl UpdateLoop {
    /// Trains until the step budget is reached, the context's `stop` fires
    /// or the queue closes; continues from `resume` when given.
    pub fn run(
        &mut self,
        rx: mpsc::Receiver<DecodedBatch>,
        resume: Option<Checkpoint>,
    ) -> Result<LoopOutcome, LearnerError> {
        let stop = self.ctx.stop.clone();
        let mut at = match resume {
            Some(ck) => self.restore(ck)?,
            None => Progress {
                updates: 0,
                version: 0,
                env_steps: 0,
            },
        };
        at.version = self.publish(at, false)?;
        let (cfg, spec) = (&self.ctx.shared.config, &self.ctx.model_spec);
        let mut rule = UpdateRule::for_run(cfg, spec, at.env_steps, &self.trainer)?;
        let mut completed = false;
        let mut failure = None;
        let mut non_finite_run = 0u32;
        let (rt, shared, live) = (
            self.ctx.rt.clone(),
            self.ctx.shared.clone(),
            self.ctx.live.clone(),
        );
        let mut intake = collect::Intake::new(rx, &shared);
        self.deterministic_evaluation(at.version);
        while !completed {
            let steps_before = at.env_steps;
            let collected = collect::collect(
                &rt,
                &mut intake,
                &stop,
                &shared,
                &live,
                at.version,
                &mut at.env_steps,
            );
            let Some(taken) = collected else { break };
            if let Some(scale) = &mut self.ctx.normalizers.rewards {
                scale.observe(&taken.stale_returns);
            }
            let t0 = Instant::now();
            let (prepared, stats) = self.train(&mut rule, &taken, at, steps_before)?;
            for b in &taken.origins {
                shared
                    .accounting
                    .dequeued(&b.actor_id, Outcome::Used(b.env_steps));
            }
            non_finite_run =
                non_finite_guard(&taken.origins, &stats, at.updates + 1, non_finite_run);
            at.updates += 1;
            at.version += 1;
            completed = shared
                .config
                .budget_spent(at.env_steps, self.ctx.clock.wall_seconds());
            self.publish_and_record(at, completed, t0, &prepared, stats)?;
            if non_finite_run >= MAX_NON_FINITE_UPDATES {
                let why = format!(
                    "{non_finite_run} updates in a row (up to update {}) had a non-finite loss or gradient in every minibatch step; the weights stayed at their last finite values (see the warnings above for the batches)",
                    at.updates
                );
                error!("stopping the run: {why}");
                failure = Some(why);
                break;
            }
        }
        self.end_training(at, completed);
        collect::drain(&mut intake, &shared, at.version);
        Ok(LoopOutcome {
            env_steps: at.env_steps,
            updates: at.updates,
            final_version: at.version,
            completed,
            failure,
            memory: self.memory(&rule),
        })
    }

    /// After the update loop: the last publish settled, the state kept for
    /// `--resume` when stopped from outside, and the roles told whether the
    /// run finished or is stopping.
    fn end_training(&mut self, at: Progress, completed: bool) {
        let shared = self.ctx.shared.clone();
        if let Err(e) = self.settle_publish() {
            // The final version was held before `completed`: this is a stop
            // from outside or a failure, and the loop ends either way.
            warn!("the last publish before stopping failed: {e}");
        }
        if !completed {
            // Stopped from outside (SIGTERM): keep the latest state for `--resume`.
            self.checkpoint_if(at, |every, u| u > 0 && !u.is_multiple_of(every));
        }
        self.checkpoints.flush();
        if completed && at.env_steps < shared.config.run.total_steps {
            info!(
                env_steps = at.env_steps,
                time_limit_secs = shared.config.run.time_limit_secs,
                "run.time_limit_secs reached before run.total_steps: training ends here"
            );
        }
        let flag = if completed {
            &shared.finished
        } else {
            &shared.stopping
        };
        flag.store(true, Ordering::Release);
    }

    /// Restores the trainer, the normalisers and the counters from a checkpoint.
    fn restore(&mut self, ck: Checkpoint) -> Result<Progress, LearnerError> {
        check_obs_stats(&self.ctx.model_spec, ck.meta.obs_stats.as_ref())?;
        self.trainer.load_state(&ck.trainer)?;
        // The network's normaliser is made from the f64 statistics, as after
        // every update.
        if let (true, Some(stats)) = (self.ctx.model_spec.network.obs_norm, &ck.meta.obs_stats) {
            self.trainer.set_obs_stats(stats);
        }
        self.ctx.normalizers.obs = ck.meta.obs_stats;
        self.ctx.normalizers.rewards = ck.meta.reward_scale;
        let mut at = Progress {
            updates: ck.meta.updates,
            version: ck.meta.version,
            env_steps: ck.meta.env_steps,
        };
        // Versions published after the checkpoint may still be held: go on
        // above them, so followers take the resumed weights as newer.
        if let Some(held) = self
            .ctx
            .rt
            .block_on(self.ctx.publisher.latest_version(&self.ctx.shared.run_id))
            && held >= at.version
        {
            at.version = held + 1;
        }
        self.ctx
            .live
            .env_steps
            .store(at.env_steps, Ordering::Relaxed);
        self.ctx.live.updates.store(at.updates, Ordering::Relaxed);
        info!(
            env_steps = at.env_steps,
            updates = at.updates,
            version = at.version,
            "resumed from checkpoint"
        );
        Ok(at)
    }

    /// One update on the taken batches by the run's rule. Each update is its
    /// own trace, linked to the ingest spans of the batches it used.
    fn train(
        &mut self,
        rule: &mut UpdateRule,
        taken: &collect::Taken,
        at: Progress,
        steps_before: u64,
    ) -> Result<(Prepared, UpdateStats), LearnerError> {
        let cfg = self.ctx.shared.config.clone();
        let span = info_span!(
            parent: None,
            "update",
            update = at.updates + 1,
            version = at.version,
            samples = cfg.samples_per_update(),
            batches = taken.origins.len(),
        );
        for b in &taken.origins {
            sebulba_transport::trace::link_from_map(&span, &b.ingest);
        }
        let _enter = span.enter();
        let at = UpdateAt {
            version: at.version,
            env_steps: at.env_steps,
            budget_used: cfg.budget_used(steps_before, self.ctx.clock.wall_seconds()),
        };
        let norms = &mut self.ctx.normalizers;
        let trainer = &mut self.trainer;
        Ok(rule.train(&taken.trajectories, at, trainer, norms, &cfg)?)
    }

    /// In a deterministic run, waits for the evaluation of `version` when the
    /// evaluator is due to score it (by its own rule: `eval.interval` past the
    /// newest evaluated), so that which versions are evaluated is no matter of
    /// timing: the evaluator sees no newer version before it has scored this one.
    fn deterministic_evaluation(&self, made: u64) {
        let shared = &self.ctx.shared;
        let Some(plan) = &shared.deterministic else {
            return;
        };
        // With a forced lag, the evaluator sees versions that many updates late.
        let version = plan.published(made);
        let interval = shared.config.eval.interval;
        let newest = shared.evals.scores().latest;
        if newest.is_some_and(|s| version < s.version.saturating_add(interval)) {
            return;
        }
        let wait = Duration::from_secs(shared.config.learner.final_eval_timeout_secs);
        let (publisher, run, stop) = (&self.ctx.publisher, &shared.run_id, &self.ctx.stop);
        let arrived = self
            .ctx
            .rt
            .block_on(shared.evals.wait_for(publisher, run, version, wait, stop));
        if !arrived && !stop.is_cancelled() {
            warn!(
                version,
                "deterministic run: no evaluation of this version within {wait:?}; going on (which versions are evaluated may now differ from run to run)"
            );
        }
    }

    /// After an update: publish, checkpoint when due, and the metrics line.
    fn publish_and_record(
        &mut self,
        mut at: Progress,
        completed: bool,
        t0: Instant,
        prepared: &Prepared,
        stats: UpdateStats,
    ) -> Result<(), LearnerError> {
        if completed {
            self.ctx.shared.finished.store(true, Ordering::Release);
        }
        let publishing = Instant::now();
        let shared = self.ctx.shared.clone();
        let plan = shared.deterministic.as_ref();
        if let Some(l) = plan.filter(|l| l.lag() > 0 && !completed) {
            self.publish_lagged(at, l.published(at.version))?;
        } else if completed || plan.is_some() {
            // The final version, and every version of a deterministic run (whose
            // evaluation the loop may wait for next), are held before going on.
            at.version = self.publish(at, completed)?;
        } else {
            self.start_publish(at, completed)?;
        }
        crate::metrics::publish_seconds(publishing.elapsed().as_secs_f64());
        self.ctx.live.updates.store(at.updates, Ordering::Relaxed);
        self.checkpoint_if(at, |every, u| u.is_multiple_of(every) || completed);
        let wall = self.ctx.clock.wall_seconds();
        let skipped = stats.non_finite_steps() as u64;
        let line = MetricsLine::new(
            at,
            wall,
            t0.elapsed().as_secs_f64(),
            prepared,
            stats,
            &self.ctx.shared,
        );
        if let Some(r) = line.episode_return_mean() {
            self.ctx.live.set_last_return(r);
        }
        let returns = &self.ctx.shared.train_returns;
        returns.extend(&prepared.episode_returns);
        self.ctx.live.set_lag(prepared.lag.mean);
        crate::metrics::progress(at.updates, at.version, at.env_steps, wall);
        crate::metrics::update(
            t0.elapsed().as_secs_f64(),
            line.episode_return_mean(),
            prepared.past_moves,
            skipped,
        );
        self.ctx
            .metrics
            .write(&line)
            .map_err(|e| LearnerError::Io("metrics.jsonl".into(), e))?;
        if completed {
            info!(
                env_steps = at.env_steps,
                updates = at.updates,
                "step budget reached"
            );
        } else {
            self.deterministic_evaluation(at.version);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sebulba_algorithms::ppo::PpoStats;
    use sebulba_core::model::RunningMeanStd;

    /// A checkpoint's statistics must fit the network that normalises.
    #[test]
    fn a_checkpoint_without_fitting_statistics_is_refused() {
        let mut cfg = sebulba_core::config::RunConfig::preset("CartPole-v1").unwrap();
        let env = sebulba_envs::env_spec("CartPole-v1").unwrap();
        let plain = ModelSpec::new(&env, &cfg.network).unwrap();
        cfg.network.obs_norm = true;
        let normalising = ModelSpec::new(&env, &cfg.network).unwrap();
        let mut good = RunningMeanStd::new(4);
        good.update(&[1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 0.0, 1.0]);
        assert!(check_obs_stats(&normalising, Some(&good)).is_ok());
        assert!(check_obs_stats(&plain, None).is_ok());
        let e = check_obs_stats(&normalising, None).unwrap_err();
        assert!(e.to_string().contains("no observation statistics"), "{e}");
        let short = RunningMeanStd::new(3);
        let e = check_obs_stats(&normalising, Some(&short)).unwrap_err();
        assert!(e.to_string().contains("3 means"), "{e}");
        let mut negative = good.clone();
        negative.var[2] = -1.0;
        assert!(check_obs_stats(&normalising, Some(&negative)).is_err());
    }

    /// Updates that step on nothing finite count up; one good step resets.
    #[test]
    fn the_guard_counts_updates_that_stepped_on_nothing() {
        let stats = |taken, skipped| {
            UpdateStats::Ppo(PpoStats {
                minibatch_steps: taken,
                non_finite_steps: skipped,
                ..PpoStats::default()
            })
        };
        let mut run = 0;
        for _ in 0..MAX_NON_FINITE_UPDATES {
            run = non_finite_guard(&[], &stats(0, 8), 1, run);
        }
        assert_eq!(run, MAX_NON_FINITE_UPDATES);
        assert_eq!(non_finite_guard(&[], &stats(6, 2), 4, run), 0);
        assert_eq!(non_finite_guard(&[], &stats(8, 0), 5, 2), 0);
    }
}
