//! The sections of a run file. Every field has a default in the presets
//! (`presets.rs`); doc comments say what each does and name the default.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvConfig {
    /// Gymnasium id, e.g. `CartPole-v1`.
    pub id: String,
    /// E: environments each actor steps together.
    pub envs_per_actor: usize,
    /// T: steps per env in one trajectory batch.
    pub rollout_length: usize,
    /// Keyword arguments for a Python environment's constructor
    /// (`gym.make(id, **kwargs)` or the user's factory); empty for native ids.
    #[serde(default)]
    pub kwargs: toml::Table,
}

impl EnvConfig {
    /// The keyword arguments as a JSON object (`""` when there are none), the
    /// form they travel in to actors and the evaluator.
    pub fn kwargs_json(&self) -> String {
        if self.kwargs.is_empty() {
            String::new()
        } else {
            serde_json::to_string(&self.kwargs).unwrap_or_default()
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// Env steps (all actors together) after which training stops.
    pub total_steps: u64,
    /// Seconds of wall time (the whole run's, across resumes) after which
    /// training stops, whichever of this and `total_steps` comes first, with
    /// the final evaluation as usual; annealed settings (`ppo.anneal_lr`,
    /// `ppo.anneal_clip`) follow whichever of the two budgets is further
    /// spent, so they reach 0 at the end either way. 0 (default): no limit.
    /// Not with `run.deterministic` (a stop by the clock does not repeat).
    #[serde(default)]
    pub time_limit_secs: u64,
    pub seed: u64,
    /// Actors started by `sebulba local`.
    pub local_actors: usize,
    /// How `sebulba local` hosts its actors: `threads` of its own process,
    /// `processes` (children of the same binary over loopback gRPC, as a
    /// cluster's: each has its own Python interpreter, so Python envs do not
    /// share one GIL), or `auto` (default): processes for Gymnasium and
    /// `py:` envs, threads for native ones, ALE's and EnvPool's (which step
    /// their envs in C++ threads outside the GIL).
    #[serde(default)]
    pub local_actors_as: ActorHosting,
    /// Times `sebulba local` starts an actor child process again after it
    /// dies, before it gives the slot up (default 10).
    #[serde(default = "default_actor_restarts")]
    pub actor_restarts: u32,
    /// What a local run does when it gives an actor child process up:
    /// `stop` (default) ends the run with an error naming the child and its
    /// last failure; `continue` goes on with the others (and stops only when
    /// none is left). `summary.json` records either (`actor_processes`).
    #[serde(default)]
    pub on_actor_give_up: OnActorGiveUp,
    /// A deterministic run: `sebulba local` repeats bit for bit for its seed
    /// (default false). Every update takes one batch per actor lane in a fixed
    /// order, each acted with the version the update starts from (lag 0), and
    /// the learner waits for each due evaluation before going on. Slower than
    /// the free-running pipeline; for comparisons.
    #[serde(default)]
    pub deterministic: bool,
    /// In a deterministic run, every batch is acted with the version this
    /// many updates older than the update that trains on it (the first
    /// updates take the run's first version): a policy lag that is exact and
    /// repeatable, for comparing `ppo.lag_correction` without timing noise.
    /// Default 0 (a deterministic run at lag 0); at most `learner.max_policy_lag`.
    #[serde(default)]
    pub forced_lag: u64,
    /// What the learner trains: `ppo` (default) or `dqn` (the `[dqn]`
    /// section; discrete single-player envs).
    #[serde(default)]
    pub algorithm: Algorithm,
}

/// Where `sebulba local` runs its actors (`run.local_actors_as`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActorHosting {
    #[default]
    Auto,
    Threads,
    Processes,
}

impl ActorHosting {
    /// Whether the actors of a run on `env_id` are child processes.
    pub fn processes_for(self, env_id: &str) -> bool {
        match self {
            ActorHosting::Threads => false,
            ActorHosting::Processes => true,
            ActorHosting::Auto => env_id.starts_with("gym:") || env_id.starts_with("py:"),
        }
    }
}

fn default_actor_restarts() -> u32 {
    10
}

/// What `sebulba local` does when it gives an actor process up
/// (`run.on_actor_give_up`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnActorGiveUp {
    /// End the run with an error naming the child and its last failure.
    #[default]
    Stop,
    /// Go on with the other actors; stop only when every one is given up.
    Continue,
}

