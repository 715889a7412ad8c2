//! Publishing versions from the update loop: each new version as soon as it
//! is made (on the runtime, while the next update trains: [`outbox`]), or in
//! a deterministic run with a forced lag, `run.forced_lag` updates late so that
//! actors and evaluator see exactly the versions the lanes name
//! ([`crate::deterministic`]).

use super::UpdateLoop;
use super::outbox;
use super::record::Progress;
use crate::error::LearnerError;
use sebulba_core::policy::network_to_wire;
use sebulba_proto::{EvalSchedule, Weights};
use std::sync::atomic::Ordering;
use tracing::{Instrument, info_span};

impl UpdateLoop {
    /// safetensors bytes of the current weights.
    pub fn weights_bytes(&self) -> Result<Vec<u8>, LearnerError> {
        Ok(self.trainer.safetensors()?)
    }

    /// Publishes the current weights as version `at.version` and waits for
    /// the parameter server to hold them; returns the version published (see
    /// [`outbox::publish`]).
    pub(super) fn publish(&mut self, at: Progress, final_: bool) -> Result<u64, LearnerError> {
        self.start_publish(at, final_)?;
        Ok(self.settle_publish()?.unwrap_or(at.version))
    }

    /// Starts publishing the current weights as version `at.version` on the
    /// runtime, once the previous version's publish has finished (its error,
    /// if it failed, is returned here): the next update trains meanwhile.
    pub(super) fn start_publish(&mut self, at: Progress, final_: bool) -> Result<(), LearnerError> {
        self.settle_publish()?;
        let span = info_span!("publish", version = at.version);
        let weights = self.weights_message(at, final_, &span)?;
        self.send(weights, span);
        Ok(())
    }

    /// With a forced lag: keeps the version just made, and publishes (and
    /// waits for) version `due` (`Deterministic::published`), when it is held and
    /// the actors have not seen it yet.
    pub(super) fn publish_lagged(&mut self, at: Progress, due: u64) -> Result<(), LearnerError> {
        let made = self.weights_message(at, false, &info_span!("hold", version = at.version))?;
        self.held.push_back(made);
        while self.held.front().is_some_and(|w| w.version < due) {
            self.held.pop_front();
        }
        if self.held.front().is_some_and(|w| w.version == due) {
            let mut weights = self.held.pop_front().expect("the front was checked");
            self.settle_publish()?;
            let span = info_span!("publish", version = weights.version, made = at.version);
            // Followers' weight refreshes continue the publish, not the hold.
            weights.trace_context = sebulba_transport::trace::context_map(&span);
            self.send(weights, span);
            self.settle_publish()?;
        }
        Ok(())
    }

    /// The message that publishes the current weights as version
    /// `at.version`; followers' weight refreshes continue `span`'s trace.
    fn weights_message(
        &self,
        at: Progress,
        final_: bool,
        span: &tracing::Span,
    ) -> Result<Weights, LearnerError> {
        let bytes = span.in_scope(|| self.weights_bytes())?;
        let c = &self.ctx.shared.config;
        Ok(Weights {
            version: at.version,
            safetensors: bytes.into(),
            network: Some(network_to_wire(&c.network)),
            env_id: c.env.id.clone(),
            env_steps: at.env_steps,
            r#final: final_,
            run_id: self.ctx.shared.run_id.clone(),
            env_kwargs: c.env.kwargs_json(),
            wall_seconds: self.ctx.clock.wall_seconds(),
            // The pool of past selves, when some seats play them.
            past_keep: if c.selfplay.past_fraction > 0.0 {
                c.selfplay.past_versions
            } else {
                0
            },
            past_stride: c.selfplay.past_stride,
            epsilon: sebulba_algorithms::dqn::epsilon(c, at.env_steps),
            eval: Some(eval_schedule(&c.eval)),
            trace_context: sebulba_transport::trace::context_map(span),
        })
    }

    /// Starts publishing `weights` on the runtime, inside `span` (the
    /// previous publish has been settled).
    fn send(&mut self, weights: Weights, span: tracing::Span) {
        let publish = outbox::publish(
            self.ctx.publisher.clone(),
            self.ctx.shared.clone(),
            self.ctx.stop.clone(),
            weights,
        );
        self.pending_publish = Some(self.ctx.rt.spawn(publish.instrument(span)));
    }

    /// Waits for the publish in flight, if any; the version it published.
    pub(super) fn settle_publish(&mut self) -> Result<Option<u64>, LearnerError> {
        let Some(handle) = self.pending_publish.take() else {
            return Ok(None);
        };
        match self.ctx.rt.block_on(handle) {
            Ok(published) => published.map(Some),
            Err(e) => Err(LearnerError::Publish {
                version: self.ctx.shared.version.load(Ordering::Acquire),
                status: tonic::Status::internal(format!("the publishing task failed: {e}")),
            }),
        }
    }
}

/// The run's `eval` config as it travels with the weights: a cluster's
/// evaluator then scores the run as local mode's does. The config's ranges
/// keep every count within `u32`.
fn eval_schedule(e: &sebulba_core::config::EvalConfig) -> EvalSchedule {
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    EvalSchedule {
        interval: e.interval,
        episodes: n(e.episodes),
        final_episodes: n(e.final_episodes),
        earlier_versions: n(e.earlier_versions),
        policy: e.policy.name().into(),
        epsilon: e.epsilon,
        max_steps: e.max_steps,
        final_max_steps: e.final_max_steps,
        cpu_share: e.cpu_share,
        video_every: e.video_every,
    }
}
