//! Breakout: a paddle on the bottom row, a ball moving diagonally one cell a
//! step, three rows of bricks (rows 1 to 3). A brick the ball reaches is
//! removed for a reward of 1 and the ball bounces back vertically; the ball
//! bounces off the walls and the ceiling; on the bottom row it bounces off
//! the paddle (straight back up when it comes down onto it, back the way it
//! came when the paddle is where it lands), else the game ends. When no brick
//! is left as the ball reaches the bottom row, the three rows come back.
//! After breaking a brick the ball cannot break another in the next step (it
//! passes over it instead). The episode starts with the ball on row 3 in a
//! corner column, falling towards the middle, the corner drawn at random.

use super::{Game, Grid, Move, SIZE, cell, flag, whole};
use rand::Rng;
use rand::rngs::StdRng;

const PADDLE: usize = 0;
const BALL: usize = 1;
const TRAIL: usize = 2;
const BRICK: usize = 3;

/// The package's direction numbers: up-left, up-right, down-right, down-left.
const DIRECTIONS: [(i32, i32); 4] = [(-1, -1), (1, -1), (1, 1), (-1, 1)];

#[derive(Default)]
pub struct Breakout {
    paddle: usize,
    ball: (usize, usize),
    /// `(dx, dy)`, each -1 or 1 (y grows downwards).
    velocity: (i32, i32),
    /// Where the ball was before the last step.
    trail: (usize, usize),
    bricks: [[bool; SIZE]; SIZE],
    /// A brick was broken in the last step.
    struck: bool,
    over: bool,
}

impl Breakout {
    fn fill_bricks(&mut self) {
        for row in &mut self.bricks[1..4] {
            row.fill(true);
        }
    }

    fn no_bricks(&self) -> bool {
        self.bricks.iter().flatten().all(|&b| !b)
    }

    fn direction(&self) -> usize {
        DIRECTIONS
            .iter()
            .position(|&d| d == self.velocity)
            .unwrap_or(0)
    }
}

impl Game for Breakout {
    fn channels(&self) -> usize {
        4
    }

    fn minimal_moves(&self) -> &'static [Move] {
        &[Move::Noop, Move::Left, Move::Right]
    }

    fn reset(&mut self, rng: &mut StdRng) {
        let (x, dx) = if rng.random::<bool>() {
            (SIZE - 1, -1)
        } else {
            (0, 1)
        };
        self.ball = (x, 3);
        self.velocity = (dx, 1);
        self.trail = self.ball;
        self.paddle = 4;
        self.bricks = [[false; SIZE]; SIZE];
        self.fill_bricks();
        self.struck = false;
        self.over = false;
    }

    fn act(&mut self, m: Move, _rng: &mut StdRng) -> (f64, bool) {
        if self.over {
            return (0.0, true);
        }
        match m {
            Move::Left => self.paddle = self.paddle.saturating_sub(1),
            Move::Right => self.paddle = (self.paddle + 1).min(SIZE - 1),
            _ => {}
        }
        let mut reward = 0.0;
        let (x, y) = self.ball;
        self.trail = self.ball;
        let mut nx = x as i32 + self.velocity.0;
        let mut ny = y as i32 + self.velocity.1;
        if !(0..SIZE as i32).contains(&nx) {
            nx = nx.clamp(0, SIZE as i32 - 1);
            self.velocity.0 = -self.velocity.0;
        }
        let mut struck = false;
        if ny < 0 {
            ny = 0;
            self.velocity.1 = -self.velocity.1;
        } else if self.bricks[ny as usize][nx as usize] {
            struck = true;
            if !self.struck {
                reward = 1.0;
                self.struck = true;
                self.bricks[ny as usize][nx as usize] = false;
                ny = y as i32;
                self.velocity.1 = -self.velocity.1;
            }
        } else if ny == SIZE as i32 - 1 {
            if self.no_bricks() {
                self.fill_bricks();
            }
            if x == self.paddle {
                // Down onto the paddle: straight back up.
                self.velocity.1 = -self.velocity.1;
                ny = y as i32;
            } else if nx as usize == self.paddle {
                // Landing where the paddle is: back the way it came.
                self.velocity = (-self.velocity.0, -self.velocity.1);
                ny = y as i32;
            } else {
                self.over = true;
            }
        }
        if !struck {
            self.struck = false;
        }
        self.ball = (nx as usize, ny as usize);
        (reward, self.over)
    }

    fn draw(&self, grid: &mut Grid<'_>) {
        grid.set(self.ball.1, self.ball.0, BALL);
        grid.set(SIZE - 1, self.paddle, PADDLE);
        grid.set(self.trail.1, self.trail.0, TRAIL);
        for (y, row) in self.bricks.iter().enumerate() {
            for (x, _) in row.iter().enumerate().filter(|(_, b)| **b) {
                grid.set(y, x, BRICK);
            }
        }
    }

    /// `[ball_x, ball_y, ball_dir, pos, last_x, last_y, strike, terminal,
    /// brick_map (100, row-major)]`, the package's attribute names.
    fn state(&self) -> Vec<f64> {
        let b = |v: bool| f64::from(u8::from(v));
        let mut s = vec![
            self.ball.0 as f64,
            self.ball.1 as f64,
            self.direction() as f64,
            self.paddle as f64,
            self.trail.0 as f64,
            self.trail.1 as f64,
            b(self.struck),
            b(self.over),
        ];
        s.extend(self.bricks.iter().flatten().map(|&v| b(v)));
        s
    }

    fn set_state(&mut self, s: &[f64]) -> Result<(), String> {
        if s.len() != 8 + SIZE * SIZE {
            return Err(format!(
                "{} values, Breakout's state has {}",
                s.len(),
                8 + SIZE * SIZE
            ));
        }
        self.ball = (cell(s[0], "ball_x")?, cell(s[1], "ball_y")?);
        self.velocity = DIRECTIONS[whole(s[2], 4, "ball_dir")?];
        self.paddle = cell(s[3], "pos")?;
        self.trail = (cell(s[4], "last_x")?, cell(s[5], "last_y")?);
        self.struck = flag(s[6], "strike")?;
        self.over = flag(s[7], "terminal")?;
        for (i, &v) in s[8..].iter().enumerate() {
            self.bricks[i / SIZE][i % SIZE] = flag(v, "brick_map")?;
        }
        Ok(())
    }
}