/// The learning algorithm of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// PPO on each update's fresh batches (the `[ppo]` section).
    #[default]
    Ppo,
    /// DQN (Mnih et al. 2015): the policy head's outputs are Q-values,
    /// actors act epsilon-greedy on them, and every update's batches go into
    /// a replay memory that minibatches are drawn from, against one-step
    /// targets of a target network (the `[dqn]` section).
    Dqn,
}

/// The policy network. Everything here travels with the weights (`NetworkSpec`),
/// because actors and the evaluator must build the same network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// Each torso's convolution stem, input side first, before its hidden
    /// layers (default none: an MLP). Needs an image observation. A layer is
    /// `{ channels, kernel, stride = 1, padding = 0 }` and is followed by
    /// `activation`; the Nature CNN is `[{channels = 32, kernel = 8, stride =
    /// 4}, {channels = 64, kernel = 4, stride = 2}, {channels = 64, kernel = 3}]`
    /// with `hidden = [512]`.
    #[serde(default)]
    pub conv: Vec<ConvLayer>,
    /// Each torso's IMPALA ResNet stacks (Espeholt et al. 2018), after the
    /// convolution stem and before the hidden layers (default none). A stack
    /// is `{ channels, blocks = 2 }`: a 3x3 convolution (padding 1), a 3x3
    /// max-pool with stride 2 (padding 1) and `blocks` residual blocks `x +
    /// conv(act(conv(act(x))))`; the activation follows the last stack. The
    /// IMPALA network is `[{channels = 16}, {channels = 32}, {channels =
    /// 32}]` with `hidden = [256]` and `activation = "relu"`. Needs an image
    /// observation.
    #[serde(default)]
    pub stacks: Vec<Stack>,
    /// Hidden layer sizes of each torso.
    pub hidden: Vec<usize>,
    /// A recurrent core after each torso's hidden layers, before the heads:
    /// `none` (default), `lstm` or `gru` (PyTorch's `nn.LSTM`/`nn.GRU`, one
    /// layer, published under their names). One core where the torso is
    /// shared (CleanRL's layout), one per torso otherwise. Each env's state
    /// is zeroed at its episode's start and carried from step to step; an
    /// update trains on whole env sequences, through time.
    #[serde(default)]
    pub core: CoreKind,
    /// The recurrent core's hidden units (default 128).
    #[serde(default = "default_core_size")]
    pub core_size: usize,
    /// Default `tanh`.
    pub activation: Activation,
    /// LayerNorm in each hidden layer: `none` (default), `pre` (before the
    /// activation) or `post` (after it).
    pub layer_norm: LayerNormPlacement,
    /// Weight init: `orthogonal` (default; gains sqrt(2) hidden, 0.01 policy head,
    /// 1.0 value head) or `lecun_uniform`. Biases start at zero.
    pub init: Init,
    /// One torso for policy and value (default false: separate torsos).
    pub shared_torso: bool,
    /// Normalise observations by running mean/var kept inside the policy
    /// (default false; on in the continuous presets).
    pub obs_norm: bool,
    /// Normalised observations are clipped to +-this (default 10).
    pub obs_clip: f64,
    /// Continuous actions: std = softplus(raw) + `min_std` (default 1e-3).
    pub min_std: f64,
    /// Continuous actions: the std at initialisation (default 1.0).
    pub init_std: f64,
}

fn default_core_size() -> usize {
    128
}

/// `network.core`: a recurrent core, or none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CoreKind {
    #[default]
    None,
    Lstm,
    Gru,
}

impl CoreKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Lstm => "lstm",
            Self::Gru => "gru",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "lstm" => Some(Self::Lstm),
            "gru" => Some(Self::Gru),
            _ => None,
        }
    }

    /// The fused engine's cell, when there is a core.
    pub fn cell(self) -> Option<sebulba_fused::Cell> {
        match self {
            Self::None => None,
            Self::Lstm => Some(sebulba_fused::Cell::Lstm),
            Self::Gru => Some(sebulba_fused::Cell::Gru),
        }
    }
}

