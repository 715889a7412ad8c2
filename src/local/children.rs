//! `sebulba local`'s actors as child processes of the same binary
//! (`run.local_actors_as`): each runs `sebulba actor` against the local
//! learner and parameter server over loopback gRPC, exactly as a cluster's
//! actor does (the same join, credits, accounting and shutdown). A child that
//! dies is started again and counted, up to `run.actor_restarts` times; a
//! slot given up then ends the run or not by `run.on_actor_give_up`. When
//! the run stops the children get SIGTERM, then SIGKILL; and each is started
//! with the kernel's parent-death signal, so none outlives a parent killed
//! with SIGKILL. Their memory and failures go to the learner's summary
//! through [`ActorProcesses`], and their resident sizes to the metrics.

use super::process::{ChildProcess, describe};
use sebulba_core::config::OnActorGiveUp;
use sebulba_learner::processes::{ActorProcesses, ChildReport};
use std::ffi::OsString;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

/// How often the children's memory is read and published.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);
/// How long stopped children may take to exit before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Variables of the parent's that must not reach an actor child: its metrics
/// address (one port per process) and its role's flags.
const PARENT_ONLY: [&str; 3] = [
    "SEBULBA_METRICS_ADDR",
    "SEBULBA_METRICS_HOLD_SECS",
    "SEBULBA_ACTORS",
];

