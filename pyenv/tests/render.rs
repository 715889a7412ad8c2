//! Pictures of Python envs for videos, through the path the evaluator
//! takes (`make_vector_env` for evaluation, `VectorEnv::render`): a `gym:`
//! evaluation env is made in `rgb_array` mode and draws Gymnasium's own
//! picture (Atari: ALE's full colour screen, not the 84 x 84 gray input);
//! a training env draws nothing; an env whose constructor takes no render
//! mode is still made, and draws nothing.
//!
//! They need gymnasium, pygame and ale-py in the venv; skipped without,
//! saying so, and failed instead under `SEBULBA_REQUIRE_PYTHON=1` (CI).

mod common;
use common::{imports, python};

use sebulba_envs::{Purpose, VectorEnv, make_vector_env};

fn made(id: &str, purpose: Purpose) -> Box<dyn VectorEnv> {
    let mut v = make_vector_env(id, "", 2, 1, purpose).expect(id);
    let mut obs = vec![0.0; 2 * v.spec().obs_dim];
    v.reset(&mut obs).expect("reset");
    v
}

#[test]
fn evaluation_envs_draw_themselves_through_rgb_array() {
    if !python() || !imports("pygame") || !imports("ale_py") {
        return;
    }
    let cartpole = made("gym:CartPole-v1", Purpose::Evaluate);
    let f = cartpole.render(1).expect("CartPole's picture");
    assert_eq!((f.width, f.height, f.rgb.len()), (600, 400, 600 * 400 * 3));
    assert_eq!(f.pixel(0, 0), [255, 255, 255]);
    // The cart, black, on the track 100 px above the bottom, near the middle.
    assert!((250..350).any(|x| f.pixel(x, 295) == [0, 0, 0]));
    assert!(cartpole.render(2).is_none(), "no env 2");

    let atari = made("gym:ALE/Breakout-v5", Purpose::Evaluate);
    let f = atari.render(0).expect("ALE's screen");
    assert_eq!((f.width, f.height), (160, 210));
    let coloured = f.rgb.chunks_exact(3).any(|p| p[0] != p[1] || p[1] != p[2]);
    assert!(coloured, "the screen in colour, not the gray input");

    let training = made("gym:CartPole-v1", Purpose::Train);
    assert!(
        training.render(0).is_none(),
        "training envs are not made to draw"
    );
}

#[test]
fn an_env_that_takes_no_render_mode_is_made_and_draws_nothing() {
    if !python() {
        return;
    }
    let v = made(
        "gym:sebulba_fixture_envs:SebulbaUnfilmable-v0",
        Purpose::Evaluate,
    );
    assert_eq!(v.spec().obs_dim, 6);
    assert!(v.render(0).is_none());
}