impl NetworkConfig {
    /// Whether the fused forward pass (and the fused engine) covers this
    /// network: MLPs without LayerNorm.
    pub fn fused_covers(&self) -> bool {
        self.layer_norm == LayerNormPlacement::None
    }

    /// Whether the network remembers: a recurrent core.
    pub fn is_recurrent(&self) -> bool {
        self.core != CoreKind::None
    }

    /// Floats of each env's policy state (`sebulba_fused::Arch::state_width`
    /// of the network this builds): each torso's core's carried vectors.
    pub fn state_width(&self) -> usize {
        let torsos = if self.shared_torso { 1 } else { 2 };
        let carried = self.core.cell().map_or(0, |c| c.carried());
        torsos * carried * self.core_size
    }

    /// Whether a torso has image blocks (convolutions or IMPALA stacks).
    pub fn is_convolutional(&self) -> bool {
        !self.conv.is_empty() || !self.stacks.is_empty()
    }

    /// Each torso's blocks, the one description of the network
    /// (`sebulba_fused::Block`).
    pub fn torso(&self) -> Vec<sebulba_fused::Block> {
        let core = self.core.cell().map(|cell| sebulba_fused::Core {
            cell,
            size: self.core_size,
        });
        sebulba_fused::torso_blocks(&self.conv, &self.stacks, &self.hidden, core)
    }
}

/// `network.activation`: the fused engine's own type (its passes branch on it).
pub use sebulba_fused::Activation;
/// `network.conv`'s layers: the fused engine's own type (its layout is built from it).
pub use sebulba_fused::ConvLayer;
/// `network.stacks`' stacks: the fused engine's own type.
pub use sebulba_fused::Stack;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerNormPlacement {
    None,
    Pre,
    Post,
}

