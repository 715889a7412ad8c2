//! The classic-control scenes, drawn from the unwrapped state as
//! Gymnasium's `rgb_array` renderer lays them out: the same canvas sizes,
//! world-to-pixel scales, shapes and colours, so a video looks like the one
//! a Gymnasium user knows. (The pendulum's torque arrow, an image file in
//! Gymnasium, is left out.)

use super::{Canvas, Frame};
use std::f32::consts::FRAC_PI_2;

const WHITE: [u8; 3] = [255, 255, 255];
const BLACK: [u8; 3] = [0, 0, 0];

/// CartPole, 600 x 400, from `[x, x_dot, theta, theta_dot]`: the track at
/// 100 px, the cart 50 x 30 px, the pole 125 px (the world's 4.8 units
/// across the width), leaning right for a positive angle.
pub fn cartpole(state: &[f64]) -> Frame {
    const SCALE: f32 = 600.0 / 4.8;
    const CART_Y: f32 = 100.0;
    let (x, theta) = (state[0] as f32, state[2] as f32);
    let mut c = Canvas::new(600, 400, WHITE);
    let cart_x = x * SCALE + 300.0;
    c.polygon(
        &[
            (cart_x - 25.0, CART_Y - 15.0),
            (cart_x - 25.0, CART_Y + 15.0),
            (cart_x + 25.0, CART_Y + 15.0),
            (cart_x + 25.0, CART_Y - 15.0),
        ],
        BLACK,
    );
    let axle = (cart_x, CART_Y + 7.5);
    c.bar(axle, FRAC_PI_2 - theta, 125.0, 10.0, [202, 152, 101]);
    c.circle(axle, 5.0, [129, 132, 203]);
    c.line(&[(0.0, CART_Y), (600.0, CART_Y)], 1.0, BLACK);
    c.frame()
}

/// Acrobot, 500 x 500, from `[theta1, theta2, dtheta1, dtheta2]`: two links
/// of 1 hanging from the centre (the world's 4.4 units across), the target
/// height 1 above the pivot as a line.
pub fn acrobot(state: &[f64]) -> Frame {
    const SCALE: f32 = 500.0 / 4.4;
    let (t1, t2) = (state[0] as f32, state[1] as f32);
    let mut c = Canvas::new(500, 500, WHITE);
    let o = 250.0;
    c.line(
        &[(o - 2.2 * SCALE, o + SCALE), (o + 2.2 * SCALE, o + SCALE)],
        1.0,
        BLACK,
    );
    // Angle 0 hangs straight down; each link's angle is from there.
    let p0 = (o, o);
    let a1 = t1 - FRAC_PI_2;
    let p1 = (p0.0 + SCALE * a1.cos(), p0.1 + SCALE * a1.sin());
    let a2 = t1 + t2 - FRAC_PI_2;
    for (p, a) in [(p0, a1), (p1, a2)] {
        c.bar(p, a, SCALE, 0.1 * SCALE, [0, 204, 204]);
        c.circle(p, 0.1 * SCALE, [204, 204, 0]);
    }
    c.frame()
}

/// MountainCar (`goal` 0.5) and MountainCarContinuous (0.45), 600 x 400,
/// from `[position, velocity]`: the hill `0.45 sin(3x) + 0.55` over
/// [-1.2, 0.6], the car tilted with the slope, the flag at the goal.
pub fn mountain_car(state: &[f64], goal: f32) -> Frame {
    const MIN: f32 = -1.2;
    const SCALE: f32 = 600.0 / 1.8;
    let height = |x: f32| (3.0 * x).sin() * 0.45 + 0.55;
    let px = |x: f32| (x - MIN) * SCALE;
    let pos = state[0] as f32;
    let mut c = Canvas::new(600, 400, WHITE);
    let hill: Vec<(f32, f32)> = (0..100)
        .map(|i| MIN + 1.8 * i as f32 / 99.0)
        .map(|x| (px(x), height(x) * SCALE))
        .collect();
    c.line(&hill, 1.0, BLACK);
    let (s, co) = (3.0 * pos).cos().sin_cos();
    let at = |(x, y): (f32, f32)| {
        (
            x * co - y * s + px(pos),
            x * s + y * co + 10.0 + height(pos) * SCALE,
        )
    };
    let body = [(-20.0, 0.0), (-20.0, 20.0), (20.0, 20.0), (20.0, 0.0)].map(at);
    c.polygon(&body, BLACK);
    for wheel in [(10.0, 0.0), (-10.0, 0.0)] {
        c.circle(at(wheel), 8.0, [128, 128, 128]);
    }
    let (fx, fy) = (px(goal), height(goal) * SCALE);
    c.line(&[(fx, fy), (fx, fy + 50.0)], 1.0, BLACK);
    c.polygon(
        &[(fx, fy + 50.0), (fx, fy + 40.0), (fx + 25.0, fy + 45.0)],
        [204, 204, 0],
    );
    c.frame()
}

