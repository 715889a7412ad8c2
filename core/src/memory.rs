//! The process's memory, for summaries and benchmarks: peak resident set size
//! (`VmHWM`) as the kernel reports it. Linux only; `None` elsewhere.

/// Peak resident set size of this process so far, in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// Current resident set size of this process, in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_peak_is_at_least_the_current_and_sees_a_large_allocation() {
        let before = peak_rss_bytes().expect("VmHWM on Linux");
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let now = rss_bytes().expect("VmRSS on Linux");
        let peak = peak_rss_bytes().expect("VmHWM on Linux");
        assert!(peak >= now, "peak {peak} < current {now}");
        assert!(
            peak >= before + (32 << 20),
            "a 64 MiB block raised the peak: {before} -> {peak}"
        );
    }
}
