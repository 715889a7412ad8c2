//! Breakout's rules on hand-made positions, the ids, the options and
//! sticky actions. (The whole games against the `minatar` package:
//! `tests/minatar_reference.rs`.)

use super::*;

fn breakout(sticky: f64) -> MinAtar {
    let options = Options {
        sticky_action_prob: sticky,
        ..Options::default()
    };
    MinAtar::new("MinAtar/Breakout-v1", options, 3).unwrap()
}

/// A Breakout state: ball `(x, y)`, direction, paddle, bricks listed.
fn position(
    ball: (usize, usize),
    dir: usize,
    paddle: usize,
    bricks: &[(usize, usize)],
) -> Vec<f64> {
    let mut s = vec![ball.0 as f64, ball.1 as f64, dir as f64, paddle as f64];
    s.extend([ball.0 as f64, ball.1 as f64, 0.0, 0.0]);
    let mut map = vec![0.0; 100];
    for &(x, y) in bricks {
        map[y * 10 + x] = 1.0;
    }
    s.extend(map);
    s
}

/// `(ball_x, ball_y, dir, paddle, reward, over)` after one step of action `a`.
fn step(env: &mut MinAtar, a: usize) -> (usize, usize, usize, usize, f64, bool) {
    let mut obs = vec![0.0; env.spec().obs_dim];
    let r = env.step(Action::Discrete(a), &mut obs).unwrap();
    let s = env.state();
    let ball = (s[0] as usize, s[1] as usize);
    // The observation shows the ball and the paddle where the state has them.
    assert_eq!(obs[(ball.1 * 10 + ball.0) * 4 + 1], 1.0);
    assert_eq!(obs[(9 * 10 + s[3] as usize) * 4], 1.0);
    (
        ball.0,
        ball.1,
        s[2] as usize,
        s[3] as usize,
        r.reward,
        r.terminated,
    )
}

const NOOP: usize = 0;
const LEFT: usize = 1;
const RIGHT: usize = 2;

#[test]
fn ids_spaces_and_the_start() {
    let v1 = minatar_spec("MinAtar/Breakout-v1").unwrap();
    assert_eq!((v1.obs_dim, v1.image), (400, Some([10, 10, 4])));
    assert_eq!(v1.action_space, ActionSpace::Discrete { n: 3 });
    let v0 = minatar_spec("MinAtar/Breakout-v0").unwrap();
    assert_eq!(v0.action_space, ActionSpace::Discrete { n: 6 });
    assert!(minatar_spec("MinAtar/Breakout-v2").is_none());
    assert!(minatar_spec("MinAtar/Pong-v1").is_none());
    // The ball starts on row 3 in a corner, falling inwards; both corners come up.
    let mut corners = [0; 2];
    for seed in 0..40 {
        let env = MinAtar::new("MinAtar/Breakout-v1", Options::default(), seed).unwrap();
        let s = env.state();
        match (s[0] as usize, s[1] as usize, s[2] as usize) {
            (0, 3, 2) => corners[0] += 1,
            (9, 3, 3) => corners[1] += 1,
            other => panic!("start {other:?}"),
        }
        assert_eq!(s[3], 4.0, "the paddle starts in column 4");
        let bricks: Vec<usize> = (0..100).filter(|&i| s[8 + i] == 1.0).collect();
        assert_eq!(bricks, (10..40).collect::<Vec<_>>(), "rows 1 to 3");
    }
    assert!(corners[0] > 5 && corners[1] > 5, "{corners:?}");
}