/// Pendulum, 500 x 500, from `[theta, theta_dot]`: a rod of 1 from the
/// centre (the world's 4.4 units across), upright at angle 0.
pub fn pendulum(state: &[f64]) -> Frame {
    const SCALE: f32 = 500.0 / 4.4;
    let th = state[0] as f32;
    let mut c = Canvas::new(500, 500, WHITE);
    let (o, red) = ((250.0, 250.0), [204, 77, 77]);
    let a = th + FRAC_PI_2;
    c.bar(o, a, SCALE, 0.2 * SCALE, red);
    c.circle(o, 0.1 * SCALE, red);
    c.circle(
        (o.0 + SCALE * a.cos(), o.1 + SCALE * a.sin()),
        0.1 * SCALE,
        red,
    );
    c.circle(o, 0.05 * SCALE, BLACK);
    c.frame()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The colour of the pixel holding scene point (x, y), y up.
    fn at(f: &Frame, x: f32, y: f32) -> [u8; 3] {
        f.pixel(x.floor() as u32, (f.height as f32 - y).floor() as u32)
    }

    #[test]
    fn cartpole_draws_the_cart_where_x_puts_it_and_the_pole_leaning_with_theta() {
        let f = cartpole(&[1.0, 0.0, 0.3, 0.0]);
        assert_eq!((f.width, f.height, f.rgb.len()), (600, 400, 600 * 400 * 3));
        // x = 1 is 125 px right of the centre; the cart's body is black.
        assert_eq!(at(&f, 425.0, 95.0), BLACK);
        assert_eq!(at(&f, 300.0, 95.0), WHITE);
        // 100 px up the pole, leaning right by 0.3 rad.
        let (px, py) = (425.0 + 100.0 * 0.3f32.sin(), 107.5 + 100.0 * 0.3f32.cos());
        assert_eq!(at(&f, px, py), [202, 152, 101]);
        assert_eq!(at(&f, 425.0 - 100.0 * 0.3f32.sin(), py), WHITE);
    }

    #[test]
    fn acrobot_hangs_down_at_rest_and_points_up_at_pi() {
        let down = acrobot(&[0.0, 0.0, 0.0, 0.0]);
        let scale = 500.0 / 4.4;
        assert_eq!(at(&down, 250.0, 250.0 - 0.5 * scale), [0, 204, 204]);
        assert_eq!(at(&down, 250.0, 250.0 - 1.5 * scale), [0, 204, 204]);
        assert_eq!(at(&down, 250.0, 250.0 + 0.5 * scale), WHITE);
        let up = acrobot(&[std::f64::consts::PI, 0.0, 0.0, 0.0]);
        assert_eq!(at(&up, 250.0, 250.0 + 1.5 * scale), [0, 204, 204]);
        // The target line, one link above the pivot: a line a pixel wide,
        // anti-aliased over the row it mostly covers.
        assert!(at(&down, 20.0, 250.0 + scale).iter().all(|&c| c < 64));
        assert_eq!(at(&down, 20.0, 250.0 + scale + 3.0), WHITE);
    }

    #[test]
    fn mountain_car_sits_on_its_hill_and_the_flag_marks_the_goal() {
        let f = mountain_car(&[-0.5, 0.0], 0.5);
        let scale = 600.0 / 1.8;
        let x = (-0.5 + 1.2) * scale;
        let y = ((-1.5f32).sin() * 0.45 + 0.55) * scale;
        // At -0.5 the slope is nearly flat: the body 10-30 px above the hill.
        assert_eq!(at(&f, x, y + 20.0), BLACK);
        assert_eq!(at(&f, x, y + 40.0), WHITE);
        let (fx, fy) = ((0.5 + 1.2) * scale, (1.5f32.sin() * 0.45 + 0.55) * scale);
        assert_eq!(at(&f, fx + 8.0, fy + 45.0), [204, 204, 0]);
    }

    #[test]
    fn pendulum_points_up_at_zero_and_down_at_pi() {
        let scale = 500.0 / 4.4;
        let up = pendulum(&[0.0, 0.0]);
        assert_eq!(at(&up, 250.0, 250.0 + 0.6 * scale), [204, 77, 77]);
        assert_eq!(at(&up, 250.0, 250.0 - 0.6 * scale), WHITE);
        let down = pendulum(&[std::f64::consts::PI, 0.0]);
        assert_eq!(at(&down, 250.0, 250.0 - 0.6 * scale), [204, 77, 77]);
    }
}