/// What every actor child is started with.
#[derive(Clone, Debug)]
pub struct ChildArgs {
    pub learner_url: String,
    pub ps_url: String,
    pub send_queue: usize,
    /// The parent's tokens and TLS files, as `SEBULBA_*` variables.
    pub security: Vec<(&'static str, OsString)>,
}

impl ChildArgs {
    fn command(&self, name: &str) -> std::io::Result<Command> {
        let mut c = Command::new(std::env::current_exe()?);
        c.arg("actor")
            .args(["--learner", &self.learner_url])
            .args(["--param-server", &self.ps_url])
            .args(["--name", name])
            .args(["--send-queue", &self.send_queue.to_string()])
            .args(["--device", "cpu"])
            .envs(self.security.iter().cloned())
            .stdin(std::process::Stdio::null());
        for var in PARENT_ONLY {
            c.env_remove(var);
        }
        die_with_parent(&mut c);
        Ok(c)
    }
}

/// Asks the kernel to SIGKILL the child when the thread that started it
/// ends (the supervisor's, which outlives every child it starts).
#[cfg(target_os = "linux")]
fn die_with_parent(c: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls (prctl,
    // getppid) run, and they touch no memory of the parent's.
    unsafe {
        c.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the signal was asked for.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the parent exited"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}

/// What one actor slot runs now.
enum Running {
    Process(ChildProcess),
    /// Its last process finished its work (exit code 0).
    Finished,
    /// Died more than `run.actor_restarts` times.
    GivenUp,
}

struct Slot {
    report: ChildReport,
    running: Running,
}

/// The supervisor's settings and where it reports.
pub struct Supervision {
    pub args: ChildArgs,
    /// The table the learner's summary reads.
    pub table: Arc<ActorProcesses>,
    /// Cancelled to end the run when its actors cannot go on.
    pub end_run: CancellationToken,
}

impl Slot {
    fn start(args: &ChildArgs, name: &str, max_restarts: u32) -> Self {
        let mut slot = Slot {
            report: ChildReport {
                name: name.to_string(),
                ..Default::default()
            },
            running: Running::Finished,
        };
        slot.spawn(args, max_restarts);
        slot
    }

    /// Starts the slot's next process; one that cannot start counts as a
    /// failure.
    fn spawn(&mut self, args: &ChildArgs, max_restarts: u32) -> bool {
        let name = self.report.name.clone();
        match args
            .command(&name)
            .and_then(|c| ChildProcess::spawn(c, &name))
        {
            Ok(p) => {
                info!(name = %name, pid = p.pid(), "actor process started");
                self.report.pids.push(p.pid());
                self.running = Running::Process(p);
                false
            }
            Err(e) => self.failed(format!("cannot start: {e}"), args, max_restarts),
        }
    }

    /// Looks at the child once: a finished one is let go, a dead one started
    /// again (up to `max_restarts` times). True when the slot was given up
    /// just now.
    fn check(&mut self, args: &ChildArgs, max_restarts: u32) -> bool {
        let Running::Process(p) = &mut self.running else {
            return false;
        };
        let exit = match p.reap(false) {
            Ok(Some(exit)) => exit,
            Ok(None) => return false,
            Err(e) => {
                warn!(name = %self.report.name, "waiting for an actor process: {e}");
                return false;
            }
        };
        let last_line = p.last_line();
        self.running = Running::Finished;
        self.note_peak(exit.peak_rss);
        if exit.status.success() {
            info!(name = %self.report.name, "actor process finished");
            return false;
        }
        let why = match last_line {
            Some(line) => format!("{}; its last stderr line: {line}", describe(exit.status)),
            None => describe(exit.status),
        };
        self.failed(why, args, max_restarts)
    }

    /// The slot's process failed for `why`: starts another, or gives the
    /// slot up after `max_restarts` restarts (true then).
    fn failed(&mut self, why: String, args: &ChildArgs, max_restarts: u32) -> bool {
        let name = self.report.name.clone();
        self.report.last_failure = Some(why.clone());
        if self.report.restarts < max_restarts {
            self.report.restarts += 1;
            warn!(name = %name, failure = %why, restarts = self.report.restarts, "actor process died: starting it again");
            std::thread::sleep(Duration::from_millis(200));
            return self.spawn(args, max_restarts);
        }
        error!(name = %name, failure = %why, restarts = self.report.restarts, "actor process died after {max_restarts} restarts: giving it up");
        self.running = Running::GivenUp;
        self.report.given_up = true;
        true
    }

    fn note_peak(&mut self, bytes: u64) {
        self.report.peak_rss_mib = self.report.peak_rss_mib.max(mib(bytes));
    }

    /// Reads the running process's memory into the report.
    fn read_memory(&mut self) {
        let now = match &mut self.running {
            Running::Process(p) => p.memory(),
            _ => None,
        };
        let (rss, peak) = now.unwrap_or((0, 0));
        self.report.rss_mib = mib(rss);
        self.note_peak(peak);
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

impl Supervision {
    /// Slot `i` was given up: the run ends, or goes on by the rule.
    fn given_up(&self, slots: &mut [Slot], i: usize) {
        let slot = &slots[i].report;
        let why = slot.last_failure.as_deref().unwrap_or("unknown");
        let failed = format!(
            "actor process {} was given up after {} restarts (run.actor_restarts); its last failure: {why}",
            slot.name, slot.restarts
        );
        let left = slots
            .iter()
            .filter(|s| !matches!(s.running, Running::GivenUp))
            .count();
        // The summary may be written as soon as the run is told to end.
        self.publish(slots);
        match self.table.on_give_up() {
            OnActorGiveUp::Stop => {
                error!("{failed}; stopping the run (run.on_actor_give_up = \"stop\")");
                self.table.fail(failed);
                self.end_run.cancel();
            }
            OnActorGiveUp::Continue if left == 0 => {
                error!("{failed}; no actor process is left: stopping the run");
                self.table
                    .fail(format!("every actor process was given up; {failed}"));
                self.end_run.cancel();
            }
            OnActorGiveUp::Continue => warn!(
                "{failed}; going on with {left} of {} actor processes (run.on_actor_give_up = \"continue\")",
                slots.len()
            ),
        }
    }

    /// The slots' reports to the table, and every process's resident size
    /// (this one's as `parent`) to the metrics.
    fn publish(&self, slots: &mut [Slot]) {
        for slot in slots.iter_mut() {
            slot.read_memory();
            let name = slot.report.name.clone();
            let bytes = slot.report.rss_mib * 1024.0 * 1024.0;
            metrics::gauge!("sebulba_local_rss_bytes", "process" => name).set(bytes);
        }
        if let Some(own) = sebulba_core::memory::rss_bytes() {
            metrics::gauge!("sebulba_local_rss_bytes", "process" => "parent").set(own as f64);
        }
        self.table
            .update(slots.iter().map(|s| s.report.clone()).collect());
    }
}

/// Starts an actor child per name and keeps them running until each has
/// finished or been given up, or `stop` fires (then stops them). Blocks: run
/// it on a thread of its own, which the children's parent-death signal is
/// tied to.
pub fn supervise(s: &Supervision, names: &[String], stop: &CancellationToken) {
    let max = s.table.max_restarts();
    let mut slots: Vec<Slot> = names.iter().map(|n| Slot::start(&s.args, n, max)).collect();
    for i in 0..slots.len() {
        if matches!(slots[i].running, Running::GivenUp) {
            s.given_up(&mut slots, i);
        }
    }
    // The first reading once the children have started (not mid-exec).
    let mut published = Instant::now();
    while !stop.is_cancelled()
        && slots
            .iter()
            .any(|s| matches!(s.running, Running::Process(_)))
    {
        for i in 0..slots.len() {
            if slots[i].check(&s.args, max) {
                s.given_up(&mut slots, i);
            }
        }
        if published.elapsed() >= PUBLISH_EVERY {
            s.publish(&mut slots);
            published = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    s.publish(&mut slots);
    terminate(&mut slots);
    s.publish(&mut slots);
}

/// SIGTERM to every child still running; SIGKILL to those still running
/// after [`STOP_GRACE`]. Each is reaped, its peak memory kept.
fn terminate(slots: &mut [Slot]) {
    for slot in slots.iter() {
        if let Running::Process(p) = &slot.running {
            p.signal(libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + STOP_GRACE;
    loop {
        let mut running = 0;
        for slot in slots.iter_mut() {
            let Running::Process(p) = &mut slot.running else {
                continue;
            };
            let late = Instant::now() >= deadline;
            if late {
                warn!(name = %slot.report.name, "actor process did not stop in {STOP_GRACE:?}: killing it");
                p.signal(libc::SIGKILL);
            }
            match p.reap(late) {
                Ok(Some(exit)) => {
                    slot.running = Running::Finished;
                    slot.note_peak(exit.peak_rss);
                }
                Ok(None) => running += 1,
                Err(e) => {
                    warn!(name = %slot.report.name, "waiting for an actor process: {e}");
                    slot.running = Running::Finished;
                }
            }
        }
        if running == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
