//! Freeway: a chicken crosses a road of eight lanes (rows 1 to 8) from the
//! bottom row to the top; one car per lane drives along it, wrapping round
//! at the edges, moving one cell every `speed` steps (1 to 5, drawn at
//! random with the direction). The chicken moves a row up or down at most
//! every three steps; reaching the top is a reward of 1, sends it back to
//! the bottom and draws the cars' speeds and directions again (they keep
//! their places). A car in the chicken's cell (column 4) sends it back to
//! the bottom. The game ends after 2,500 steps; it does not ramp.

use super::{Game, Grid, Move, SIZE, cell, flag, whole};
use rand::Rng;
use rand::rngs::StdRng;

const CHICKEN: usize = 0;
const CAR: usize = 1;
/// The trail channel of a car of speed s is `SPEED + s - 1`.
const SPEED: usize = 2;

const COLUMN: usize = 4;
const LANES: usize = 8;
const PLAYER_SPEED: usize = 3;
const TIME_LIMIT: i32 = 2500;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Car {
    x: usize,
    /// Steps until it next moves.
    timer: usize,
    /// Cells per move are 1; steps per move `|speed|`; the sign is the direction.
    speed: i32,
}

pub struct Freeway {
    chicken: usize,
    cars: [Car; LANES],
    move_timer: usize,
    /// Steps left; the game ends when it passes below zero.
    time_left: i32,
    over: bool,
}

impl Freeway {
    pub fn new() -> Self {
        Self {
            chicken: SIZE - 1,
            cars: [Car::default(); LANES],
            move_timer: PLAYER_SPEED,
            time_left: TIME_LIMIT,
            over: false,
        }
    }

    /// New speeds and directions for every car (the package draws the
    /// eight speeds, then the eight directions).
    fn draw_speeds(&mut self, rng: &mut StdRng) {
        let speeds: Vec<i32> = (0..LANES).map(|_| rng.random_range(1..=5)).collect();
        for (car, s) in self.cars.iter_mut().zip(speeds) {
            let sign = if rng.random::<f64>() < 0.5 { -1 } else { 1 };
            car.speed = s * sign;
            car.timer = s as usize;
        }
    }

    fn hit(&self, car: &Car, lane: usize) -> bool {
        car.x == COLUMN && lane + 1 == self.chicken
    }
}

impl Game for Freeway {
    fn channels(&self) -> usize {
        7
    }

    fn minimal_moves(&self) -> &'static [Move] {
        &[Move::Noop, Move::Up, Move::Down]
    }

    fn reset(&mut self, rng: &mut StdRng) {
        *self = Self::new();
        self.draw_speeds(rng);
    }

    fn act(&mut self, m: Move, rng: &mut StdRng) -> (f64, bool) {
        if self.over {
            return (0.0, true);
        }
        match m {
            Move::Up if self.move_timer == 0 => {
                self.move_timer = PLAYER_SPEED;
                self.chicken = self.chicken.saturating_sub(1);
            }
            Move::Down if self.move_timer == 0 => {
                self.move_timer = PLAYER_SPEED;
                self.chicken = (self.chicken + 1).min(SIZE - 1);
            }
            _ => {}
        }
        let mut reward = 0.0;
        if self.chicken == 0 {
            reward = 1.0;
            self.draw_speeds(rng);
            self.chicken = SIZE - 1;
        }
        // Lane by lane, as the package does: a hit sends the chicken back
        // before the next lane's car is looked at.
        for lane in 0..LANES {
            if self.hit(&self.cars[lane], lane) {
                self.chicken = SIZE - 1;
            }
            let car = &mut self.cars[lane];
            if car.timer == 0 {
                car.timer = car.speed.unsigned_abs() as usize;
                car.x = match car.speed > 0 {
                    true => (car.x + 1) % SIZE,
                    false => (car.x + SIZE - 1) % SIZE,
                };
                if self.hit(&self.cars[lane], lane) {
                    self.chicken = SIZE - 1;
                }
            } else {
                car.timer -= 1;
            }
        }
        self.move_timer = self.move_timer.saturating_sub(1);
        self.time_left -= 1;
        if self.time_left < 0 {
            self.over = true;
        }
        (reward, self.over)
    }

    fn draw(&self, grid: &mut Grid<'_>) {
        grid.set(self.chicken, COLUMN, CHICKEN);
        for (lane, car) in self.cars.iter().enumerate() {
            let row = lane + 1;
            grid.set(row, car.x, CAR);
            let back = match car.speed > 0 {
                true => (car.x + SIZE - 1) % SIZE,
                false => (car.x + 1) % SIZE,
            };
            let speed = car.speed.unsigned_abs() as usize;
            grid.set(row, back, SPEED + speed.clamp(1, 5) - 1);
        }
    }

    /// `[pos, move_timer, terminate_timer, terminal]`, then per lane the
    /// package's car `[x, row, timer, speed]`.
    fn state(&self) -> Vec<f64> {
        let mut s = vec![
            self.chicken as f64,
            self.move_timer as f64,
            f64::from(self.time_left),
            f64::from(u8::from(self.over)),
        ];
        for (lane, car) in self.cars.iter().enumerate() {
            s.extend([
                car.x as f64,
                (lane + 1) as f64,
                car.timer as f64,
                f64::from(car.speed),
            ]);
        }
        s
    }

    fn set_state(&mut self, s: &[f64]) -> Result<(), String> {
        let n = 4 + 4 * LANES;
        if s.len() != n {
            return Err(format!("{} values, Freeway's state has {n}", s.len()));
        }
        self.chicken = cell(s[0], "pos")?;
        self.move_timer = whole(s[1], PLAYER_SPEED + 1, "move_timer")?;
        self.time_left =
            whole(s[2] + 1.0, TIME_LIMIT as usize + 2, "terminate_timer + 1")? as i32 - 1;
        self.over = flag(s[3], "terminal")?;
        for (lane, c) in s[4..].chunks_exact(4).enumerate() {
            if c[1] != (lane + 1) as f64 {
                return Err(format!("car {lane} is in row {}, not {}", c[1], lane + 1));
            }
            let speed = whole(c[3] + 5.0, 11, "car speed + 5")? as i32 - 5;
            if speed == 0 {
                return Err(format!("car {lane} has speed 0"));
            }
            self.cars[lane] = Car {
                x: cell(c[0], "car x")?,
                timer: whole(c[2], 6, "car timer")?,
                speed,
            };
        }
        Ok(())
    }
}
