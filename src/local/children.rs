//! `sebulba local`'s actors as child processes of the same binary
//! (`run.local_actors_as`): each runs `sebulba actor` against the local
//! learner and parameter server over loopback gRPC, exactly as a cluster's
//! actor does (the same join, credits, accounting and shutdown). A child that
//! dies is started again and counted; when the run stops the children get
//! SIGTERM, then SIGKILL; and each is started with the kernel's parent-death
//! signal, so none outlives a parent killed with SIGKILL.

use std::ffi::OsString;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

/// Times a child is started again before its slot is given up.
const MAX_RESTARTS: u32 = 10;
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

/// What became of one actor slot.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ChildRecord {
    pub name: String,
    /// Every process started for the slot, first to last.
    pub pids: Vec<u32>,
    pub restarts: u32,
}

struct Slot {
    record: ChildRecord,
    child: Option<Child>,
}

impl Slot {
    fn start(args: &ChildArgs, name: &str) -> Self {
        let mut slot = Slot {
            record: ChildRecord {
                name: name.to_string(),
                ..Default::default()
            },
            child: None,
        };
        slot.spawn(args);
        slot
    }

    fn spawn(&mut self, args: &ChildArgs) {
        let name = &self.record.name;
        match args.command(name).and_then(|mut c| c.spawn()) {
            Ok(child) => {
                info!(name = %name, pid = child.id(), "actor process started");
                self.record.pids.push(child.id());
                self.child = Some(child);
            }
            Err(e) => error!(name = %name, "cannot start an actor process: {e}"),
        }
    }

    /// Looks at the child once: a finished one is let go, a dead one started
    /// again (up to [`MAX_RESTARTS`]).
    fn check(&mut self, args: &ChildArgs) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        let status = match child.try_wait() {
            Ok(Some(status)) => status,
            Ok(None) => return,
            Err(e) => {
                warn!(name = %self.record.name, "waiting for an actor process: {e}");
                return;
            }
        };
        self.child = None;
        let name = &self.record.name;
        if status.success() {
            info!(name = %name, "actor process finished");
        } else if self.record.restarts < MAX_RESTARTS {
            self.record.restarts += 1;
            warn!(name = %name, status = %describe(status), restarts = self.record.restarts, "actor process died: starting it again");
            std::thread::sleep(Duration::from_millis(200));
            self.spawn(args);
        } else {
            error!(name = %name, status = %describe(status), "actor process died {MAX_RESTARTS} times: giving it up");
        }
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => status.to_string(),
    }
}

/// Starts an actor child per name and keeps them running until each has
/// finished or `stop` fires (then stops them); returns what became of each.
/// Blocks: run it on a thread of its own, which the children's parent-death
/// signal is tied to.
pub fn supervise(args: ChildArgs, names: &[String], stop: CancellationToken) -> Vec<ChildRecord> {
    let mut slots: Vec<Slot> = names.iter().map(|n| Slot::start(&args, n)).collect();
    while !stop.is_cancelled() && slots.iter().any(|s| s.child.is_some()) {
        for slot in &mut slots {
            slot.check(&args);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    terminate(&mut slots);
    slots.into_iter().map(|s| s.record).collect()
}

/// SIGTERM to every child still running; SIGKILL to those still running
/// after [`STOP_GRACE`].
fn terminate(slots: &mut [Slot]) {
    let running = |slots: &mut [Slot]| -> Vec<usize> {
        (0..slots.len())
            .filter(|&i| {
                slots[i]
                    .child
                    .as_mut()
                    .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
            })
            .collect()
    };
    for i in running(slots) {
        if let Some(c) = &slots[i].child {
            // SAFETY: kill(2) with a pid this process started and has not
            // reaped, so it names that child.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
            }
        }
    }
    let deadline = Instant::now() + STOP_GRACE;
    while !running(slots).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in running(slots) {
        if let Some(c) = slots[i].child.as_mut() {
            warn!(name = %slots[i].record.name, "actor process did not stop in {STOP_GRACE:?}: killing it");
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
