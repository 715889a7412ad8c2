//! MinAtar (Young & Tian 2019): five Atari games on a 10x10 grid, one
//! boolean channel per kind of object, written from the games' published
//! rules; the `minatar` package from PyPI is the reference they are tested
//! against (`tests/minatar_reference.rs`).
//!
//! [`MinAtar`] is what every game shares: the ids (`MinAtar/<Game>-v1` acts
//! with the game's minimal action set, `-v0` with all six actions, as the
//! package registers them), sticky actions (with probability
//! `sticky_action_prob`, 0.1 by default as in the paper, the previous action
//! repeats; the previous action is kept across episodes, as the package
//! does), the difficulty ramp switch, and the observation (`[10, 10, C]`,
//! channels last, 0 or 1). A game is a [`Game`]: its rules on its own state.

mod asterix;
mod breakout;
mod freeway;
mod seaquest;
mod space_invaders;

pub use crate::ids::MINATAR_IDS;

use crate::env::{Action, Env, EnvError, StepResult, discrete_action};
use crate::observations::ObsDtype;
use crate::spec::{ActionSpace, EnvSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The grid's side.
pub const SIZE: usize = 10;

/// The six actions of the full set, in the package's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    Noop,
    Left,
    Up,
    Right,
    Down,
    Fire,
}

const ALL_MOVES: [Move; 6] = [
    Move::Noop,
    Move::Left,
    Move::Up,
    Move::Right,
    Move::Down,
    Move::Fire,
];

/// The grid an observation is drawn on: `[y][x]` cells of `channels` bits.
pub struct Grid<'a> {
    obs: &'a mut [f32],
    channels: usize,
}

impl Grid<'_> {
    /// Marks channel `c` at row `y`, column `x`.
    pub fn set(&mut self, y: usize, x: usize, c: usize) {
        self.obs[(y * SIZE + x) * self.channels + c] = 1.0;
    }
}

/// One game's rules.
pub trait Game: Send {
    /// Observation channels.
    fn channels(&self) -> usize;
    /// The minimal action set, in the package's order.
    fn minimal_moves(&self) -> &'static [Move];
    /// A new episode's state, drawn from `rng`.
    fn reset(&mut self, rng: &mut StdRng);
    /// One step: the reward and whether the game is over.
    fn act(&mut self, m: Move, rng: &mut StdRng) -> (f64, bool);
    /// Draws the state (the grid starts cleared).
    fn draw(&self, grid: &mut Grid<'_>);
    /// The state as numbers, in the order the reference test reads the
    /// package's attributes (see each game).
    fn state(&self) -> Vec<f64>;
    /// Sets the state from [`Game::state`]'s layout; `Err` names what is wrong.
    fn set_state(&mut self, state: &[f64]) -> Result<(), String>;
}

/// Options a MinAtar id takes (`env.kwargs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// The chance that the previous action repeats (default 0.1).
    pub sticky_action_prob: f64,
    /// The game speeds up as it goes (default true; games without a ramp ignore it).
    pub difficulty_ramping: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            sticky_action_prob: 0.1,
            difficulty_ramping: true,
        }
    }
}

impl Options {
    /// `env.kwargs` of a MinAtar id: `sticky_action_prob` (a number in [0,
    /// 1]) and `difficulty_ramping` (a boolean); no other key.
    pub fn from_kwargs(id: &str, kwargs: &str) -> Result<Self, EnvError> {
        let bad = |reason: String| EnvError::External {
            id: id.to_string(),
            reason,
        };
        let mut o = Options::default();
        if kwargs.trim().is_empty() {
            return Ok(o);
        }
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(kwargs).map_err(|e| bad(format!("env.kwargs: {e}")))?;
        for (key, v) in &map {
            match key.as_str() {
                "sticky_action_prob" => {
                    o.sticky_action_prob = v
                        .as_f64()
                        .filter(|p| (0.0..=1.0).contains(p))
                        .ok_or_else(|| {
                            bad(format!(
                                "env.kwargs.sticky_action_prob = {v}: must be a number in [0, 1]"
                            ))
                        })?;
                }
                "difficulty_ramping" => {
                    o.difficulty_ramping = v.as_bool().ok_or_else(|| {
                        bad(format!(
                            "env.kwargs.difficulty_ramping = {v}: must be true or false"
                        ))
                    })?;
                }
                other => {
                    return Err(bad(format!(
                        "env.kwargs.{other}: a MinAtar game takes only `sticky_action_prob` and `difficulty_ramping`"
                    )));
                }
            }
        }
        Ok(o)
    }
}

/// A game from whether its difficulty ramps.
type MakeGame = fn(bool) -> Box<dyn Game>;

/// Each game by the name its ids carry.
const GAMES: &[(&str, MakeGame)] = &[
    ("Asterix", |ramping| {
        Box::new(asterix::Asterix::new(ramping))
    }),
    ("Breakout", |_| Box::new(breakout::Breakout::default())),
    ("Freeway", |_| Box::new(freeway::Freeway::new())),
    ("Seaquest", |ramping| {
        Box::new(seaquest::Seaquest::new(ramping))
    }),
    ("SpaceInvaders", |ramping| {
        Box::new(space_invaders::SpaceInvaders::new(ramping))
    }),
];

