//! Asterix: the player moves among rows 1 to 8; each of those rows holds at
//! most one enemy or treasure, which enters at one edge and crosses to the
//! other one cell per move. Walking into a treasure (or one moving into the
//! player) is a reward of 1; an enemy ends the game. Every `spawn_speed`
//! steps something new enters a free row drawn at random (an enemy, or a
//! treasure one time in three; from the left or the right with even odds;
//! nothing when every row is taken); the entities move every `move_speed`
//! steps. With the difficulty ramp, every 101 steps the spawns come one step
//! sooner (10 at the start, down to 1) and every other ramp the moves too (5
//! at the start, down to 1).

use super::{Game, Grid, Move, SIZE, cell, flag, whole};
use rand::Rng;
use rand::rngs::StdRng;

const PLAYER: usize = 0;
const ENEMY: usize = 1;
const TRAIL: usize = 2;
const GOLD: usize = 3;

const SLOTS: usize = 8;
const RAMP_INTERVAL: i32 = 100;
const SPAWN_SPEED: usize = 10;
const MOVE_SPEED: usize = 5;

/// An enemy or a treasure in row `slot + 1`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Entity {
    x: i32,
    rightwards: bool,
    gold: bool,
}

pub struct Asterix {
    ramping: bool,
    player: (usize, usize),
    entities: [Option<Entity>; SLOTS],
    spawn_speed: usize,
    spawn_timer: usize,
    move_speed: usize,
    move_timer: usize,
    /// Steps until the next ramp; -1 on the step before it.
    ramp_timer: i32,
    ramp: usize,
    over: bool,
}

impl Asterix {
    pub fn new(ramping: bool) -> Self {
        Self {
            ramping,
            player: (5, 5),
            entities: [None; SLOTS],
            spawn_speed: SPAWN_SPEED,
            spawn_timer: SPAWN_SPEED,
            move_speed: MOVE_SPEED,
            move_timer: MOVE_SPEED,
            ramp_timer: RAMP_INTERVAL,
            ramp: 0,
            over: false,
        }
    }

    /// Something new in a free row: the draws in the package's order (side,
    /// kind, then the row among the free ones).
    fn spawn(&mut self, rng: &mut StdRng) {
        let rightwards = rng.random::<f64>() < 0.5;
        let gold = rng.random::<f64>() < 1.0 / 3.0;
        let free: Vec<usize> = (0..SLOTS).filter(|&i| self.entities[i].is_none()).collect();
        if free.is_empty() {
            return;
        }
        let slot = free[rng.random_range(0..free.len())];
        let x = if rightwards { 0 } else { SIZE as i32 - 1 };
        self.entities[slot] = Some(Entity {
            x,
            rightwards,
            gold,
        });
    }

    /// What the player meets where it stands: a treasure taken (reward),
    /// or the end.
    fn meet(&mut self) -> f64 {
        let (px, py) = self.player;
        let mut reward = 0.0;
        for (slot, e) in self.entities.iter_mut().enumerate() {
            if let Some(en) = *e
                && slot + 1 == py
                && en.x == px as i32
            {
                if en.gold {
                    *e = None;
                    reward += 1.0;
                } else {
                    self.over = true;
                }
            }
        }
        reward
    }

    fn ramp_up(&mut self) {
        if !(self.ramping && (self.spawn_speed > 1 || self.move_speed > 1)) {
            return;
        }
        if self.ramp_timer >= 0 {
            self.ramp_timer -= 1;
            return;
        }
        if self.move_speed > 1 && self.ramp % 2 == 1 {
            self.move_speed -= 1;
        }
        if self.spawn_speed > 1 {
            self.spawn_speed -= 1;
        }
        self.ramp += 1;
        self.ramp_timer = RAMP_INTERVAL;
    }
}

impl Game for Asterix {
    fn channels(&self) -> usize {
        4
    }

