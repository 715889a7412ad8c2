//! CPU time from `/proc`, for the summary and the evaluator: a thread's or a
//! process's user + system time, and a process tree's. Linux only; nothing
//! (`None`, 0) elsewhere.

/// utime + stime of a `/proc/.../stat` line, in clock ticks (fields 14 and
/// 15; the name in field 2 may hold spaces and parentheses, so fields are
/// counted after its last `)`). With `children`, also cutime + cstime
/// (fields 16 and 17: the children the process has waited for).
pub fn stat_ticks(stat: &str, children: bool) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let mut next = || -> Option<u64> { fields.next()?.parse().ok() };
    let own = next()? + next()?;
    Some(if children {
        own + next()? + next()?
    } else {
        own
    })
}

/// CPU seconds of the calling thread, to the nanosecond
/// (`CLOCK_THREAD_CPUTIME_ID`; `/proc` counts in 10 ms ticks).
pub fn this_thread_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; the clock id is a constant.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
    if ok {
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    } else {
        0.0
    }
}

/// The calling thread's id (Linux's `gettid`).
#[cfg(target_os = "linux")]
pub fn this_thread_id() -> u32 {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    u32::try_from(tid).unwrap_or(0)
}

/// No thread ids in `/proc` elsewhere.
#[cfg(not(target_os = "linux"))]
pub fn this_thread_id() -> u32 {
    0
}

/// The parent pid of a `/proc/<pid>/stat` line (field 4).
fn stat_ppid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// CPU seconds of this process and its children, live ones included (the
/// actors `sebulba local` runs as processes): this process's own time and
/// its waited-for children's, plus each live child's own and its
/// waited-for children's. `None` where `/proc` does not say.
pub fn process_tree_seconds() -> Option<f64> {
    let me = std::process::id();
    let own = stat_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?, true)?;
    let children: u64 = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| stat_ppid(stat) == Some(me))
        .filter_map(|stat| stat_ticks(&stat, true))
        .sum();
    Some((own + children) as f64 / ticks_per_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_ticks_whatever_the_name_holds() {
        // After the name: state ppid pgrp session tty tpgid flags minflt
        // cminflt majflt cmajflt utime stime cutime cstime ...
        let line = "4242 (sebu (ba) x) R 7 2 3 4 5 6 7 8 9 10 123 45 6 4 20 0 1";
        assert_eq!(stat_ticks(line, false), Some(168));
        assert_eq!(stat_ticks(line, true), Some(178));
        assert_eq!(stat_ppid(line), Some(7));
        assert_eq!(stat_ticks("4242 (x) R 1", false), None);
        assert_eq!(stat_ticks("no name here", false), None);
    }

    #[test]
    fn this_threads_clock_counts_its_own_work_to_the_nanosecond() {
        let t0 = this_thread_seconds();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spent = this_thread_seconds() - t0;
        // Below the wall time it ran, and not rounded to a 10 ms tick.
        assert!(spent > 0.005 && spent <= 0.031, "{spent}");
        assert_ne!(this_thread_id(), 0);
    }

    #[test]
    fn a_process_tree_counts_a_live_childs_time() {
        let before = process_tree_seconds().expect("linux /proc");
        // A child that spins 0.4 s of CPU and is still alive when read.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "end=$(($(date +%s%N) + 400000000)); while [ $(date +%s%N) -lt $end ]; do :; done; sleep 5"])
            .spawn()
            .expect("sh");
        std::thread::sleep(std::time::Duration::from_millis(900));
        let after = process_tree_seconds().expect("linux /proc");
        let _ = child.kill();
        let _ = child.wait();
        assert!(after - before >= 0.15, "{before} -> {after}");
    }
}
