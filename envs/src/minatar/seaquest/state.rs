//! Seaquest's state as numbers, in the order the reference test reads the
//! package's attributes, and back.

use super::*;

impl Seaquest {
    /// `[oxygen, diver_count, sub_x, sub_y, sub_or, e_spawn_speed,
    /// e_spawn_timer, d_spawn_timer, move_speed, ramp_index, shot_timer,
    /// surface, terminal]`, then the package's lists `f_bullets`,
    /// `e_bullets` (`[x, y, direction]` each), `e_fish`, `e_subs` (also the
    /// shot timer) and `divers` (`[x, y, direction, move timer]`), each as
    /// its length and its objects in order.
    pub(super) fn to_state(&self) -> Vec<f64> {
        let b = |v: bool| f64::from(u8::from(v));
        let mut s: Vec<f64> = [
            self.oxygen,
            self.divers_held,
            self.x,
            self.y,
            i32::from(self.rightwards),
            self.spawn_speed,
            self.spawn_timer,
            self.diver_timer,
            self.move_speed,
            self.ramp,
            self.shot_timer,
            i32::from(self.surfaced),
            i32::from(self.over),
        ]
        .map(f64::from)
        .to_vec();
        for (list, width) in self.lists() {
            s.push(list.items.len() as f64);
            for t in list.things() {
                let all = [
                    f64::from(t.x),
                    f64::from(t.y),
                    b(t.rightwards),
                    f64::from(t.timer),
                    f64::from(t.shot),
                ];
                s.extend_from_slice(&all[..width]);
            }
        }
        s
    }

    /// Sets the state from [`Seaquest::to_state`]'s layout; `Err` names what is wrong.
    pub(super) fn load_state(&mut self, s: &[f64]) -> Result<(), String> {
        if s.len() < 13 {
            return Err(format!(
                "{} values, Seaquest's state has at least 18",
                s.len()
            ));
        }
        let int = |v: f64, lo: i32, hi: i32, what: &str| -> Result<i32, String> {
            if v.fract() == 0.0 && (f64::from(lo)..=f64::from(hi)).contains(&v) {
                Ok(v as i32)
            } else {
                Err(format!(
                    "{what} = {v}: must be a whole number in {lo}..={hi}"
                ))
            }
        };
        let mut next = Self::new(self.ramping);
        next.oxygen = int(s[0], -1, MAX_OXYGEN, "oxygen")?;
        next.divers_held = int(s[1], -64, MAX_DIVERS, "diver_count")?;
        next.x = int(s[2], 0, LAST, "sub_x")?;
        next.y = int(s[3], 0, LAST - 1, "sub_y")?;
        next.rightwards = flag(s[4], "sub_or")?;
        next.spawn_speed = int(s[5], 1, SPAWN_SPEED, "e_spawn_speed")?;
        next.spawn_timer = int(s[6], 0, SPAWN_SPEED, "e_spawn_timer")?;
        next.diver_timer = int(s[7], 0, DIVER_SPAWN_SPEED, "d_spawn_timer")?;
        next.move_speed = int(s[8], 1, MOVE_SPEED, "move_speed")?;
        next.ramp = int(s[9], 0, 1 << 20, "ramp_index")?;
        next.shot_timer = int(s[10], 0, SHOT_COOL_DOWN, "shot_timer")?;
        next.surfaced = flag(s[11], "surface")?;
        next.over = flag(s[12], "terminal")?;
        let mut rest = &s[13..];
        for (name, width) in ["f_bullets", "e_bullets", "e_fish", "e_subs", "divers"]
            .into_iter()
            .zip([3, 3, 4, 5, 4])
        {
            let (&n, tail) = rest
                .split_first()
                .ok_or_else(|| format!("{name}: its length is missing"))?;
            let n = whole(n, 1024, &format!("{name}'s length"))?;
            if tail.len() < n * width {
                return Err(format!("{name}: {n} objects of {width} values do not fit"));
            }
            let list = next.list_mut(name);
            for v in tail[..n * width].chunks_exact(width) {
                let at = |k: usize| v.get(k).copied().unwrap_or(0.0);
                list.push(Thing {
                    x: int(v[0], -1, SIZE as i32, &format!("{name} x"))?,
                    y: int(v[1], 0, LAST, &format!("{name} y"))?,
                    rightwards: flag(v[2], &format!("{name} direction"))?,
                    timer: int(at(3), 0, DIVER_MOVE_INTERVAL, &format!("{name} timer"))?,
                    shot: int(at(4), 0, ENEMY_SHOT_INTERVAL, &format!("{name} shot timer"))?,
                });
            }
            rest = &tail[n * width..];
        }
        if !rest.is_empty() {
            return Err(format!("{} values past Seaquest's state", rest.len()));
        }
        *self = next;
        Ok(())
    }

    /// The lists in the state's order, with the values each object has there.
    fn lists(&self) -> [(&Objects, usize); 5] {
        [
            (&self.f_bullets, 3),
            (&self.e_bullets, 3),
            (&self.fish, 4),
            (&self.subs, 5),
            (&self.divers, 4),
        ]
    }

    fn list_mut(&mut self, name: &str) -> &mut Objects {
        match name {
            "f_bullets" => &mut self.f_bullets,
            "e_bullets" => &mut self.e_bullets,
            "e_fish" => &mut self.fish,
            "e_subs" => &mut self.subs,
            _ => &mut self.divers,
        }
    }
}
