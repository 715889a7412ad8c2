//! The threads a minibatch step is spread over: the caller and a few workers
//! of the engine's own, handed each step's shards with one atomic store and
//! waited for by spinning, not by sleeping.
//!
//! A step of a small network takes tens of microseconds, and the serial part
//! between two steps (the gradients added, clipping, Adam) a few. A
//! general-purpose pool's workers fall asleep in that gap, and waking one
//! (and the caller, who sleeps while it waits) costs a system call and a
//! context switch each way, tens of microseconds on a VM: measured here,
//! rayon made CartPole's 128-row step slower on two threads than on one.
//! So a worker here spins for [`SPIN`] after its last shard before it parks,
//! and the caller spins while the workers finish. A parked worker is woken
//! through a condition variable, as a pool would; the spin only spares the
//! wake-ups inside an update. The shards are claimed, not assigned: the
//! caller runs any a worker has not started (one that lost its core to an
//! actor, in local mode). On two cores of an Intel Xeon, CartPole's
//! CleanRL-shaped update (`sebulba bench learner --set learner.threads=2`)
//! ran 356k samples/s with AVX-512 and 299k with AVX2 against rayon's 240k
//! and 191k (one thread: 300k and 200k).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins for the next step before it parks (longer
/// than the serial part between two of CartPole's steps, short enough that
/// a learner waiting for its next batch leaves the core to the actors), and
/// how long the caller spins for the workers' shards before it yields.
const SPIN: Duration = Duration::from_micros(100);

/// [`Shared::step`]'s fields: the step's number in the high 32 bits, its
/// shard count in the next 16, the shards claimed so far in the low 16.
const NUMBER_SHIFT: u32 = 32;
const SHARDS_SHIFT: u32 = 16;
const FIELD: u64 = (1 << 16) - 1;

/// The step's number in a [`Shared::step`] word.
fn number(word: u64) -> u64 {
    word >> NUMBER_SHIFT
}

/// A step's work: `job(i)` runs shard `i`.
type Job<'a> = dyn Fn(usize) + Sync + 'a;

/// What the caller and the workers share.
struct Shared {
    /// The step: its number (bumped once per step), its shard count and the
    /// shards claimed so far, in one word so that a claim names its step and
    /// reads the count of that step (a worker slow to see one step can take
    /// no shard of the next, nor count the last step's shards against the
    /// next one's count and run one twice).
    step: AtomicU64,
    /// The step's job, its lifetime erased: set before `step` is bumped and
    /// only read by the workers taking part, who are all done with it before
    /// [`Team::run`] returns.
    job: Mutex<Option<&'static Job<'static>>>,
    /// This step's shards done.
    done: AtomicUsize,
    /// Whether a worker's shard panicked this step.
    panicked: AtomicBool,
    /// Workers parked, or about to: the caller takes the lock to wake them
    /// only when some are.
    parked: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    stop: AtomicBool,
}

/// The caller's thread and `workers` more, for steps split into shards.
pub struct Team {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Team {
    /// A team of the caller and `workers` threads named `{name}-{i}`; fewer
    /// when the system cannot make them (the caller still runs every step).
    pub fn new(workers: usize, name: &str) -> Self {
        let shared = Arc::new(Shared {
            step: AtomicU64::new(0),
            job: Mutex::new(None),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            parked: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let mut handles = Vec::with_capacity(workers);
        for i in 1..=workers {
            let s = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || work(&s));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    tracing::warn!(threads = workers + 1, made = i, error = %e, "fewer threads for the fused engine");
                    break;
                }
            }
        }
        Self { shared, handles }
    }

    /// The threads a step may use, the caller's included.
    pub fn threads(&self) -> usize {
        self.handles.len() + 1
    }

