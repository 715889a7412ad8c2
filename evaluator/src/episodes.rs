//! Evaluation episodes: N envs from the evaluation seed's start states, one
//! counted episode each, actions as the run's evaluation protocol picks them
//! ([`crate::acting`]); one batched inference call per step over all N envs
//! (an env whose episode is counted steps on uncounted). An evaluation has a
//! budget of env steps, counted over the episodes still playing: what has not
//! finished within it, or when the evaluator is stopped, is cut, reported
//! apart and never counted as finished.

use crate::acting::Acting;
use crate::cpu::Pacing;
use crate::video::Film;
use sebulba_core::config::EvalPolicy;
use sebulba_core::distribution::DistError;
use sebulba_core::policy::{InferencePolicy, PolicyState};
use sebulba_envs::{EnvError, Purpose, VectorEnv, make_vector_env};
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Dist(#[from] DistError),
    /// The evaluator was stopped before a game's matches were played.
    #[error("stopped before the matches were played")]
    Stopped,
}

/// What one evaluation plays, and how.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub episodes: usize,
    /// Env steps the evaluation may play, summed over its unfinished episodes.
    pub max_steps: u64,
    pub policy: EvalPolicy,
    pub epsilon: f64,
    /// The evaluation seed: start states and the protocol's draws.
    pub seed: u64,
    /// The share of the machine's cores the evaluation may take (`None`:
    /// unbounded).
    pub cpu_share: Option<f64>,
}

/// Why an evaluation's unfinished episodes were cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutBy {
    /// The step budget (`eval.max_steps`, `eval.final_max_steps`) ran out.
    MaxSteps,
    /// The evaluator was stopped.
    Shutdown,
}

