//! Space Invaders: a cannon on the bottom row under a block of aliens (rows
//! 0 to 3, columns 2 to 7) that marches sideways and steps down a row at
//! each wall. The cannon moves or fires (one shot, then five steps to
//! reload); its bullets rise a row a step and an alien they meet is gone for
//! a reward of 1. Every ten steps the alien nearest the cannon's column
//! (ties: the lower column; the lowest alien of that column) drops a bullet,
//! which falls a row a step. The game ends when a bullet or an alien reaches
//! the cannon, or the aliens step down from the bottom row. The block moves
//! every `min(aliens left, interval)` steps, so it speeds up as it thins;
//! when the last alien falls a new block comes, and with the difficulty ramp
//! the interval drops by one (12 at the start, 6 at the least). Nothing is
//! random. Grids shift by rotation, as the package's `np.roll` does (what
//! leaves one edge comes in at the other, then that row is cleared where the
//! package clears it).

use super::{Game, Grid, Move, SIZE, cell, flag, whole};
use rand::rngs::StdRng;

const CANNON: usize = 0;
const ALIEN: usize = 1;
const ALIEN_LEFT: usize = 2;
const ALIEN_RIGHT: usize = 3;
const FRIENDLY_BULLET: usize = 4;
const ENEMY_BULLET: usize = 5;

const RELOAD: usize = 5;
const MOVE_INTERVAL: usize = 12;
const SLOWEST_AT_FASTEST: usize = 6;
const SHOT_INTERVAL: usize = 10;

type Map = [[bool; SIZE]; SIZE];

fn count(m: &Map) -> usize {
    m.iter().flatten().filter(|&&b| b).count()
}

/// Every row moved `by` rows down (negative: up), rotating.
fn roll_rows(m: &mut Map, by: i32) {
    let old = *m;
    for (y, row) in old.iter().enumerate() {
        m[(y as i32 + by).rem_euclid(SIZE as i32) as usize] = *row;
    }
}

/// Every column moved `by` columns right (negative: left), rotating.
fn roll_columns(m: &mut Map, by: i32) {
    for row in m.iter_mut() {
        let old = *row;
        for (x, &v) in old.iter().enumerate() {
            row[(x as i32 + by).rem_euclid(SIZE as i32) as usize] = v;
        }
    }
}

fn block() -> Map {
    let mut m = [[false; SIZE]; SIZE];
    for row in &mut m[0..4] {
        row[2..8].fill(true);
    }
    m
}

pub struct SpaceInvaders {
    ramping: bool,
    cannon: usize,
    aliens: Map,
    friendly: Map,
    enemy: Map,
    /// -1: marching left; 1: right.
    direction: i32,
    move_interval: usize,
    move_timer: usize,
    shot_timer: usize,
    reload: usize,
    ramp: usize,
    over: bool,
}

impl SpaceInvaders {
    pub fn new(ramping: bool) -> Self {
        Self {
            ramping,
            cannon: 5,
            aliens: block(),
            friendly: [[false; SIZE]; SIZE],
            enemy: [[false; SIZE]; SIZE],
            direction: -1,
            move_interval: MOVE_INTERVAL,
            move_timer: MOVE_INTERVAL,
            shot_timer: SHOT_INTERVAL,
            reload: 0,
            ramp: 0,
            over: false,
        }
    }

    fn column_has_alien(&self, x: usize) -> bool {
        self.aliens.iter().any(|row| row[x])
    }

    /// The block steps down at a wall it marches into, else one column on.
    fn march(&mut self) {
        self.move_timer = count(&self.aliens).min(self.move_interval);
        let at_wall = (self.direction < 0 && self.column_has_alien(0))
            || (self.direction > 0 && self.column_has_alien(SIZE - 1));
        if at_wall {
            self.direction = -self.direction;
            if self.aliens[SIZE - 1].iter().any(|&b| b) {
                self.over = true;
            }
            roll_rows(&mut self.aliens, 1);
        } else {
            roll_columns(&mut self.aliens, self.direction);
        }
        if self.aliens[SIZE - 1][self.cannon] {
            self.over = true;
        }
    }

    /// The lowest alien of the column nearest the cannon drops a bullet.
    fn alien_fires(&mut self) {
        self.shot_timer = SHOT_INTERVAL;
        let mut columns: Vec<usize> = (0..SIZE).collect();
        columns.sort_by_key(|&x| x.abs_diff(self.cannon));
        let shooter = columns
            .into_iter()
            .find_map(|x| (0..SIZE).rev().find(|&y| self.aliens[y][x]).map(|y| (y, x)));
        if let Some((y, x)) = shooter {
            self.enemy[y][x] = true;
        }
    }
}

impl Game for SpaceInvaders {
    fn channels(&self) -> usize {
        6
    }