    /// Runs `job(0)` .. `job(shards - 1)`, each once, on the caller and
    /// the workers, returning when all are done; a worker's panic is raised
    /// here. The shards are claimed one at a time, whoever is free first
    /// (the caller included): a worker that lost its core to another thread
    /// (an actor, in local mode) holds up at most the one shard it took.
    pub fn run(&self, shards: usize, job: &Job<'_>) {
        assert!(
            (1..=FIELD as usize).contains(&shards),
            "{shards} shards: 1 to {FIELD} in a step"
        );
        if shards == 1 || self.handles.is_empty() {
            (0..shards).for_each(job);
            return;
        }
        let s = &*self.shared;
        // SAFETY: the reference is only read by a worker that claimed a
        // shard of this step, before it counts the shard done, and this
        // function does not return before every shard is done, so `job`
        // outlives every use.
        let erased = unsafe { std::mem::transmute::<&Job<'_>, &'static Job<'static>>(job) };
        *s.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(erased);
        s.done.store(0, Ordering::Relaxed);
        let next = (number(s.step.load(Ordering::Relaxed)) + 1) & u64::from(u32::MAX);
        let word = (next << NUMBER_SHIFT) | ((shards as u64) << SHARDS_SHIFT);
        s.step.store(word, Ordering::SeqCst);
        if s.parked.load(Ordering::SeqCst) > 0 {
            let _guard = s.lock.lock().unwrap_or_else(PoisonError::into_inner);
            s.wake.notify_all();
        }
        // A panic in one of the caller's shards is kept until every shard
        // is done: the workers may still be reading `job`.
        let mut mine = None;
        while let Some(i) = claim(s, next) {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| job(i))) {
                mine.get_or_insert(p);
            }
            s.done.fetch_add(1, Ordering::Release);
        }
        let start = Instant::now();
        let mut spins = 0u32;
        while s.done.load(Ordering::Acquire) < shards {
            // Spin while the workers finish their shards; past [`SPIN`],
            // yield in case one lost its core.
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) || start.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        *s.job.lock().unwrap_or_else(PoisonError::into_inner) = None;
        if let Some(p) = mine {
            s.panicked.store(false, Ordering::Relaxed);
            std::panic::resume_unwind(p);
        }
        if s.panicked.swap(false, Ordering::Relaxed) {
            panic!("a fused-engine thread panicked in a minibatch step");
        }
    }
}

/// The next unclaimed shard of the step numbered `step`, or `None` when it
/// has none left or is over. The count compared with is the one in the
/// same word, so it is that step's.
fn claim(s: &Shared, step: u64) -> Option<usize> {
    let mut cur = s.step.load(Ordering::Acquire);
    loop {
        let (claimed, shards) = (cur & FIELD, (cur >> SHARDS_SHIFT) & FIELD);
        if number(cur) != step || claimed >= shards {
            return None;
        }
        match s
            .step
            .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(claimed as usize),
            Err(now) => cur = now,
        }
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        let s = &*self.shared;
        s.stop.store(true, Ordering::SeqCst);
        {
            let _guard = s.lock.lock().unwrap_or_else(PoisonError::into_inner);
            s.wake.notify_all();
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// A worker's loop: wait for a step, claim its shards while any are left.
fn work(s: &Shared) {
    let mut seen = 0u64;
    loop {
        let Some(step) = next_step(s, seen) else {
            return;
        };
        seen = number(step);
        while let Some(i) = claim(s, seen) {
            let job = *s.job.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(job) = job
                && catch_unwind(AssertUnwindSafe(|| job(i))).is_err()
            {
                s.panicked.store(true, Ordering::Relaxed);
            }
            s.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// The first step after the one numbered `seen` (its word), spinning for
/// [`SPIN`] then parked; `None` when the team is dropped.
fn next_step(s: &Shared, seen: u64) -> Option<u64> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let step = s.step.load(Ordering::Acquire);
        if number(step) != seen {
            return Some(step);
        }
        if s.stop.load(Ordering::Relaxed) {
            return None;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) && start.elapsed() > SPIN {
            break;
        }
        std::hint::spin_loop();
    }
    let mut guard = s.lock.lock().unwrap_or_else(PoisonError::into_inner);
    s.parked.fetch_add(1, Ordering::SeqCst);
    loop {
        let step = s.step.load(Ordering::SeqCst);
        let new = number(step) != seen;
        if new || s.stop.load(Ordering::SeqCst) {
            s.parked.fetch_sub(1, Ordering::SeqCst);
            return new.then_some(step);
        }
        guard = s.wake.wait(guard).unwrap_or_else(PoisonError::into_inner);
    }
}

#[cfg(test)]
mod tests;