#[test]
fn walls_ceiling_and_bricks() {
    let mut env = breakout(0.0);
    // Up-right into the right wall at row 6: the ball stays in column 9 and turns left.
    env.set_state(&position((8, 6), 1, 4, &[])).unwrap();
    assert_eq!(step(&mut env, NOOP), (9, 5, 1, 4, 0.0, false));
    assert_eq!(step(&mut env, NOOP), (9, 4, 0, 4, 0.0, false));
    // Into the ceiling: row 0, now falling.
    env.set_state(&position((5, 0), 0, 4, &[])).unwrap();
    assert_eq!(step(&mut env, NOOP), (4, 0, 3, 4, 0.0, false));
    // Up-left into a brick: it breaks, reward 1, the ball keeps its row and falls.
    env.set_state(&position((5, 4), 0, 4, &[(4, 3), (3, 4)]))
        .unwrap();
    assert_eq!(step(&mut env, NOOP), (4, 4, 3, 4, 1.0, false));
    assert_eq!(env.state()[8 + 34], 0.0, "the brick at (4, 3) is gone");
    // A brick met in the step right after a break is passed over: the ball
    // moves into its cell and it stays; the step after, breaking works again.
    env.set_state(&position((5, 4), 0, 4, &[(4, 3), (3, 5), (1, 7)]))
        .unwrap();
    assert_eq!(step(&mut env, NOOP), (4, 4, 3, 4, 1.0, false));
    assert_eq!(step(&mut env, NOOP), (3, 5, 3, 4, 0.0, false));
    assert_eq!(env.state()[8 + 53], 1.0, "the brick at (3, 5) stays");
    assert_eq!(step(&mut env, NOOP), (2, 6, 3, 4, 0.0, false));
    assert_eq!(step(&mut env, NOOP), (1, 6, 0, 4, 1.0, false));
}

#[test]
fn the_paddle_returns_the_ball_or_the_game_ends() {
    let mut env = breakout(0.0);
    // Falling onto the paddle's column: straight back up from row 8.
    env.set_state(&position((4, 8), 2, 4, &[(0, 1)])).unwrap();
    assert_eq!(step(&mut env, NOOP), (5, 8, 1, 4, 0.0, false));
    // Landing where the paddle is (moved right first): back the way it came.
    env.set_state(&position((4, 8), 2, 4, &[(0, 1)])).unwrap();
    assert_eq!(step(&mut env, RIGHT), (5, 8, 0, 5, 0.0, false));
    // Missed: over, and a finished game gives nothing more.
    env.set_state(&position((4, 8), 2, 2, &[(0, 1)])).unwrap();
    assert_eq!(step(&mut env, LEFT), (5, 9, 2, 1, 0.0, true));
    // The last brick gone, the rows come back as the ball reaches the bottom.
    env.set_state(&position((1, 8), 2, 2, &[])).unwrap();
    assert_eq!(step(&mut env, NOOP), (2, 8, 0, 2, 0.0, false));
    assert_eq!((10..40).filter(|&i| env.state()[8 + i] == 1.0).count(), 30);
}

#[test]
fn sticky_actions_repeat_the_last_action_across_episodes() {
    // Always sticky: the first action (no-op, as in the package) repeats forever.
    let mut env = breakout(1.0);
    env.set_state(&position((0, 3), 2, 4, &[])).unwrap();
    for _ in 0..4 {
        assert_eq!(step(&mut env, RIGHT).3, 4);
    }
    // Never sticky: the paddle follows the actions; one in ten repeats at 0.1.
    let mut env = breakout(0.0);
    env.set_state(&position((0, 3), 2, 4, &[])).unwrap();
    assert_eq!(step(&mut env, RIGHT).3, 5);
    let mut env = breakout(0.1);
    let (mut repeats, n) = (0, 20_000);
    let mut obs = vec![0.0; 400];
    for i in 0..n {
        env.set_state(&position((0, 3), 2, 4, &[])).unwrap();
        let a = if i % 2 == 0 { LEFT } else { RIGHT };
        env.step(Action::Discrete(a), &mut obs).unwrap();
        let moved_left = env.state()[3] == 3.0;
        repeats += usize::from(moved_left != (a == LEFT));
    }
    let share = repeats as f64 / n as f64;
    assert!((share - 0.1).abs() < 0.012, "{share}");
}