    fn minimal_moves(&self) -> &'static [Move] {
        &[Move::Noop, Move::Left, Move::Right, Move::Fire]
    }

    fn reset(&mut self, _rng: &mut StdRng) {
        *self = Self::new(self.ramping);
    }

    fn act(&mut self, m: Move, _rng: &mut StdRng) -> (f64, bool) {
        if self.over {
            return (0.0, true);
        }
        match m {
            Move::Fire if self.reload == 0 => {
                self.friendly[SIZE - 1][self.cannon] = true;
                self.reload = RELOAD;
            }
            Move::Left => self.cannon = self.cannon.saturating_sub(1),
            Move::Right => self.cannon = (self.cannon + 1).min(SIZE - 1),
            _ => {}
        }
        roll_rows(&mut self.friendly, -1);
        self.friendly[SIZE - 1] = [false; SIZE];
        roll_rows(&mut self.enemy, 1);
        self.enemy[0] = [false; SIZE];
        if self.enemy[SIZE - 1][self.cannon] || self.aliens[SIZE - 1][self.cannon] {
            self.over = true;
        }
        if self.move_timer == 0 {
            self.march();
        }
        if self.shot_timer == 0 {
            self.alien_fires();
        }
        let mut reward = 0.0;
        for (arow, frow) in self.aliens.iter_mut().zip(self.friendly.iter_mut()) {
            for (a, f) in arow.iter_mut().zip(frow.iter_mut()) {
                if *a && *f {
                    (*a, *f) = (false, false);
                    reward += 1.0;
                }
            }
        }
        self.reload = self.reload.saturating_sub(1);
        // The timers reach zero on the step before they act (the package's
        // order); set again when they act, they never go below zero.
        self.move_timer = self.move_timer.saturating_sub(1);
        self.shot_timer = self.shot_timer.saturating_sub(1);
        if count(&self.aliens) == 0 {
            if self.move_interval > SLOWEST_AT_FASTEST && self.ramping {
                self.move_interval -= 1;
                self.ramp += 1;
            }
            self.aliens = block();
        }
        (reward, self.over)
    }

    fn draw(&self, grid: &mut Grid<'_>) {
        grid.set(SIZE - 1, self.cannon, CANNON);
        let marching = if self.direction < 0 {
            ALIEN_LEFT
        } else {
            ALIEN_RIGHT
        };
        for y in 0..SIZE {
            for x in 0..SIZE {
                if self.aliens[y][x] {
                    grid.set(y, x, ALIEN);
                    grid.set(y, x, marching);
                }
                if self.friendly[y][x] {
                    grid.set(y, x, FRIENDLY_BULLET);
                }
                if self.enemy[y][x] {
                    grid.set(y, x, ENEMY_BULLET);
                }
            }
        }
    }

    /// `[pos, alien_dir, enemy_move_interval, alien_move_timer,
    /// alien_shot_timer, ramp_index, shot_timer, terminal, alien_map,
    /// f_bullet_map, e_bullet_map (100 each, row-major)]`, the package's
    /// attribute names.
    fn state(&self) -> Vec<f64> {
        let b = |v: bool| f64::from(u8::from(v));
        let mut s = vec![
            self.cannon as f64,
            f64::from(self.direction),
            self.move_interval as f64,
            self.move_timer as f64,
            self.shot_timer as f64,
            self.ramp as f64,
            self.reload as f64,
            b(self.over),
        ];
        for m in [&self.aliens, &self.friendly, &self.enemy] {
            s.extend(m.iter().flatten().map(|&v| b(v)));
        }
        s
    }

    fn set_state(&mut self, s: &[f64]) -> Result<(), String> {
        let n = 8 + 3 * SIZE * SIZE;
        if s.len() != n {
            return Err(format!("{} values, Space Invaders' state has {n}", s.len()));
        }
        self.cannon = cell(s[0], "pos")?;
        self.direction = match s[1] {
            -1.0 => -1,
            1.0 => 1,
            v => return Err(format!("alien_dir = {v}: must be -1 or 1")),
        };
        self.move_interval = whole(s[2], MOVE_INTERVAL + 1, "enemy_move_interval")?;
        self.move_timer = whole(s[3], MOVE_INTERVAL + 1, "alien_move_timer")?;
        self.shot_timer = whole(s[4], SHOT_INTERVAL + 1, "alien_shot_timer")?;
        self.ramp = whole(s[5], MOVE_INTERVAL + 1, "ramp_index")?;
        self.reload = whole(s[6], RELOAD + 1, "shot_timer")?;
        self.over = flag(s[7], "terminal")?;
        let maps = [&mut self.aliens, &mut self.friendly, &mut self.enemy];
        let names = ["alien_map", "f_bullet_map", "e_bullet_map"];
        for (k, (m, name)) in maps.into_iter().zip(names).enumerate() {
            for (i, &v) in s[8 + k * SIZE * SIZE..8 + (k + 1) * SIZE * SIZE]
                .iter()
                .enumerate()
            {
                m[i / SIZE][i % SIZE] = flag(v, name)?;
            }
        }
        Ok(())
    }
}
