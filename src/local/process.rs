//! One actor child process: its stderr passes through a pipe (each line goes
//! on to this process's stderr, and the last is kept for a failure report),
//! and it is reaped with `wait4`, which gives the kernel's account of its
//! peak resident memory (`ru_maxrss`) as it ends.

use std::io::{BufRead, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest stderr line kept for a report, in bytes.
const LINE_KEPT: usize = 400;

/// A started child, not yet reaped.
pub struct ChildProcess {
    /// Held for its pipes; never waited through (`wait4` reaps).
    _child: Child,
    pid: u32,
    last_line: Arc<Mutex<Option<String>>>,
    relay: Option<JoinHandle<()>>,
    /// The largest `VmHWM` read while it ran.
    peak_seen: u64,
}

/// How a child ended.
pub struct Exit {
    pub status: ExitStatus,
    /// Its peak resident size, bytes (the kernel's `ru_maxrss`).
    pub peak_rss: u64,
}

impl ChildProcess {
    /// Starts `cmd` with its stderr relayed, on a thread named for `name`.
    pub fn spawn(mut cmd: Command, name: &str) -> std::io::Result<Self> {
        let mut child = cmd.stderr(Stdio::piped()).spawn()?;
        let last_line = Arc::new(Mutex::new(None));
        let relay = child.stderr.take().and_then(|pipe| {
            let last = last_line.clone();
            std::thread::Builder::new()
                .name(format!("{name}-stderr"))
                .spawn(move || relay(pipe, &last))
                .ok()
        });
        Ok(Self {
            pid: child.id(),
            _child: child,
            last_line,
            relay,
            peak_seen: 0,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Resident now and the peak so far, bytes (None once it has exited).
    pub fn memory(&mut self) -> Option<(u64, u64)> {
        let (rss, hwm) = sebulba_core::memory::rss_of(self.pid)?;
        self.peak_seen = self.peak_seen.max(hwm);
        Some((rss, self.peak_seen))
    }

    /// Reaps the child if it has exited (`block`: waits until it does).
    pub fn reap(&mut self, block: bool) -> std::io::Result<Option<Exit>> {
        use std::os::unix::process::ExitStatusExt;
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if block { 0 } else { libc::WNOHANG };
        // SAFETY: wait4 on a pid this process started and has not reaped
        // (the caller drops `self` once this returns an exit), with pointers
        // to locals it may write.
        let r = unsafe { libc::wait4(self.pid as libc::pid_t, &mut status, flags, &mut usage) };
        match r {
            0 => Ok(None),
            -1 => Err(std::io::Error::last_os_error()),
            _ => {
                // Linux gives ru_maxrss in KiB.
                let peak = u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024;
                Ok(Some(Exit {
                    status: ExitStatus::from_raw(status),
                    peak_rss: peak.max(self.peak_seen),
                }))
            }
        }
    }

    /// Sends `signal` (the child is not reaped yet: the pid is still its).
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) with a pid this process started and has not reaped.
        unsafe {
            libc::kill(self.pid as libc::pid_t, signal);
        }
    }

    /// The last line the child wrote to stderr; after it exited, waits up to
    /// half a second for the relay to read what is left in the pipe (a
    /// grandchild may hold the pipe open longer).
    pub fn last_line(&mut self) -> Option<String> {
        if let Some(relay) = self.relay.take() {
            let deadline = Instant::now() + Duration::from_millis(500);
            while !relay.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !relay.is_finished() {
                self.relay = Some(relay);
            }
        }
        self.last_line
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Copies `pipe` to this process's stderr line by line, keeping the last
/// non-blank line (lossily decoded, cut to [`LINE_KEPT`]).
fn relay(pipe: impl std::io::Read, last: &Mutex<Option<String>>) {
    let mut reader = std::io::BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let _ = std::io::stderr().lock().write_all(&line);
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if !text.is_empty() {
                    let cut = text
                        .char_indices()
                        .take_while(|(i, _)| *i < LINE_KEPT)
                        .map(|(_, c)| c)
                        .collect();
                    *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(cut);
                }
            }
        }
    }
}

/// `exit code 3`, `signal 9 (SIGKILL)`.
pub fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => match signal_name(signal) {
            Some(name) => format!("signal {signal} ({name})"),
            None => format!("signal {signal}"),
        },
        _ => status.to_string(),
    }
}

/// The name of the signals that end a process in practice.
fn signal_name(signal: libc::c_int) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> ChildProcess {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        ChildProcess::spawn(c, "test").expect("sh starts")
    }

    #[test]
    fn a_child_is_reaped_with_its_status_its_peak_and_its_last_line() {
        let mut p = sh("echo first >&2; printf 'the last words\\n\\n' >&2; exit 3");
        let exit = p.reap(true).expect("wait4").expect("exited");
        assert_eq!(describe(exit.status), "exit code 3");
        assert!(exit.peak_rss > 0, "ru_maxrss of sh");
        assert_eq!(p.last_line().as_deref(), Some("the last words"));

        let mut p = sh("sleep 30");
        assert!(p.reap(false).expect("wait4").is_none(), "still running");
        let (rss, peak) = p.memory().expect("/proc/PID/status while it runs");
        assert!(rss > 0 && peak >= rss);
        p.signal(libc::SIGKILL);
        let exit = p.reap(true).expect("wait4").expect("killed");
        assert_eq!(describe(exit.status), "signal 9 (SIGKILL)");
        assert!(exit.peak_rss >= peak, "{} < {peak}", exit.peak_rss);
        assert_eq!(p.last_line(), None, "it wrote nothing");
    }
}