impl LayerNormPlacement {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Pre => "pre",
            Self::Post => "post",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "pre" => Some(Self::Pre),
            "post" => Some(Self::Post),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Init {
    Orthogonal,
    LecunUniform,
}

impl Init {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Orthogonal => "orthogonal",
            Self::LecunUniform => "lecun_uniform",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "orthogonal" => Some(Self::Orthogonal),
            "lecun_uniform" => Some(Self::LecunUniform),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearnerConfig {
    /// One model replica per device, gradients all-reduced across them:
    /// `["cpu"]`, `["cpu", "cpu"]`, `["cuda:0", "cuda:1"]`, or `["auto"]`
    /// (default): the first CUDA device for a convolutional network when the
    /// binary has CUDA and a device answers, else `cpu`
    /// ([`crate::device_choice::choose`]; the log and `summary.json` say which).
    pub devices: Vec<String>,
    /// Trajectory batches that make one update.
    pub batches_per_update: usize,
    /// Capacity of the bounded ingest queue (batches); a full queue blocks actors.
    pub queue_capacity: usize,
    /// Batches whose policy version is more than this behind are dropped.
    pub max_policy_lag: u64,
    /// How long the learner waits for the final evaluation before writing the summary.
    pub final_eval_timeout_secs: u64,
    /// Write `checkpoint.bin` every this many updates (and at the end); 0 = never.
    pub checkpoint_interval: u64,
    /// What computes the PPO update: `auto` (default: `fused` where it applies,
    /// else `burn`), `burn` (burn's autodiff, any device and network) or
    /// `fused` (a hand-written CPU forward and backward: one `cpu` device, no
    /// LayerNorm; several times faster for small networks).
    #[serde(default)]
    pub engine: LearnerEngine,
    /// Threads the fused engine spreads each minibatch step over (each takes
    /// a share of the rows; the gradients are added). 0 (default) = auto:
    /// one per core this process may use when a minibatch is worth splitting
    /// (see `sebulba_algorithms::engine::threads::auto_threads`), else one; more than the
    /// cores counts as the cores. The burn engine ignores it.
    #[serde(default)]
    pub threads: usize,
    /// Departed actors (their stream ended) whose batch counts stay apart in
    /// `summary.json`'s `batches_per_actor`; beyond this many, the earliest
    /// to leave fold into one `batches_departed` entry (default 256), so the
    /// learner's tables stay bounded however many actors come and go.
    #[serde(default = "default_departed_actors_kept")]
    pub departed_actors_kept: usize,
}

fn default_departed_actors_kept() -> usize {
    256
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LearnerEngine {
    #[default]
    Auto,
    Burn,
    Fused,
}

impl LearnerEngine {
    /// Whether the fused engine covers a learner of `network` on `devices`.
    pub fn fused_applies(devices: &[String], network: &NetworkConfig) -> bool {
        devices.len() == 1 && devices[0].trim() == "cpu" && network.fused_covers()
    }

    /// Whether a learner with this setting runs the fused engine.
    pub fn use_fused(self, devices: &[String], network: &NetworkConfig) -> bool {
        match self {
            LearnerEngine::Burn => false,
            LearnerEngine::Auto | LearnerEngine::Fused => Self::fused_applies(devices, network),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorConfig {
    /// Batches an actor may have in flight to the learner.
    pub send_queue: usize,
}

/// DQN (`run.algorithm = "dqn"`). Its defaults are the tuned
/// Stable-Baselines3 zoo's for Acrobot. Each update takes
/// `learner.batches_per_update` batches: keep them small (a few envs, a few
/// steps), since acting lags the Q-values by an update.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DqnConfig {
    pub learning_rate: f64,
    pub gamma: f64,
    /// Transitions per gradient step.
    pub batch_size: usize,
    /// Transitions the replay memory holds (the oldest go first).
    pub buffer_size: usize,
    /// Gradient steps per env step taken in: an update of N samples takes
    /// `replay_ratio * N` of them (the fraction carried to the next update).
    pub replay_ratio: f64,
    /// Env steps before the first gradient step.
    pub learning_starts: u64,
    /// Env steps between copies of the weights into the target network.
    pub target_update_interval: u64,
    /// The Huber loss's threshold on `Q(s, a) - y` (SB3's smooth L1: 1).
    pub huber_delta: f64,
    /// Clip the gradient by its global norm.
    pub max_grad_norm: f64,
    pub adam_eps: f64,
    /// Epsilon-greedy acting: epsilon falls linearly from `epsilon_start` to
    /// `epsilon_end` over the first `exploration_fraction` of
    /// `run.total_steps`, then stays.
    pub epsilon_start: f64,
    pub epsilon_end: f64,
    pub exploration_fraction: f64,
}

impl Default for DqnConfig {
    fn default() -> Self {
        Self {
            learning_rate: 6.3e-4,
            gamma: 0.99,
            batch_size: 128,
            buffer_size: 50_000,
            replay_ratio: 1.0,
            learning_starts: 0,
            target_update_interval: 250,
            huber_delta: 1.0,
            max_grad_norm: 10.0,
            adam_eps: 1e-8,
            epsilon_start: 1.0,
            epsilon_end: 0.1,
            exploration_fraction: 0.12,
        }
    }
}

/// Self-play against past selves (turn-based games). OpenAI Five and
/// AlphaStar keep some opponents from the past so the policy does not chase
/// its own newest quirks and forget how to beat older play.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelfPlayConfig {
    /// At each game's start, every seat but one (chosen at random) is played
    /// by a past version with this probability; 0: every seat acts with the
    /// newest weights. Moves of past seats are not trained on.
    pub past_fraction: f64,
    /// Every other seat is, with this probability, played by one of the
    /// game's rule-based players (Big Two: greedy or planner, drawn per
    /// game): what the policy meets at evaluation, met in training. A seat
    /// is past with `past_fraction`, else a rule player's with this, else
    /// the newest version's. Moves of rule seats are not trained on.
    pub rule_fraction: f64,
    /// The pool: the parameter server keeps this many past versions...
    pub past_versions: u32,
    /// ...namely the newest versions divisible by this stride.
    pub past_stride: u64,
}

impl SelfPlayConfig {
    /// Whether some seats are played by others than the newest version
    /// (their moves are flagged and not trained on).
    pub fn seats_others(&self) -> bool {
        self.past_fraction > 0.0 || self.rule_fraction > 0.0
    }
}

impl Default for SelfPlayConfig {
    fn default() -> Self {
        Self {
            past_fraction: 0.0,
            rule_fraction: 0.0,
            past_versions: 8,
            past_stride: 20,
        }
    }
}
