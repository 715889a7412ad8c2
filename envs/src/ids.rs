//! Every id the crate makes, family by family. A leaf: [`EnvError`] lists
//! them when an id is unknown, and every env depends on `EnvError`, so the
//! lists cannot live beside the envs or the registry that makes them.
//!
//! [`EnvError`]: crate::EnvError

/// The classic-control ids [`make_env`](crate::make_env) knows (Gymnasium's
/// twins), in a stable order; it also makes MinAtar's games and
/// [`STALL_ID`].
pub const ENV_IDS: &[&str] = &[
    "CartPole-v1",
    "CartPoleNoVel-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Pendulum-v1",
    "MountainCarContinuous-v0",
];

/// Every game id [`new_game`](crate::games::new_game) knows.
pub const GAME_IDS: &[&str] = &["BigTwo-v0", "BigTwo-v1", "BigTwo-v2", "Nim-v0"];

/// Every MinAtar id, in a stable order.
pub const MINATAR_IDS: &[&str] = &[
    "MinAtar/Asterix-v1",
    "MinAtar/Asterix-v0",
    "MinAtar/Breakout-v1",
    "MinAtar/Breakout-v0",
    "MinAtar/Freeway-v1",
    "MinAtar/Freeway-v0",
    "MinAtar/Seaquest-v1",
    "MinAtar/Seaquest-v0",
    "MinAtar/SpaceInvaders-v1",
    "MinAtar/SpaceInvaders-v0",
];

/// The env that stalls ([`crate::stall`]).
pub const STALL_ID: &str = "Stall-v0";

/// Every native id, comma-separated: what an unknown id's error lists.
pub(crate) fn known_ids() -> String {
    [ENV_IDS, GAME_IDS, MINATAR_IDS, &[STALL_ID]]
        .concat()
        .join(", ")
}
