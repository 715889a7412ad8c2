//! How fast a path could multiply at best on this machine: its lanes, the
//! FMA units a core has, two operations per fused multiply-add, the clock,
//! the cores. The clock and the units are measured, not looked up: a VM's
//! cores run at whatever clock the host gives them, and AMD's Zen 4 runs an
//! AVX-512 instruction as two 256-bit halves. So a loop of dependent adds
//! (one cycle each on every x86-64 core since 2006) gives the cycles a
//! second each core runs, and a loop of independent FMAs on every core at
//! once gives the instructions a cycle they retire; rounded, that is the
//! units. A kernel's speed over the peak says how close it is to the
//! machine's limit (a good GEMM reaches 80-90% on large products).

use super::Isa;
use super::simd::{Simd, WithSimd};
use serde::Serialize;
use std::time::{Duration, Instant};

/// A path's peak on this machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Peak {
    /// The path (`avx2`, `avx512`).
    pub kernels: &'static str,
    /// f32 lanes of its registers.
    pub lanes: usize,
    /// The clock each core ran the measurement at, GHz.
    pub ghz: f64,
    /// FMA instructions a core retires a cycle (measured, rounded).
    pub fma_units: usize,
    /// Cores measured together (the threads the work runs on).
    pub cores: usize,
    /// `lanes x fma_units x 2 x ghz x cores`, GFLOP/s.
    pub gflops: f64,
    /// What the loop of independent FMAs reached on those cores, GFLOP/s.
    pub fma_loop_gflops: f64,
}

/// The peak of the path `isa` on `cores` cores, each measured for about
/// `time`; `None` on the portable path (no fused multiply-add) or off
/// x86-64.
pub fn measure(isa: Isa, cores: usize, time: Duration) -> Option<Peak> {
    super::with_simd(isa, Measure { isa, cores, time }).flatten()
}

struct Measure {
    isa: Isa,
    cores: usize,
    time: Duration,
}

impl WithSimd for Measure {
    type Output = Option<Peak>;

    unsafe fn run<S: Simd>(self) -> Option<Peak> {
        let hz = cycles_per_second(self.cores.max(1), self.time / 2)?;
        // SAFETY: the caller's guarantee.
        Some(unsafe { measure_on::<S>(self, hz) })
    }
}

/// Each of `cores` threads' clock, measured at once, on average.
fn cycles_per_second(cores: usize, time: Duration) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let hz = on_every_core(cores, || super::x86_64::clock::cycles_per_second(time));
        Some(hz.iter().sum::<f64>() / cores as f64)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (cores, time);
        None
    }
}

/// The FMA loop on every core, against the clock `hz`.
///
/// # Safety
/// The CPU has the set `S`.
unsafe fn measure_on<S: Simd>(m: Measure, hz: f64) -> Peak {
    let (isa, cores, time) = (m.isa, m.cores.max(1), m.time);
    let ghz = hz / 1e9;
    // SAFETY: the caller's guarantee.
    let fma_per_second: f64 = on_every_core(cores, || unsafe { fmas_per_second::<S>(time) })
        .iter()
        .sum();
    let fma_loop_gflops = fma_per_second * (2 * S::LANES) as f64 / 1e9;
    let per_cycle = fma_per_second / cores as f64 / (ghz * 1e9);
    let fma_units = (per_cycle.round() as usize).max(1);
    Peak {
        kernels: isa.name(),
        lanes: S::LANES,
        ghz,
        fma_units,
        cores,
        gflops: (S::LANES * fma_units * 2 * cores) as f64 * ghz,
        fma_loop_gflops,
    }
}

/// `f` on `cores` threads at once, each one's result.
fn on_every_core(cores: usize, f: impl Fn() -> f64 + Sync) -> Vec<f64> {
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..cores).map(|_| s.spawn(&f)).collect();
        runs.into_iter().map(|r| r.join().unwrap_or(0.0)).collect()
    })
}

/// Chains of fused multiply-adds summed apart: as many as keep every unit
/// busy through its latency (2 units x 5 cycles on the slowest core here).
const CHAINS: usize = 12;

/// FMA instructions a second on this thread, over about `time`.
///
/// # Safety
/// The CPU has the set `S`.
unsafe fn fmas_per_second<S: Simd>(time: Duration) -> f64 {
    let mut rounds = 1 << 12;
    loop {
        let t0 = Instant::now();
        // SAFETY: the caller's guarantee.
        let sink = unsafe {
            S::enabled(
                #[inline(always)]
                || fma_rounds::<S>(rounds),
            )
        };
        std::hint::black_box(sink);
        let took = t0.elapsed();
        if took >= time || rounds >= 1 << 40 {
            return (rounds * CHAINS) as f64 / took.as_secs_f64().max(1e-9);
        }
        // Aim past `time` next, from what this took.
        let scale = time.as_secs_f64() / took.as_secs_f64().max(1e-6);
        rounds = (rounds as f64 * scale.clamp(2.0, 1e3) * 1.1) as usize;
    }
}

/// `rounds` x [`CHAINS`] FMAs, reduced to one float so none is dropped.
///
/// # Safety
/// Inside [`Simd::enabled`].
#[inline(always)]
unsafe fn fma_rounds<S: Simd>(rounds: usize) -> f32 {
    unsafe {
        let (a, b) = (S::splat(0.999_999), S::splat(1e-7));
        let mut acc = [S::splat(1.0); CHAINS];
        for _ in 0..rounds {
            for x in &mut acc {
                *x = S::fmadd(*x, a, b);
            }
        }
        let mut out = [0.0f32; 16];
        let sum = acc.iter().fold(S::zero(), |s, &x| S::add(s, x));
        S::store_first(S::first(S::LANES), out.as_mut_ptr(), sum);
        out.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path with fused multiply-adds this CPU has measures a clock
    /// and units in the range of real cores, and a peak of whole units that
    /// the FMA loop does not beat by more than their rounding.
    #[test]
    fn the_peak_is_the_fma_loops_rounded_to_whole_units() {
        for isa in crate::kernels::paths_to_test("the_peak_is_the_fma_loops") {
            let Some(p) = measure(isa, 1, Duration::from_millis(60)) else {
                assert_eq!(isa, Isa::Scalar, "{isa:?} has FMA and no peak");
                continue;
            };
            eprintln!("{p:?}");
            assert!((0.3..8.0).contains(&p.ghz), "{p:?}");
            assert!((1..=4).contains(&p.fma_units), "{p:?}");
            let want = (p.lanes * p.fma_units * 2) as f64 * p.ghz;
            assert!((p.gflops - want).abs() < 1e-9, "{p:?}");
            // The loop never beats the peak by more than a rounding of the
            // units; a loaded machine (other tests on the same cores) may
            // slow it anywhere below.
            assert!(p.fma_loop_gflops < p.gflops * 1.5, "{p:?}");
            assert!(p.fma_loop_gflops > 0.0, "{p:?}");
            // A clock measured too fast (a chain the core shortcuts, as
            // Golden Cove's renamer does with immediate adds) shows as a loop
            // of well under one FMA a cycle, rounded up to one unit.
            let one_unit = (p.lanes * 2) as f64 * p.ghz;
            assert!(p.fma_loop_gflops > 0.4 * one_unit, "{p:?}");
        }
        assert_eq!(measure(Isa::Scalar, 1, Duration::from_millis(1)), None);
    }
}
