//! The team runs every shard of every step exactly once, whoever claims it;
//! raises a worker's panic in the caller and goes on; wakes parked workers.

use super::*;
use std::sync::atomic::AtomicU32;

/// Steps of every size up to the team's threads (and past the team, one
/// thread alone) run each shard once: counts per shard. A worker that read a
/// finished step's claims against the next step's shard count once ran a
/// shard twice (CI, 1 in 2,000 steps): many steps, to catch such a race.
#[test]
fn every_shard_runs_once_per_step() {
    for workers in 0..4 {
        let team = Team::new(workers, "test-shard");
        assert_eq!(team.threads(), workers + 1);
        let counts: Vec<AtomicU32> = (0..8).map(|_| AtomicU32::new(0)).collect();
        let steps = 50_000;
        for step in 0..steps {
            let shards = 1 + step % 8;
            team.run(shards, &|i| {
                counts[i].fetch_add(1, Ordering::Relaxed);
            });
        }
        for (i, c) in counts.iter().enumerate() {
            let want = (0..steps).filter(|s| s % 8 >= i).count() as u32;
            assert_eq!(
                c.load(Ordering::Relaxed),
                want,
                "{workers} workers: shard {i}"
            );
        }
    }
}

/// The shards of a step run on more than one thread when the work is long
/// enough for a worker to claim some (a team that ran all on the caller
/// would pass the count test above).
#[test]
fn workers_take_shards() {
    let team = Team::new(1, "test-shard");
    let main = std::thread::current().id();
    let elsewhere = AtomicU32::new(0);
    for _ in 0..50 {
        team.run(2, &|_| {
            std::thread::sleep(Duration::from_millis(1));
            if std::thread::current().id() != main {
                elsewhere.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    assert!(
        elsewhere.load(Ordering::Relaxed) > 0,
        "no shard ran on the worker"
    );
}

/// A panic in any shard reaches the caller once, after every other shard
/// of its step has run (a worker may still be reading the step's job when
/// the caller's own shard panics), and the next step runs.
#[test]
fn a_shards_panic_reaches_the_caller_and_the_team_goes_on() {
    let team = Team::new(2, "test-shard");
    for bad in 0..3 {
        let finished = AtomicU32::new(0);
        let caught = std::panic::catch_unwind(AssertUnwindSafe(|| {
            team.run(3, &|i| {
                std::thread::sleep(Duration::from_millis(if i == bad { 1 } else { 5 }));
                assert!(i != bad, "shard {i} fails");
                finished.fetch_add(1, Ordering::Relaxed);
            })
        }));
        assert!(caught.is_err(), "shard {bad}'s panic was lost");
        assert_eq!(
            finished.load(Ordering::Relaxed),
            2,
            "shard {bad}'s panic left others running"
        );
        let ran = AtomicU32::new(0);
        team.run(3, &|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(ran.load(Ordering::Relaxed), 3);
    }
}

/// Workers that parked (idle past the spin) wake for the next step, and a
/// team drops (joining its threads) whether they spin or sleep.
#[test]
fn parked_workers_wake_and_the_team_drops() {
    let team = Team::new(2, "test-shard");
    for _ in 0..5 {
        std::thread::sleep(SPIN * 20);
        let ran = AtomicU32::new(0);
        team.run(3, &|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(ran.load(Ordering::Relaxed), 3);
    }
    assert!(team.shared.parked.load(Ordering::SeqCst) <= 2);
    drop(team);
    let spinning = Team::new(3, "test-shard");
    spinning.run(4, &|_| {});
    drop(spinning);
}

#[test]
#[should_panic(expected = "shards: 1 to")]
fn a_step_of_no_shards_is_refused() {
    Team::new(1, "test-shard").run(0, &|_| {});
}
