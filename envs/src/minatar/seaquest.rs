//! Seaquest: the player's submarine (a front and a back cell, so its heading
//! shows) moves in rows 0 to 8 and fires forward. Enemy fish and submarines
//! enter rows 1 to 8 at an edge and cross; submarines shoot. A shot enemy is a
//! reward of 1. Divers cross too; the submarine picks one up by touching it
//! (six at most). Oxygen (200) runs down below the surface; surfacing with a
//! diver refills it and drops one diver (with six, all six, and a reward of
//! a tenth of the oxygen bar's cells left), and ramps the difficulty:
//! enemies come one step sooner (20 at the start, down to 1) and, every other
//! ramp, move one step sooner (every 5 steps at the start, down to 2). The
//! game ends when an enemy or its shot touches the submarine, when the
//! oxygen is out, or when the submarine surfaces without a diver.
//!
//! The `minatar` package keeps its objects in Python lists, walks them
//! backwards while removing from them, and removes by value (the first equal
//! object); a removed submarine still fires in the step it leaves. [`Objects`]
//! keeps those semantics exactly (each object has an identity, apart from its
//! value), so that every transition is the package's, the order the objects
//! are stepped in included. Two package quirks are kept because play depends
//! on them: surfacing with six divers leaves the count at -1 (the package
//! clears it, then drops one), and oxygen is checked before it is used.

use super::{ALL_MOVES, Game, Grid, Move, SIZE, flag, whole};
use rand::Rng;
use rand::rngs::StdRng;

const SUB_FRONT: usize = 0;
const SUB_BACK: usize = 1;
const FRIENDLY_BULLET: usize = 2;
const TRAIL: usize = 3;
const ENEMY_BULLET: usize = 4;
const ENEMY_FISH: usize = 5;
const ENEMY_SUB: usize = 6;
const OXYGEN_GAUGE: usize = 7;
const DIVER_GAUGE: usize = 8;
const DIVER: usize = 9;

const MAX_OXYGEN: i32 = 200;
const SPAWN_SPEED: i32 = 20;
const DIVER_SPAWN_SPEED: i32 = 30;
const MOVE_SPEED: i32 = 5;
const SHOT_COOL_DOWN: i32 = 5;
const ENEMY_SHOT_INTERVAL: i32 = 10;
const DIVER_MOVE_INTERVAL: i32 = 5;
const MAX_DIVERS: i32 = 6;
const LAST: i32 = SIZE as i32 - 1;

mod objects;
mod state;

use objects::{Objects, Thing};

pub struct Seaquest {
    ramping: bool,
    oxygen: i32,
    divers_held: i32,
    x: i32,
    y: i32,
    rightwards: bool,
    f_bullets: Objects,
    e_bullets: Objects,
    fish: Objects,
    subs: Objects,
    divers: Objects,
    spawn_speed: i32,
    spawn_timer: i32,
    diver_timer: i32,
    move_speed: i32,
    ramp: i32,
    shot_timer: i32,
    surfaced: bool,
    over: bool,
}

impl Seaquest {
    pub fn new(ramping: bool) -> Self {
        Self {
            ramping,
            oxygen: MAX_OXYGEN,
            divers_held: 0,
            x: 5,
            y: 0,
            rightwards: false,
            f_bullets: Objects::default(),
            e_bullets: Objects::default(),
            fish: Objects::default(),
            subs: Objects::default(),
            divers: Objects::default(),
            spawn_speed: SPAWN_SPEED,
            spawn_timer: SPAWN_SPEED,
            diver_timer: DIVER_SPAWN_SPEED,
            move_speed: MOVE_SPEED,
            ramp: 0,
            shot_timer: 0,
            surfaced: true,
            over: false,
        }
    }

    /// A side, then (enemies) the kind, then a row 1..=8: the package's
    /// draws in its order.
    fn entering(rng: &mut StdRng, timer: i32) -> Thing {
        let rightwards = rng.random::<f64>() < 0.5;
        Thing {
            x: if rightwards { 0 } else { LAST },
            y: 0,
            rightwards,
            timer,
            shot: 0,
        }
    }

    /// A fish or (one time in three) a submarine, unless its row holds an
    /// enemy heading the other way.
    fn spawn_enemy(&mut self, rng: &mut StdRng) {
        let mut t = Self::entering(rng, self.move_speed);
        let is_sub = rng.random::<f64>() < 1.0 / 3.0;
        t.y = rng.random_range(1..9);
        let blocked = (self.subs.things().chain(self.fish.things()))
            .any(|z| z.y == t.y && z.rightwards != t.rightwards);
        if blocked {
            return;
        }
        if is_sub {
            t.shot = ENEMY_SHOT_INTERVAL;
            self.subs.push(t);
        } else {
            self.fish.push(t);
        }
    }