impl CutBy {
    pub fn name(self) -> &'static str {
        match self {
            CutBy::MaxSteps => "max_steps",
            CutBy::Shutdown => "shutdown",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct EpisodeResults {
    /// The finished episodes' returns and lengths.
    pub returns: Vec<f64>,
    pub lengths: Vec<u32>,
    /// Finished episodes that ended at the env's step cap (truncated).
    pub truncated: usize,
    /// The cut episodes' returns and lengths so far.
    pub cut_returns: Vec<f64>,
    pub cut_lengths: Vec<u32>,
    pub cut_by: Option<CutBy>,
    /// Envs replaced after they failed mid-episode.
    pub env_restarts: u64,
    /// CPU time of the evaluation's threads, and the time it slept to
    /// keep to its share of the cores.
    pub cpu_seconds: f64,
    pub throttled_seconds: f64,
}

impl EpisodeResults {
    /// The returns an evaluation is scored by: the finished episodes', or,
    /// where none finished, the cut ones' so far (a line then says
    /// `episodes: 0`), so that a stalled policy still has a figure.
    pub fn scored(&self) -> (&[f64], &[u32]) {
        if self.returns.is_empty() {
            (&self.cut_returns, &self.cut_lengths)
        } else {
            (&self.returns, &self.lengths)
        }
    }

    pub fn mean(&self) -> f64 {
        mean(self.scored().0)
    }

    pub fn std(&self) -> f64 {
        let (r, m) = (self.scored().0, self.mean());
        (r.iter().map(|r| (r - m).powi(2)).sum::<f64>() / r.len().max(1) as f64).sqrt()
    }

    /// Episodes set out to play: finished and cut.
    pub fn asked(&self) -> usize {
        self.returns.len() + self.cut_returns.len()
    }
}

/// The mean of `v`, 0 for none.
pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Plays `plan.episodes` episodes (env i plays episode i from the seed's
/// start state) until each has finished, the step budget is spent or `stop`
/// fires. An env that fails (a Python env raised or returned NaN/Inf) is
/// replaced and plays a new episode in place of the one it broke, at most
/// `episodes` times in all; the results count the replacements.
pub fn play_episodes(
    policy: &InferencePolicy,
    env_id: &str,
    env_kwargs: &str,
    plan: &Plan,
    stop: &CancellationToken,
) -> Result<EpisodeResults, PlayError> {
    play_filmed(policy, env_id, env_kwargs, plan, stop, None)
}

/// [`play_episodes`], filming env 0's episode into `film` as it is played.
pub fn play_filmed(
    policy: &InferencePolicy,
    env_id: &str,
    env_kwargs: &str,
    plan: &Plan,
    stop: &CancellationToken,
    mut film: Option<&mut dyn Film>,
) -> Result<EpisodeResults, PlayError> {
    let mut pacing = Pacing::new(stop, plan.cpu_share);
    let (spec, episodes) = (policy.spec(), plan.episodes);
    let dist = spec.dist();
    let mut venv = make_vector_env(env_id, env_kwargs, episodes, plan.seed, Purpose::Evaluate)?;
    let mut obs = vec![0.0f32; episodes * spec.obs_dim];
    venv.reset(&mut obs)?;
    if let Some(f) = film.as_deref_mut() {
        f.frame(venv.render(0));
    }
    let mut out = venv.new_step_out();
    let mut acting = Acting::new(&dist, episodes, plan.policy, plan.epsilon, plan.seed);
    let mut book = Book::new(episodes);
    let mut rows = Rows::new(policy, episodes, spec.obs_dim, spec.head_dim());
    let mut restarts = 0;
    let cut_by = loop {
        if book.remaining == 0 {
            break None;
        }
        if pacing.stopped() {
            break Some(CutBy::Shutdown);
        }
        if book.steps + book.remaining as u64 > plan.max_steps {
            break Some(CutBy::MaxSteps);
        }
        let head = book.heads(policy, &obs, &mut rows);
        let batch = acting.actions(&dist, head, venv.as_ref())?;
        match venv.step(batch, &mut out) {
            Ok(()) => obs.copy_from_slice(&out.obs),
            Err(EnvError::EnvFailed { index, .. } | EnvError::NonFinite { index, .. })
                if restarts < episodes =>
            {
                restarts += 1;
                book.restart(index);
                if let Some(f) = film.as_deref_mut().filter(|_| index == 0) {
                    f.stop(Some("env 0 failed and was replaced mid-episode"));
                }
                // The failed step may have moved some envs on and not
                // others: the states go back to before it, the failed
                // env's to an episode's start.
                rows.states.clone_from(&rows.before);
                rows.states.reset(index);
                venv.restart(index, &mut obs)?;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        book.step(&out);
        if let Some(f) = film.as_deref_mut().filter(|f| f.filming()) {
            film_step(f, &book, venv.as_ref());
        }
        pacing.go_on();
    };
    // Before the envs go: their threads' CPU time is the evaluation's.
    let (cpu_seconds, throttled) = pacing.spent();
    drop(venv);
    Ok(book.results(cut_by, restarts as u64, cpu_seconds, throttled))
}

/// After a step: env 0's next frame, or the end of its filmed episode.
fn film_step(film: &mut dyn Film, book: &Book, venv: &dyn VectorEnv) {
    match book.finished[0] {
        Some((ret, len, _)) => {
            film.ended(ret, len);
            film.stop(None);
        }
        None => film.frame(venv.render(0)),
    }
}

/// Buffers for the forward pass over the unfinished episodes' rows only,
/// and each episode's policy state (one episode per env, from its start).
struct Rows {
    obs_dim: usize,
    head_dim: usize,
    obs: Vec<f32>,
    states: PolicyState,
    /// The states before the latest step, for a step that failed.
    before: PolicyState,
    /// Every env's head row; a finished one's keeps its last values (its
    /// actions are played on an uncounted episode).
    head: Vec<f32>,
}

impl Rows {
    fn new(policy: &InferencePolicy, envs: usize, obs_dim: usize, head_dim: usize) -> Self {
        Self {
            obs_dim,
            head_dim,
            obs: Vec::with_capacity(envs * obs_dim),
            states: policy.state(envs),
            before: policy.state(envs),
            head: vec![0.0; envs * head_dim],
        }
    }
}

/// Each episode's progress: its return and length so far, or its result.
struct Book {
    running: Vec<(f64, u32)>,
    finished: Vec<Option<(f64, u32, bool)>>,
    remaining: usize,
    /// Steps of unfinished episodes played.
    steps: u64,
}

impl Book {
    fn new(episodes: usize) -> Self {
        Self {
            running: vec![(0.0, 0); episodes],
            finished: vec![None; episodes],
            remaining: episodes,
            steps: 0,
        }
    }

    /// The head rows of every env, computed for the unfinished ones only: a
    /// finished env steps on, but its actions count for nothing, and late in
    /// an evaluation of a convolutional network most of its time was theirs.
    fn heads<'a>(&self, policy: &InferencePolicy, obs: &[f32], rows: &'a mut Rows) -> &'a [f32] {
        let (d, h) = (rows.obs_dim, rows.head_dim);
        rows.before.clone_from(&rows.states);
        if self.remaining == self.finished.len() {
            rows.head
                .copy_from_slice(&policy.step(obs, &mut rows.states, None));
            return &rows.head;
        }
        let playing = || (0..self.finished.len()).filter(|&i| self.finished[i].is_none());
        rows.obs.clear();
        for i in playing() {
            rows.obs.extend_from_slice(&obs[i * d..(i + 1) * d]);
        }
        let mut states = rows.states.select(playing());
        let head = policy.step(&rows.obs, &mut states, None);
        rows.states.put_back(&states, playing());
        for (k, i) in playing().enumerate() {
            rows.head[i * h..(i + 1) * h].copy_from_slice(&head[k * h..(k + 1) * h]);
        }
        &rows.head
    }

    /// A failed env's episode starts again.
    fn restart(&mut self, index: usize) {
        self.running[index] = (0.0, 0);
    }

    fn step(&mut self, out: &sebulba_envs::VecStepOut) {
        for (i, run) in self.running.iter_mut().enumerate() {
            if self.finished[i].is_none() {
                run.0 += f64::from(out.reward[i]);
                run.1 += 1;
                self.steps += 1;
            }
        }
        for ep in &out.episodes {
            let i = ep.env_index;
            if self.finished[i].is_none() {
                let at_cap = out.truncated[i] && !out.terminated[i];
                self.finished[i] = Some((ep.episode_return, ep.length, at_cap));
                self.remaining -= 1;
            }
        }
    }

    fn results(
        self,
        cut_by: Option<CutBy>,
        env_restarts: u64,
        cpu_seconds: f64,
        throttled_seconds: f64,
    ) -> EpisodeResults {
        let mut r = EpisodeResults {
            cut_by,
            env_restarts,
            cpu_seconds,
            throttled_seconds,
            ..EpisodeResults::default()
        };
        for (done, run) in self.finished.into_iter().zip(self.running) {
            match done {
                Some((ret, len, at_cap)) => {
                    r.returns.push(ret);
                    r.lengths.push(len);
                    r.truncated += usize::from(at_cap);
                }
                None => {
                    r.cut_returns.push(run.0);
                    r.cut_lengths.push(run.1);
                }
            }
        }
        r
    }
}

#[cfg(test)]
mod tests;
