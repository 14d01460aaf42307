//! What the runtime's bench binaries share: this process's CPU time, and the one number a
//! bench takes on its command line.

use rustix::time::{ClockId, clock_gettime};
use std::time::Duration;

/// CPU time of the whole process (`CLOCK_PROCESS_CPUTIME_ID`: every thread counts).
pub fn cpu() -> Duration {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// The first argument that is not a flag (cargo passes `--bench`), as a number, or `default`.
pub fn number_arg<T: std::str::FromStr>(default: T) -> T {
    std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}
