//! Seaquest's rules on hand-made states, worked out from the rules.

use super::*;
use rand::SeedableRng;

fn rng() -> StdRng {
    StdRng::seed_from_u64(3)
}

/// Cells `(y, x)` of channel `c` in a drawing of `g`.
fn cells(g: &Seaquest, c: usize) -> Vec<(usize, usize)> {
    let mut obs = vec![0.0; SIZE * SIZE * 10];
    g.draw(&mut Grid {
        obs: &mut obs,
        channels: 10,
    });
    (0..SIZE * SIZE)
        .filter(|i| obs[i * 10 + c] == 1.0)
        .map(|i| (i / SIZE, i % SIZE))
        .collect()
}

fn thing(x: i32, y: i32, rightwards: bool, timer: i32) -> Thing {
    Thing {
        x,
        y,
        rightwards,
        timer,
        shot: 0,
    }
}

/// A game whose spawns are far off, the submarine at `(x, y)`.
fn at(x: i32, y: i32, rightwards: bool) -> Seaquest {
    let mut g = Seaquest::new(true);
    (g.x, g.y, g.rightwards) = (x, y, rightwards);
    g.surfaced = y == 0;
    (g.spawn_timer, g.diver_timer) = (15, 25);
    g
}

#[test]
fn the_start_is_drawn_with_full_oxygen_and_no_diver() {
    let g = Seaquest::new(true);
    assert_eq!(cells(&g, SUB_FRONT), [(0, 5)]);
    // Heading left: the back is to the right.
    assert_eq!(cells(&g, SUB_BACK), [(0, 6)]);
    assert_eq!(cells(&g, OXYGEN_GAUGE).len(), 10);
    assert!(cells(&g, DIVER_GAUGE).is_empty());
    let mut g = at(0, 3, false);
    g.oxygen = 39;
    g.divers_held = 2;
    // floor(39 * 10 / 200) = 1 cell of oxygen; two divers at columns 7, 8.
    assert_eq!(cells(&g, OXYGEN_GAUGE), [(9, 0)]);
    assert_eq!(cells(&g, DIVER_GAUGE), [(9, 7), (9, 8)]);
    assert_eq!(cells(&g, SUB_BACK), [(3, 1)]);
}

#[test]
fn surfacing_without_a_diver_ends_the_game() {
    let mut g = Seaquest::new(true);
    (g.spawn_timer, g.diver_timer) = (15, 25);
    assert_eq!(g.act(Move::Down, &mut rng()), (0.0, false));
    assert_eq!((g.y, g.oxygen, g.surfaced), (1, 199, false));
    assert_eq!(g.act(Move::Up, &mut rng()), (0.0, true));
    // Over: nothing moves any more.
    assert_eq!(g.act(Move::Down, &mut rng()), (0.0, true));
    assert_eq!(g.y, 0);
}

#[test]
fn a_diver_picked_up_buys_one_surfacing_which_ramps_the_difficulty() {
    let mut g = at(5, 0, false);
    g.divers.push(thing(5, 1, true, 3));
    g.act(Move::Down, &mut rng());
    assert_eq!((g.divers_held, g.divers.items.len()), (1, 0));
    assert_eq!(g.act(Move::Up, &mut rng()), (0.0, false));
    assert_eq!((g.oxygen, g.divers_held, g.surfaced), (200, 0, true));
    // Ramp 0 is even: enemies come sooner, they do not move faster yet.
    assert_eq!((g.ramp, g.spawn_speed, g.move_speed), (1, 19, 5));
    // Staying at the surface does nothing more.
    assert_eq!(g.act(Move::Noop, &mut rng()), (0.0, false));
    assert_eq!(g.ramp, 1);
}

#[test]
fn six_divers_surface_for_the_oxygen_left_and_leave_the_count_at_minus_one() {
    let mut g = at(4, 1, true);
    (g.divers_held, g.oxygen, g.ramp) = (6, 150, 1);
    // floor(150 * 10 / 200) = 7; the package clears the count, then drops one.
    assert_eq!(g.act(Move::Up, &mut rng()), (7.0, false));
    assert_eq!((g.divers_held, g.oxygen), (-1, 200));
    // Ramp 1 is odd: enemies also move one step sooner.
    assert_eq!((g.ramp, g.spawn_speed, g.move_speed), (2, 19, 4));
    assert!(cells(&g, DIVER_GAUGE).is_empty());
}

#[test]
fn oxygen_runs_out_below_the_surface() {
    let mut g = at(2, 4, false);
    g.oxygen = 1;
    assert_eq!(g.act(Move::Noop, &mut rng()), (0.0, false));
    assert_eq!(g.oxygen, 0);
    assert_eq!(g.act(Move::Noop, &mut rng()), (0.0, true));
}