    fn spawn_diver(&mut self, rng: &mut StdRng) {
        let mut t = Self::entering(rng, DIVER_MOVE_INTERVAL);
        t.y = rng.random_range(1..9);
        self.divers.push(t);
    }

    fn steer(&mut self, m: Move) {
        match m {
            Move::Fire if self.shot_timer == 0 => {
                self.f_bullets.push(Thing {
                    x: self.x,
                    y: self.y,
                    rightwards: self.rightwards,
                    timer: 0,
                    shot: 0,
                });
                self.shot_timer = SHOT_COOL_DOWN;
            }
            Move::Left => (self.x, self.rightwards) = ((self.x - 1).max(0), false),
            Move::Right => (self.x, self.rightwards) = ((self.x + 1).min(LAST), true),
            Move::Up => self.y = (self.y - 1).max(0),
            Move::Down => self.y = (self.y + 1).min(SIZE as i32 - 2),
            _ => {}
        }
    }

    /// The player's bullets move; one that meets a fish (else a submarine)
    /// takes it out. Returns the enemies shot.
    fn move_bullets(&mut self) -> f64 {
        let mut reward = 0.0;
        let mut at = self.f_bullets.start();
        while let Some((id, mut b)) = self.f_bullets.walk_back(&mut at) {
            b.advance();
            self.f_bullets.update(id, b);
            if b.outside() {
                self.f_bullets.remove_value(&b);
                continue;
            }
            for enemies in [&mut self.fish, &mut self.subs] {
                if let Some(e) = enemies.first_meeting(&b) {
                    enemies.remove_value(&e);
                    self.f_bullets.remove_value(&b);
                    reward += 1.0;
                    break;
                }
            }
        }
        reward
    }

    fn picks_up(&self, d: &Thing) -> bool {
        d.at(self.x, self.y) && self.divers_held < MAX_DIVERS
    }

    fn move_divers(&mut self) {
        let mut at = self.divers.start();
        while let Some((id, mut d)) = self.divers.walk_back(&mut at) {
            if self.picks_up(&d) {
                self.divers.remove_value(&d);
                self.divers_held += 1;
                continue;
            }
            if d.timer > 0 {
                d.timer -= 1;
                self.divers.update(id, d);
                continue;
            }
            d.timer = DIVER_MOVE_INTERVAL;
            d.advance();
            self.divers.update(id, d);
            if d.outside() {
                self.divers.remove_value(&d);
            } else if self.picks_up(&d) {
                self.divers.remove_value(&d);
                self.divers_held += 1;
            }
        }
    }

    /// Fish (`subs` false) or submarines move; an enemy that moves onto one
    /// of the player's bullets is shot (a reward), one on the player ends
    /// the game; submarines fire, even one that has just left the grid.
    fn move_enemies(&mut self, subs: bool) -> f64 {
        let mut reward = 0.0;
        let list = if subs { &mut self.subs } else { &mut self.fish };
        let mut at = list.start();
        while let Some((id, mut e)) = list.walk_back(&mut at) {
            self.over |= e.at(self.x, self.y);
            if e.timer == 0 {
                e.timer = self.move_speed;
                e.advance();
                list.update(id, e);
                if e.outside() {
                    list.remove_value(&e);
                } else if e.at(self.x, self.y) {
                    self.over = true;
                } else if let Some(b) = self.f_bullets.first_meeting(&e) {
                    list.remove_value(&e);
                    self.f_bullets.remove_value(&b);
                    reward += 1.0;
                }
            } else {
                e.timer -= 1;
                list.update(id, e);
            }
            if !subs {
                continue;
            }
            if e.shot == 0 {
                e.shot = ENEMY_SHOT_INTERVAL;
                self.e_bullets.push(Thing {
                    timer: 0,
                    shot: 0,
                    ..e
                });
            } else {
                e.shot -= 1;
            }
            list.update(id, e);
        }
        reward
    }

    fn move_enemy_bullets(&mut self) {
        let mut at = self.e_bullets.start();
        while let Some((id, mut b)) = self.e_bullets.walk_back(&mut at) {
            self.over |= b.at(self.x, self.y);
            b.advance();
            self.e_bullets.update(id, b);
            if b.outside() {
                self.e_bullets.remove_value(&b);
            } else {
                self.over |= b.at(self.x, self.y);
            }
        }
    }

