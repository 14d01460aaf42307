//! Measurement helpers shared by the plain-binary benchmarks (`benches/placement.rs`,
//! `examples/check_big.rs`): CPU time beside wall time, so that a run on a busy machine shows
//! it, and the peak resident memory. Linux only (read from `/proc`); elsewhere they report
//! zero and `unknown`.

use std::time::Duration;

/// The numeric command-line arguments, in order (`cargo bench` adds `--bench`, which is
/// skipped with anything else that is not a number).
pub fn numeric_args() -> Vec<usize> {
    std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect()
}

/// The shortest of `times`.
pub fn best(times: &[Duration]) -> Duration {
    times.iter().min().copied().unwrap_or_default()
}

/// CPU time of the whole process (all threads), from `/proc/self/stat` (10 ms ticks).
pub fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_millis(ticks * 10)
}

/// The peak resident memory of the process so far (`VmHWM`).
pub fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}
