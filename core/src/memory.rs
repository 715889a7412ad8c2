//! The process's memory, for summaries and benchmarks: resident set size
//! (`VmRSS`, `VmHWM`) as the kernel reports it, and the allocator's own
//! account (glibc's `mallinfo2`). Linux only; `None` elsewhere.

/// Peak resident set size of this process so far, in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// Current resident set size of this process, in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

/// Current and peak resident set size of process `pid` (`VmRSS`,
/// `VmHWM`), in bytes; None once it has exited or where the OS does not say.
pub fn rss_of(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some((
        field_kib(&status, "VmRSS:")? * 1024,
        field_kib(&status, "VmHWM:")? * 1024,
    ))
}

/// What the allocator holds: bytes handed out and in use, and bytes freed
/// but kept (not returned to the kernel, still resident if touched).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heap {
    pub in_use: u64,
    pub free: u64,
}

/// The allocator's account of this process (glibc's `mallinfo2`: the main
/// arena's and every thread arena's chunks, and blocks mapped on their own).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn heap() -> Option<Heap> {
    // SAFETY: mallinfo2 takes no arguments and only reads the allocator's
    // statistics under its own locks.
    let m = unsafe { libc::mallinfo2() };
    Some(Heap {
        in_use: (m.uordblks + m.hblkhd) as u64,
        free: m.fordblks as u64,
    })
}

/// No allocator statistics off glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn heap() -> Option<Heap> {
    None
}

fn status_kib(key: &str) -> Option<u64> {
    field_kib(&std::fs::read_to_string("/proc/self/status").ok()?, key)
}

fn field_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This module's tests allocate and measure large blocks one at a time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn the_heap_in_use_counts_a_large_allocation_and_its_release() {
        let _one = ONE_AT_A_TIME.lock();
        // 64 MiB, checked against 48: other tests' blocks may come or go.
        let before = heap().expect("mallinfo2").in_use;
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let during = heap().expect("mallinfo2").in_use;
        assert!(
            during >= before + (48 << 20),
            "64 MiB more in use: {before} -> {during}"
        );
        drop(block);
        let after = heap().expect("mallinfo2").in_use;
        assert!(
            after + (48 << 20) <= during,
            "released: {during} -> {after}"
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_peak_is_at_least_the_current_and_sees_a_large_allocation() {
        let _one = ONE_AT_A_TIME.lock();
        // The peak may already be above what this block adds (another
        // test's): the block shows in the current size, the peak covers it.
        let before = rss_bytes().expect("VmRSS on Linux");
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let now = rss_bytes().expect("VmRSS on Linux");
        let peak = peak_rss_bytes().expect("VmHWM on Linux");
        assert!(peak >= now, "peak {peak} < current {now}");
        // The same figures through the pid, as a parent reads its children.
        let (rss, hwm) = rss_of(std::process::id()).expect("/proc/PID/status");
        assert!(rss >= before + (32 << 20) && hwm >= rss, "{rss} {hwm}");
        assert!(
            now >= before + (32 << 20),
            "a 64 MiB block is resident: {before} -> {now}"
        );
    }
}