    fn minimal_moves(&self) -> &'static [Move] {
        &[Move::Noop, Move::Left, Move::Up, Move::Right, Move::Down]
    }

    fn reset(&mut self, _rng: &mut StdRng) {
        *self = Self::new(self.ramping);
    }

    fn act(&mut self, m: Move, rng: &mut StdRng) -> (f64, bool) {
        if self.over {
            return (0.0, true);
        }
        if self.spawn_timer == 0 {
            self.spawn(rng);
            self.spawn_timer = self.spawn_speed;
        }
        let (x, y) = &mut self.player;
        match m {
            Move::Left => *x = x.saturating_sub(1),
            Move::Right => *x = (*x + 1).min(SIZE - 1),
            Move::Up => *y = (*y - 1).max(1),
            Move::Down => *y = (*y + 1).min(SIZE - 2),
            _ => {}
        }
        let mut reward = self.meet();
        if self.move_timer == 0 {
            self.move_timer = self.move_speed;
            for e in &mut self.entities {
                if let Some(en) = e {
                    en.x += if en.rightwards { 1 } else { -1 };
                    if !(0..SIZE as i32).contains(&en.x) {
                        *e = None;
                    }
                }
            }
            reward += self.meet();
        }
        // Set again when they act, the timers never go below zero.
        self.spawn_timer = self.spawn_timer.saturating_sub(1);
        self.move_timer = self.move_timer.saturating_sub(1);
        self.ramp_up();
        (reward, self.over)
    }

    fn draw(&self, grid: &mut Grid<'_>) {
        grid.set(self.player.1, self.player.0, PLAYER);
        for (slot, e) in self.entities.iter().enumerate() {
            let Some(en) = e else { continue };
            let (row, x) = (slot + 1, en.x as usize);
            grid.set(row, x, if en.gold { GOLD } else { ENEMY });
            let back = if en.rightwards { en.x - 1 } else { en.x + 1 };
            if (0..SIZE as i32).contains(&back) {
                grid.set(row, back as usize, TRAIL);
            }
        }
    }

    /// `[player_x, player_y, spawn_speed, spawn_timer, move_speed,
    /// move_timer, ramp_timer, ramp_index, terminal]`, then per row slot
    /// `[present, x, rightwards, gold]` (the package's `entities`).
    fn state(&self) -> Vec<f64> {
        let b = |v: bool| f64::from(u8::from(v));
        let mut s = vec![
            self.player.0 as f64,
            self.player.1 as f64,
            self.spawn_speed as f64,
            self.spawn_timer as f64,
            self.move_speed as f64,
            self.move_timer as f64,
            f64::from(self.ramp_timer),
            self.ramp as f64,
            b(self.over),
        ];
        for e in &self.entities {
            s.extend(match e {
                Some(en) => [1.0, f64::from(en.x), b(en.rightwards), b(en.gold)],
                None => [0.0; 4],
            });
        }
        s
    }

    fn set_state(&mut self, s: &[f64]) -> Result<(), String> {
        let n = 9 + 4 * SLOTS;
        if s.len() != n {
            return Err(format!("{} values, Asterix's state has {n}", s.len()));
        }
        let x = cell(s[0], "player_x")?;
        let y = cell(s[1], "player_y")?;
        if !(1..SIZE - 1).contains(&y) {
            return Err(format!("player_y = {y}: must be in 1..=8"));
        }
        self.player = (x, y);
        self.spawn_speed = whole(s[2], SPAWN_SPEED + 1, "spawn_speed")?;
        self.spawn_timer = whole(s[3], SPAWN_SPEED + 1, "spawn_timer")?;
        self.move_speed = whole(s[4], MOVE_SPEED + 1, "move_speed")?;
        self.move_timer = whole(s[5], MOVE_SPEED + 1, "move_timer")?;
        self.ramp_timer =
            whole(s[6] + 1.0, RAMP_INTERVAL as usize + 2, "ramp_timer + 1")? as i32 - 1;
        self.ramp = whole(s[7], 64, "ramp_index")?;
        self.over = flag(s[8], "terminal")?;
        for (slot, e) in s[9..].chunks_exact(4).enumerate() {
            self.entities[slot] = match flag(e[0], "entity present")? {
                false => None,
                true => Some(Entity {
                    x: cell(e[1], "entity x")? as i32,
                    rightwards: flag(e[2], "entity direction")?,
                    gold: flag(e[3], "entity gold")?,
                }),
            };
        }
        Ok(())
    }
}