#[test]
fn options_come_from_kwargs_and_are_checked_by_name() {
    let o = Options::from_kwargs("MinAtar/Breakout-v1", r#"{"sticky_action_prob":0}"#).unwrap();
    assert_eq!(o.sticky_action_prob, 0.0);
    assert!(o.difficulty_ramping);
    for (kwargs, named) in [
        (r#"{"sticky_action_prob":1.5}"#, "sticky_action_prob"),
        (r#"{"difficulty_ramping":1}"#, "difficulty_ramping"),
        (r#"{"step_cost_us":3}"#, "step_cost_us"),
    ] {
        let e = Options::from_kwargs("MinAtar/Breakout-v1", kwargs).unwrap_err();
        assert!(e.to_string().contains(named), "{e}");
    }
    let e = MinAtar::new("MinAtar/Breakout-v1", Options::default(), 0)
        .unwrap()
        .set_state(&[1.0; 8])
        .unwrap_err();
    assert!(e.to_string().contains("108"), "{e}");
}

/// A Space Invaders state: cannon, marching direction, move and shot
/// timers, reload, aliens, friendly and enemy bullets (`(x, y)` each).
struct Invaders<'a> {
    cannon: usize,
    direction: f64,
    move_timer: usize,
    shot_timer: usize,
    reload: usize,
    aliens: &'a [(usize, usize)],
    friendly: &'a [(usize, usize)],
    enemy: &'a [(usize, usize)],
}

impl Invaders<'_> {
    fn state(&self) -> Vec<f64> {
        let mut s = vec![
            self.cannon as f64,
            self.direction,
            12.0,
            self.move_timer as f64,
            self.shot_timer as f64,
            0.0,
            self.reload as f64,
            0.0,
        ];
        for cells in [self.aliens, self.friendly, self.enemy] {
            let mut map = vec![0.0; 100];
            for &(x, y) in cells {
                map[y * 10 + x] = 1.0;
            }
            s.extend(map);
        }
        s
    }
}

const QUIET: Invaders<'static> = Invaders {
    cannon: 5,
    direction: -1.0,
    move_timer: 9,
    shot_timer: 9,
    reload: 0,
    aliens: &[(0, 0)],
    friendly: &[],
    enemy: &[],
};

/// The cells of map `k` (0 aliens, 1 friendly bullets, 2 enemy bullets) as `(x, y)`.
fn cells(env: &MinAtar, k: usize) -> Vec<(usize, usize)> {
    let s = env.state();
    (0..100)
        .filter(|&i| s[8 + k * 100 + i] == 1.0)
        .map(|i| (i % 10, i / 10))
        .collect()
}

fn invaders() -> MinAtar {
    let options = Options {
        sticky_action_prob: 0.0,
        ..Options::default()
    };
    MinAtar::new("MinAtar/SpaceInvaders-v1", options, 1).unwrap()
}

const FIRE: usize = 3;

#[test]
fn space_invaders_starts_fires_and_reloads() {
    let mut env = invaders();
    let spec = minatar_spec("MinAtar/SpaceInvaders-v1").unwrap();
    assert_eq!(
        (spec.image, spec.action_space.dim()),
        (Some([10, 10, 6]), 4)
    );
    let mut obs = vec![0.0; 600];
    env.reset(&mut obs);
    let block: Vec<(usize, usize)> = (0..4).flat_map(|y| (2..8).map(move |x| (x, y))).collect();
    let mut aliens = cells(&env, 0);
    aliens.sort_by_key(|&(x, y)| (y, x));
    assert_eq!(aliens, block);
    // Marching left: the alien-left channel repeats the aliens; the cannon at (9, 5).
    assert_eq!(obs[(2 * 10 + 4) * 6 + 2], 1.0);
    assert_eq!(obs[(2 * 10 + 4) * 6 + 3], 0.0);
    assert_eq!(obs[(9 * 10 + 5) * 6], 1.0);
    // A shot rises one row in the step it is fired; the next fire waits
    // for the reload (and does not move the cannon either).
    env.step(Action::Discrete(FIRE), &mut obs).unwrap();
    assert_eq!(cells(&env, 1), [(5, 8)]);
    assert_eq!(env.state()[6], 4.0, "reloading");
    env.step(Action::Discrete(FIRE), &mut obs).unwrap();
    assert_eq!(cells(&env, 1), [(5, 7)]);
    assert_eq!(env.state()[0], 5.0);
}

#[test]
fn space_invaders_kills_marches_shoots_and_ends() {
    let mut env = invaders();
    let mut obs = vec![0.0; 600];
    // The bullet meets the last alien: reward 1, a new block, the ramp on.
    let s = Invaders {
        aliens: &[(5, 5)],
        friendly: &[(5, 6)],
        ..QUIET
    };
    env.set_state(&s.state()).unwrap();
    let r = env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    assert_eq!(r.reward, 1.0);
    assert_eq!((cells(&env, 0).len(), cells(&env, 1).len()), (24, 0));
    assert_eq!(
        (env.state()[2], env.state()[5]),
        (11.0, 1.0),
        "interval 11, ramp 1"
    );
    // At the left wall the block turns and steps down; the timer restarts
    // at min(aliens, interval), less the step's tick.
    let s = Invaders {
        move_timer: 0,
        aliens: &[(0, 3), (1, 3)],
        ..QUIET
    };
    env.set_state(&s.state()).unwrap();
    env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    assert_eq!(cells(&env, 0), [(0, 4), (1, 4)]);
    assert_eq!((env.state()[1], env.state()[3]), (1.0, 1.0));
    // Away from the wall it marches one column.
    let s = Invaders {
        move_timer: 0,
        aliens: &[(4, 2)],
        ..QUIET
    };
    env.set_state(&s.state()).unwrap();
    env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    assert_eq!(cells(&env, 0), [(3, 2)]);
    // The nearest column fires (a tie goes to the lower column), from its
    // lowest alien.
    let s = Invaders {
        shot_timer: 0,
        aliens: &[(3, 1), (3, 2), (7, 0)],
        ..QUIET
    };
    env.set_state(&s.state()).unwrap();
    env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    assert_eq!(cells(&env, 2), [(3, 2)]);
    assert_eq!(env.state()[4], 9.0);
    // A bullet reaching the cannon ends the game.
    let s = Invaders {
        enemy: &[(5, 8)],
        ..QUIET
    };
    env.set_state(&s.state()).unwrap();
    let r = env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    assert!(r.terminated);
    // Stepping aside saves it.
    env.set_state(&s.state()).unwrap();
    assert!(
        !env.step(Action::Discrete(LEFT), &mut obs)
            .unwrap()
            .terminated
    );
}

/// An Asterix state: player, spawn and move timers, ramp timer, entities
/// `(row slot, x, rightwards, gold)`.
fn asterix_state(
    player: (usize, usize),
    (spawn_timer, move_timer, ramp_timer): (usize, usize, i32),
    entities: &[(usize, usize, bool, bool)],
) -> Vec<f64> {
    let b = |v: bool| f64::from(u8::from(v));
    let mut s = vec![
        player.0 as f64,
        player.1 as f64,
        10.0,
        spawn_timer as f64,
        5.0,
        move_timer as f64,
        f64::from(ramp_timer),
        0.0,
        0.0,
    ];
    let mut slots = vec![0.0; 32];
    for &(slot, x, right, gold) in entities {
        slots[slot * 4..slot * 4 + 4].copy_from_slice(&[1.0, x as f64, b(right), b(gold)]);
    }
    s.extend(slots);
    s
}

fn asterix() -> MinAtar {
    let options = Options {
        sticky_action_prob: 0.0,
        ..Options::default()
    };
    MinAtar::new("MinAtar/Asterix-v1", options, 4).unwrap()
}

const UP: usize = 2;
const DOWN: usize = 4;

#[test]
fn asterix_moves_takes_treasure_and_meets_enemies() {
    let mut env = asterix();
    let spec = minatar_spec("MinAtar/Asterix-v1").unwrap();
    assert_eq!(
        (spec.image, spec.action_space.dim()),
        (Some([10, 10, 4]), 5)
    );
    let mut obs = vec![0.0; 400];
    // The player stays within rows 1 to 8.
    env.set_state(&asterix_state((3, 1), (5, 3, 50), &[]))
        .unwrap();
    env.step(Action::Discrete(UP), &mut obs).unwrap();
    assert_eq!((env.state()[0], env.state()[1]), (3.0, 1.0));
    env.set_state(&asterix_state((3, 8), (5, 3, 50), &[]))
        .unwrap();
    env.step(Action::Discrete(DOWN), &mut obs).unwrap();
    assert_eq!(env.state()[1], 8.0);
    assert_eq!(obs[(8 * 10 + 3) * 4], 1.0);
    // Walking into a treasure (row 4 is slot 3): reward 1, it is gone.
    env.set_state(&asterix_state((3, 4), (5, 3, 50), &[(3, 2, true, true)]))
        .unwrap();
    let r = env.step(Action::Discrete(1), &mut obs).unwrap();
    assert_eq!((r.reward, r.terminated), (1.0, false));
    assert_eq!(env.state()[9 + 12], 0.0);
    // An enemy moving into the player ends the game.
    env.set_state(&asterix_state((3, 4), (5, 0, 50), &[(3, 4, false, false)]))
        .unwrap();
    let r = env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    assert!(r.terminated);
    // Entities move on the move timer and leave at the far edge; an enemy
    // moving right shows its trail on its left.
    env.set_state(&asterix_state(
        (0, 8),
        (5, 0, 50),
        &[(0, 5, true, false), (1, 0, false, true)],
    ))
    .unwrap();
    env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    let s = env.state();
    assert_eq!(&s[9..17], &[1.0, 6.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(
        s[5], 4.0,
        "the move timer restarts at 5, less the step's tick"
    );
    assert_eq!(obs[(10 + 6) * 4 + 1], 1.0);
    assert_eq!(obs[(10 + 5) * 4 + 2], 1.0);
}

#[test]
fn asterix_spawns_at_an_edge_into_a_free_row_and_ramps() {
    let mut env = asterix();
    let mut obs = vec![0.0; 400];
    let (mut gold, mut left, n) = (0, 0, 3000);
    for _ in 0..n {
        // Every row but slot 6 (row 7) is taken.
        let taken: Vec<(usize, usize, bool, bool)> = (0..8)
            .filter(|&s| s != 6)
            .map(|s| (s, 9, false, false))
            .collect();
        env.set_state(&asterix_state((0, 1), (0, 3, 50), &taken))
            .unwrap();
        env.step(Action::Discrete(NOOP), &mut obs).unwrap();
        let e = &env.state()[9 + 24..9 + 28];
        assert_eq!(e[0], 1.0, "spawned into the free row");
        match (e[1], e[2]) {
            (0.0, 1.0) => {}
            (9.0, 0.0) => left += 1,
            other => panic!("spawned at {other:?}"),
        }
        gold += usize::from(e[3] == 1.0);
        assert_eq!(env.state()[3], 9.0, "the spawn timer restarts");
    }
    let (gold, left) = (gold as f64 / n as f64, left as f64 / n as f64);
    assert!(
        (gold - 1.0 / 3.0).abs() < 0.03 && (left - 0.5).abs() < 0.03,
        "{gold} {left}"
    );
    // The ramp: on the step after the ramp timer passes zero, spawns speed up.
    env.set_state(&asterix_state((0, 1), (5, 3, -1), &[]))
        .unwrap();
    env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    let s = env.state();
    assert_eq!((s[2], s[4], s[6], s[7]), (9.0, 5.0, 100.0, 1.0));
}

/// A Freeway state: chicken row, move timer, steps left, cars `(x, timer,
/// speed)` in lanes 1 to 8.
fn freeway_state(
    chicken: usize,
    move_timer: usize,
    time_left: i32,
    cars: [(usize, usize, i32); 8],
) -> Vec<f64> {
    let mut s = vec![chicken as f64, move_timer as f64, f64::from(time_left), 0.0];
    for (lane, (x, timer, speed)) in cars.into_iter().enumerate() {
        s.extend([x as f64, (lane + 1) as f64, timer as f64, f64::from(speed)]);
    }
    s
}

fn freeway() -> MinAtar {
    let options = Options {
        sticky_action_prob: 0.0,
        ..Options::default()
    };
    MinAtar::new("MinAtar/Freeway-v1", options, 6).unwrap()
}

/// Cars far from column 4 that move only every fifth step.
const PARKED: [(usize, usize, i32); 8] = [(0, 5, 5); 8];

#[test]
fn freeway_starts_crosses_and_is_hit() {
    let spec = minatar_spec("MinAtar/Freeway-v1").unwrap();
    assert_eq!(
        (spec.image, spec.action_space.dim()),
        (Some([10, 10, 7]), 3)
    );
    let mut env = freeway();
    let mut obs = vec![0.0; 700];
    env.reset(&mut obs);
    let s = env.state();
    assert_eq!(&s[..4], &[9.0, 3.0, 2500.0, 0.0]);
    for lane in 0..8 {
        let c = &s[4 + 4 * lane..8 + 4 * lane];
        assert_eq!((c[0], c[1], c[2]), (0.0, (lane + 1) as f64, c[3].abs()));
        assert!((1.0..=5.0).contains(&c[3].abs()));
        // The car, and its trail on the speed's channel behind it (wrapping).
        assert_eq!(obs[((lane + 1) * 10) * 7 + 1], 1.0);
        let back = if c[3] > 0.0 { 9 } else { 1 };
        assert_eq!(
            obs[((lane + 1) * 10 + back) * 7 + 1 + c[3].abs() as usize],
            1.0
        );
    }
    assert_eq!(
        obs[(9 * 10 + 4) * 7],
        1.0,
        "the chicken at the bottom of column 4"
    );
    // One row up per three steps at most.
    env.set_state(&freeway_state(9, 0, 100, PARKED)).unwrap();
    env.step(Action::Discrete(UP_FREEWAY), &mut obs).unwrap();
    env.step(Action::Discrete(UP_FREEWAY), &mut obs).unwrap();
    assert_eq!((env.state()[0], env.state()[1]), (8.0, 1.0));
    // Reaching the top: reward 1, back to the bottom, speeds drawn again.
    env.set_state(&freeway_state(1, 0, 100, PARKED)).unwrap();
    let r = env.step(Action::Discrete(UP_FREEWAY), &mut obs).unwrap();
    assert_eq!((r.reward, env.state()[0]), (1.0, 9.0));
    let redrawn = (0..8).any(|lane| env.state()[7 + 4 * lane].abs() != 5.0);
    assert!(redrawn, "eight speeds of 5 drawn again: {:?}", env.state());
    // A car driving into the chicken's cell sends it back down.
    let mut cars = PARKED;
    cars[4] = (3, 0, 2); // lane 5 (row 5), moving right this step
    env.set_state(&freeway_state(5, 2, 100, cars)).unwrap();
    env.step(Action::Discrete(NOOP), &mut obs).unwrap();
    assert_eq!(env.state()[0], 9.0);
    // The game ends after 2,501 steps.
    env.set_state(&freeway_state(9, 0, 0, PARKED)).unwrap();
    assert!(
        env.step(Action::Discrete(NOOP), &mut obs)
            .unwrap()
            .terminated
    );
}

const UP_FREEWAY: usize = 1;
