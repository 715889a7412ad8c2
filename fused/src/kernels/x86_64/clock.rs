//! The clock a core runs at, measured: a chain of dependent integer adds
//! retires one a cycle on every x86-64 core, so adds a second are cycles a
//! second (on a VM, the cycles the host gave this thread). The addend is a
//! register, not an immediate: Intel's cores since Golden Cove fold chains
//! of immediate adds at renaming, several a cycle (a Sapphire Rapids-class
//! Xeon measured 23 GHz that way).

use std::arch::asm;
use std::time::{Duration, Instant};

/// Adds in one pass of [`chain`]'s loop.
const ADDS: u64 = 100;

/// Cycles a second on this thread over about `time`.
pub fn cycles_per_second(time: Duration) -> f64 {
    let mut rounds: u64 = 1 << 10;
    loop {
        let t0 = Instant::now();
        std::hint::black_box(chain(rounds));
        let took = t0.elapsed();
        if took >= time || rounds >= 1 << 40 {
            return (rounds * ADDS) as f64 / took.as_secs_f64().max(1e-9);
        }
        let scale = time.as_secs_f64() / took.as_secs_f64().max(1e-6);
        rounds = (rounds as f64 * scale.clamp(2.0, 1e3) * 1.1) as u64;
    }
}

/// `rounds` passes of [`ADDS`] adds, each waiting for the one before.
fn chain(rounds: u64) -> u64 {
    let mut x: u64 = 0;
    let mut n = rounds.max(1);
    // SAFETY: registers only: the adds and the loop counter touch no
    // memory and leave the stack alone.
    unsafe {
        asm!(
            "2:",
            ".rept 100",
            "add {x}, {one}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            n = inout(reg) n,
            one = in(reg) 1u64,
            options(nomem, nostack),
        );
    }
    let _ = n;
    x
}