#[test]
fn a_shot_fish_is_a_reward_and_the_gun_reloads_in_five_steps() {
    let mut g = at(5, 3, true);
    g.fish.push(thing(7, 3, false, 2));
    // The bullet leaves from the front cell and moves at once: (6, 3).
    assert_eq!(g.act(Move::Fire, &mut rng()), (0.0, false));
    assert_eq!(cells(&g, FRIENDLY_BULLET), [(3, 6)]);
    assert_eq!(g.shot_timer, 4);
    // Next step it reaches the fish, which has not moved (its timer ran 2, 1).
    assert_eq!(g.act(Move::Fire, &mut rng()), (1.0, false));
    assert!(g.fish.items.is_empty() && g.f_bullets.items.is_empty());
    for _ in 0..3 {
        g.act(Move::Fire, &mut rng());
    }
    assert_eq!((g.shot_timer, g.f_bullets.items.len()), (0, 0));
    g.act(Move::Fire, &mut rng());
    assert_eq!(g.f_bullets.items.len(), 1);
}

#[test]
fn enemy_submarines_fire_every_eleventh_step_and_their_shots_kill() {
    let mut g = at(5, 4, false);
    let mut sub = thing(1, 4, true, 3);
    sub.shot = 0;
    g.subs.push(sub);
    // The shot appears at the submarine and moves at once: (2, 4).
    g.act(Move::Noop, &mut rng());
    assert_eq!(cells(&g, ENEMY_BULLET), [(4, 2)]);
    assert_eq!(g.subs.items[0].1.shot, ENEMY_SHOT_INTERVAL);
    // Two more steps: (4, 4); the third brings it onto the player.
    g.act(Move::Noop, &mut rng());
    g.act(Move::Noop, &mut rng());
    assert_eq!(cells(&g, ENEMY_BULLET), [(4, 4)]);
    assert_eq!(g.act(Move::Noop, &mut rng()), (0.0, true));
}

#[test]
fn enemies_enter_at_an_edge_unless_their_row_runs_the_other_way() {
    let mut g = at(5, 0, false);
    g.spawn_timer = 0;
    let mut r = rng();
    g.act(Move::Noop, &mut r);
    let enemies: Vec<Thing> = g.fish.things().chain(g.subs.things()).copied().collect();
    assert_eq!(enemies.len(), 1);
    let e = enemies[0];
    // It entered at its edge and has not moved yet (its timer started at 5).
    assert_eq!((e.x, e.timer), (if e.rightwards { 0 } else { 9 }, 4));
    assert!((1..=8).contains(&e.y));
    assert_eq!(g.spawn_timer, SPAWN_SPEED - 1);
    // Every row taken by an enemy heading each way: no spawn fits.
    let mut g = at(5, 0, false);
    for y in 1..=8 {
        g.fish.push(thing(4, y, true, 3));
        g.subs.push(thing(6, y, false, 3));
    }
    g.spawn_timer = 0;
    g.act(Move::Noop, &mut r);
    assert_eq!(g.fish.items.len() + g.subs.items.len(), 16);
}

/// Python's list semantics: removal by value takes the first equal object,
/// and a backward walk then visits the current object again.
#[test]
fn objects_remove_by_value_and_walk_back_as_python_lists() {
    let mut list = Objects::default();
    for x in [1, 2, 1] {
        list.push(thing(x, 1, true, 0));
    }
    let mut at = list.start();
    let (id, t) = list.walk_back(&mut at).unwrap();
    assert_eq!(id, 2);
    list.remove_value(&t);
    // Object 0 (equal to 2) went; the walk's next index now holds object 2.
    assert_eq!(
        list.items.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(list.walk_back(&mut at).map(|(i, _)| i), Some(2));
    assert_eq!(list.walk_back(&mut at).map(|(i, _)| i), Some(1));
    assert_eq!(list.walk_back(&mut at), None);
}

#[test]
fn the_state_round_trips_and_is_checked() {
    let mut g = at(3, 2, true);
    g.fish.push(thing(4, 5, false, 2));
    let mut sub = thing(8, 6, true, 1);
    sub.shot = 7;
    g.subs.push(sub);
    g.divers.push(thing(0, 7, true, 5));
    g.f_bullets.push(thing(5, 2, true, 0));
    let s = g.state();
    let mut h = Seaquest::new(true);
    h.set_state(&s).unwrap();
    assert_eq!(h.state(), s);
    let mut bad = s.clone();
    bad[2] = 10.0;
    assert!(h.set_state(&bad).unwrap_err().contains("sub_x"));
    assert!(h.set_state(&s[..s.len() - 1]).is_err());
}