/// The game of a MinAtar id and whether it acts with the minimal set.
fn parse_id(id: &str) -> Option<(MakeGame, bool)> {
    let rest = id.strip_prefix("MinAtar/")?;
    let (name, version) = rest.rsplit_once("-v")?;
    let minimal = match version {
        "0" => false,
        "1" => true,
        _ => return None,
    };
    let &(_, make) = GAMES.iter().find(|(g, _)| *g == name)?;
    Some((make, minimal))
}

/// Steps after which an episode is truncated. The package sets no limit (a
/// game ends only when lost, and Breakout's bricks come back), so a strong
/// policy could play one episode forever; gymnax cuts at 1,000 steps, which
/// would truncate good play.
pub const MAX_EPISODE_STEPS: u32 = 10_000;

/// The spec of a MinAtar id (`None` for any other id).
pub fn minatar_spec(id: &str) -> Option<EnvSpec> {
    let (make, minimal) = parse_id(id)?;
    let game = make(true);
    let c = game.channels();
    let n = if minimal {
        game.minimal_moves().len()
    } else {
        6
    };
    let obs_dim = SIZE * SIZE * c;
    Some(EnvSpec {
        obs_dtype: ObsDtype::U8,
        id: id.to_string(),
        obs_dim,
        image: Some([SIZE, SIZE, c]),
        action_space: ActionSpace::Discrete { n },
        max_episode_steps: MAX_EPISODE_STEPS,
        obs_low: vec![0.0; obs_dim],
        obs_high: vec![1.0; obs_dim],
        players: 1,
    })
}

/// A MinAtar game as an [`Env`].
pub struct MinAtar {
    spec: EnvSpec,
    game: Box<dyn Game>,
    moves: Vec<Move>,
    options: Options,
    /// The action the previous step took (after stickiness), kept across episodes.
    last: Move,
    rng: StdRng,
}

impl MinAtar {
    /// The game of `id` with `options`, its randomness seeded with `seed`.
    pub fn new(id: &str, options: Options, seed: u64) -> Result<Self, EnvError> {
        let unknown = || EnvError::UnknownId(id.to_string());
        let (make, minimal) = parse_id(id).ok_or_else(unknown)?;
        let spec = minatar_spec(id).ok_or_else(unknown)?;
        let game = make(options.difficulty_ramping);
        let moves = match minimal {
            true => game.minimal_moves().to_vec(),
            false => ALL_MOVES.to_vec(),
        };
        let mut env = Self {
            spec,
            game,
            moves,
            options,
            last: Move::Noop,
            rng: StdRng::seed_from_u64(seed),
        };
        env.game.reset(&mut env.rng);
        Ok(env)
    }
}

impl Env for MinAtar {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [f32]) {
        self.game.reset(&mut self.rng);
        self.observe(obs);
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<StepResult, EnvError> {
        let a = discrete_action(&self.spec, action)?;
        // The draw is made at every step, sticky or not, as the package does.
        let sticky = self.rng.random::<f64>() < self.options.sticky_action_prob;
        let m = if sticky { self.last } else { self.moves[a] };
        self.last = m;
        let (reward, terminated) = self.game.act(m, &mut self.rng);
        self.observe(obs);
        Ok(StepResult { reward, terminated })
    }

    fn state(&self) -> Vec<f64> {
        self.game.state()
    }

    fn set_state(&mut self, state: &[f64]) -> Result<(), EnvError> {
        self.game
            .set_state(state)
            .map_err(|reason| EnvError::BadState {
                id: self.spec.id.clone(),
                reason,
            })
    }

    fn render(&self) -> Option<crate::render::Frame> {
        let mut obs = vec![0.0; self.spec.obs_dim];
        self.observe(&mut obs);
        Some(crate::render::grid::draw(&obs, SIZE, self.game.channels()))
    }

    fn observe(&self, obs: &mut [f32]) {
        let obs = &mut obs[..self.spec.obs_dim];
        obs.fill(0.0);
        let channels = self.game.channels();
        self.game.draw(&mut Grid { obs, channels });
    }
}

/// A grid coordinate from a state value: a whole number in `0..SIZE`.
fn cell(v: f64, what: &str) -> Result<usize, String> {
    whole(v, SIZE, what)
}

/// A whole number in `0..n` from a state value.
fn whole(v: f64, n: usize, what: &str) -> Result<usize, String> {
    if v.fract() == 0.0 && v >= 0.0 && v < n as f64 {
        Ok(v as usize)
    } else {
        Err(format!("{what} = {v}: must be a whole number in 0..{n}"))
    }
}

/// A flag from a state value: 0 or 1.
fn flag(v: f64, what: &str) -> Result<bool, String> {
    whole(v, 2, what).map(|b| b == 1)
}

#[cfg(test)]
mod tests;