    /// At the surface: oxygen refilled, a diver dropped (all six, for a
    /// reward), the difficulty ramped.
    fn surface(&mut self) -> f64 {
        self.surfaced = true;
        let mut reward = 0.0;
        if self.divers_held == MAX_DIVERS {
            self.divers_held = 0;
            reward = f64::from((self.oxygen * 10).div_euclid(MAX_OXYGEN));
        }
        self.oxygen = MAX_OXYGEN;
        self.divers_held -= 1;
        if self.ramping && (self.spawn_speed > 1 || self.move_speed > 2) {
            if self.move_speed > 2 && self.ramp % 2 == 1 {
                self.move_speed -= 1;
            }
            if self.spawn_speed > 1 {
                self.spawn_speed -= 1;
            }
            self.ramp += 1;
        }
        reward
    }

    /// Oxygen used below the surface; reaching it refills (with a diver).
    fn breathe(&mut self) -> f64 {
        self.over |= self.oxygen <= 0;
        if self.y > 0 {
            self.oxygen -= 1;
            self.surfaced = false;
            return 0.0;
        }
        if self.surfaced {
            return 0.0;
        }
        if self.divers_held == 0 {
            self.over = true;
            return 0.0;
        }
        self.surface()
    }
}

impl Game for Seaquest {
    fn channels(&self) -> usize {
        10
    }

    fn minimal_moves(&self) -> &'static [Move] {
        &ALL_MOVES
    }

    fn reset(&mut self, _rng: &mut StdRng) {
        *self = Self::new(self.ramping);
    }

    fn act(&mut self, m: Move, rng: &mut StdRng) -> (f64, bool) {
        if self.over {
            return (0.0, true);
        }
        if self.spawn_timer == 0 {
            self.spawn_enemy(rng);
            self.spawn_timer = self.spawn_speed;
        }
        if self.diver_timer == 0 {
            self.spawn_diver(rng);
            self.diver_timer = DIVER_SPAWN_SPEED;
        }
        self.steer(m);
        let mut reward = self.move_bullets();
        self.move_divers();
        reward += self.move_enemies(true);
        self.move_enemy_bullets();
        reward += self.move_enemies(false);
        self.spawn_timer -= i32::from(self.spawn_timer > 0);
        self.diver_timer -= i32::from(self.diver_timer > 0);
        self.shot_timer -= i32::from(self.shot_timer > 0);
        reward += self.breathe();
        (reward, self.over)
    }

    fn draw(&self, grid: &mut Grid<'_>) {
        let (x, y) = (self.x as usize, self.y as usize);
        grid.set(y, x, SUB_FRONT);
        // The back cell is always inside: the submarine reaches column 9
        // only heading right, and column 0 only heading left.
        let back = if self.rightwards {
            x.wrapping_sub(1)
        } else {
            x + 1
        };
        if back < SIZE {
            grid.set(y, back, SUB_BACK);
        }
        for c in 0..(self.oxygen.max(0) * 10 / MAX_OXYGEN) as usize {
            grid.set(SIZE - 1, c, OXYGEN_GAUGE);
        }
        for c in (SIZE as i32 - 1 - self.divers_held).max(0)..LAST {
            grid.set(SIZE - 1, c as usize, DIVER_GAUGE);
        }
        let mut mark = |t: &Thing, channel: usize, trail: bool| {
            if !(0..=LAST).contains(&t.x) {
                return;
            }
            grid.set(t.y as usize, t.x as usize, channel);
            let back = if t.rightwards { t.x - 1 } else { t.x + 1 };
            if trail && (0..=LAST).contains(&back) {
                grid.set(t.y as usize, back as usize, TRAIL);
            }
        };
        self.f_bullets
            .things()
            .for_each(|t| mark(t, FRIENDLY_BULLET, false));
        self.e_bullets
            .things()
            .for_each(|t| mark(t, ENEMY_BULLET, false));
        self.fish.things().for_each(|t| mark(t, ENEMY_FISH, true));
        self.subs.things().for_each(|t| mark(t, ENEMY_SUB, true));
        self.divers.things().for_each(|t| mark(t, DIVER, true));
    }

    fn state(&self) -> Vec<f64> {
        self.to_state()
    }

    fn set_state(&mut self, s: &[f64]) -> Result<(), String> {
        self.load_state(s)
    }
}

#[cfg(test)]
mod tests;
