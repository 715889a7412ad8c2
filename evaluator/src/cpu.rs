//! The CPU an evaluation takes, and holding it to a share of the machine.
//!
//! An evaluation runs on a thread named [`THREAD_NAME`]; on Linux the threads
//! it starts (ALE's emulator threads, a Python env's) inherit the name, so
//! the evaluation's CPU time is the sum over this process's threads of that
//! name. They all end with the evaluation's vector env, which is read before
//! it is dropped.

use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The name of an evaluation's thread (at most 15 bytes: Linux's limit).
pub const THREAD_NAME: &str = "sebulba-eval";

/// CPU seconds of the calling thread (to the nanosecond) and of every other
/// thread of this process named [`THREAD_NAME`] (user and system time, in
/// `/proc`'s 10 ms ticks); the calling thread's alone where `/proc` does not
/// say.
pub fn eval_threads_cpu_seconds() -> f64 {
    let own = sebulba_core::cpu::this_thread_seconds();
    let me = sebulba_core::cpu::this_thread_id().to_string();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return own;
    };
    let ticks = sebulba_core::cpu::ticks_per_second();
    let others: u64 = tasks
        .flatten()
        .filter(|t| t.file_name().to_string_lossy() != me)
        .filter_map(|t| {
            let dir = t.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            (comm.trim_end() == THREAD_NAME).then_some(())?;
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            sebulba_core::cpu::stat_ticks(&stat, false)
        })
        .sum();
    own + others as f64 / ticks
}

/// Holds an evaluation's threads to `share` of the machine's cores: the
/// evaluation sleeps whenever its CPU time since it started passes `share`
/// x cores x its wall time. Checked at most every [`Throttle::EVERY`].
pub struct Throttle {
    /// Cores the evaluation may use (share x the machine's cores); `None`:
    /// unbounded.
    cores: Option<f64>,
    started: Instant,
    cpu_at_start: f64,
    last_check: Instant,
    slept: Duration,
}

impl Throttle {
    const EVERY: Duration = Duration::from_millis(20);
    /// The longest single sleep, so that a stop is seen promptly.
    const NAP: Duration = Duration::from_millis(100);

    /// A throttle to `share` of the machine's cores (`None`: unbounded).
    pub fn new(share: Option<f64>) -> Self {
        let machine = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let now = Instant::now();
        Self {
            cores: share.filter(|s| *s < 1.0).map(|s| s * machine),
            started: now,
            cpu_at_start: eval_threads_cpu_seconds(),
            last_check: now,
            slept: Duration::ZERO,
        }
    }

    /// CPU seconds the evaluation's threads took since the throttle started.
    pub fn cpu_seconds(&self) -> f64 {
        (eval_threads_cpu_seconds() - self.cpu_at_start).max(0.0)
    }

    /// Time spent sleeping so far.
    pub fn slept(&self) -> Duration {
        self.slept
    }

    /// Sleeps as long as the evaluation is over its share (in naps, each
    /// after `stopped` is asked); returns at once when unbounded or checked
    /// less than [`Throttle::EVERY`] ago.
    pub fn pace(&mut self, stopped: &dyn Fn() -> bool) {
        let Some(cores) = self.cores else { return };
        if self.last_check.elapsed() < Self::EVERY {
            return;
        }
        self.last_check = Instant::now();
        let cpu = self.cpu_seconds();
        let due = Duration::from_secs_f64(cpu / cores);
        let mut wall = self.started.elapsed();
        while wall < due && !stopped() {
            let nap = (due - wall).min(Self::NAP);
            std::thread::sleep(nap);
            self.slept += nap;
            wall = self.started.elapsed();
        }
    }
}

/// What an evaluation checks between two steps: whether it was stopped, and
/// its share of the cores ([`Throttle`]).
pub struct Pacing<'a> {
    stop: &'a CancellationToken,
    throttle: Throttle,
}

impl<'a> Pacing<'a> {
    /// Pacing to `share` of the machine's cores (`None`: unbounded), until
    /// `stop` fires.
    pub fn new(stop: &'a CancellationToken, share: Option<f64>) -> Self {
        Self {
            stop,
            throttle: Throttle::new(share),
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Sleeps while over the share (see [`Throttle::pace`]); then whether
    /// to go on (not stopped).
    pub fn go_on(&mut self) -> bool {
        let stop = self.stop;
        self.throttle.pace(&|| stop.is_cancelled());
        !stop.is_cancelled()
    }

    /// The evaluation's CPU seconds and the seconds it slept, so far.
    pub fn spent(&self) -> (f64, f64) {
        (
            self.throttle.cpu_seconds(),
            self.throttle.slept().as_secs_f64(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_evaluation_threads_cpu_is_counted_and_other_threads_are_not() {
        let spin = |d: Duration| {
            let t0 = Instant::now();
            let mut x = 0u64;
            while t0.elapsed() < d {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        };
        // Another thread's work is not the evaluation's.
        std::thread::spawn(move || spin(Duration::from_millis(300)))
            .join()
            .expect("spinner");
        let measured = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let t = Throttle::new(None);
                spin(Duration::from_millis(300));
                t.cpu_seconds()
            })
            .expect("thread")
            .join()
            .expect("eval thread");
        // The clock ticks at 100 Hz: 0.3 s of spinning reads 0.25-0.35
        // (less if the machine took the core away).
        assert!((0.05..0.4).contains(&measured), "{measured}");
    }

    #[test]
    fn a_throttled_evaluation_sleeps_to_its_share() {
        let (share, work) = (0.1, Duration::from_millis(200));
        let cores = share * std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let (cpu, wall, slept) = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let mut t = Throttle::new(Some(share));
                let t0 = Instant::now();
                let mut x = 0u64;
                let mut worked = Duration::ZERO;
                while worked < work {
                    let slice = Instant::now();
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                    worked += slice.elapsed();
                    t.pace(&|| false);
                }
                (t.cpu_seconds(), t0.elapsed(), t.slept())
            })
            .expect("thread")
            .join()
            .expect("eval thread");
        // Its CPU over its wall time is at most the share (plus one check's
        // worth and the clock's 10 ms ticks).
        let used = cpu / wall.as_secs_f64();
        assert!(used <= cores * 1.3 + 0.05, "{used} cores of {cores}");
        assert!(slept > Duration::ZERO);
    }

    #[test]
    fn unbounded_never_sleeps() {
        let mut t = Throttle::new(None);
        std::thread::sleep(Throttle::EVERY);
        t.pace(&|| false);
        assert_eq!(t.slept(), Duration::ZERO);
        let mut full = Throttle::new(Some(1.0));
        std::thread::sleep(Throttle::EVERY);
        full.pace(&|| false);
        assert_eq!(full.slept(), Duration::ZERO);
    }
}
