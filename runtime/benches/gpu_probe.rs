//! What the agent's NVML probe costs (issue 21: under 0.1% of one core at 1 Hz, process
//! enumeration off the hot path).
//!
//! ```text
//! cargo bench -p berth-runtime --bench gpu_probe            # 30 s at 1 Hz
//! cargo bench -p berth-runtime --bench gpu_probe -- 60      # seconds at 1 Hz
//! ```
//!
//! Prints the cost of opening NVML, of one sample without and with process (and MIG)
//! enumeration, in wall and CPU time of this process, then samples at the agent's cadence (1 Hz,
//! processes every tenth sample) for the given seconds and prints the CPU time used as a share
//! of one core. CPU time is the whole process's (`CLOCK_PROCESS_CPUTIME_ID`): threads NVML
//! starts count too. Without an NVIDIA driver it says so and exits 0.

mod support;

use berth_runtime::agent::gpu::{GpuProbe, NvmlProbe};
use std::time::{Duration, Instant};

/// Mean wall and CPU microseconds of `n` samples.
fn measure(probe: &mut NvmlProbe, n: u32, processes: bool) -> (f64, f64) {
    let (wall, cpu0) = (Instant::now(), support::cpu());
    for _ in 0..n {
        std::hint::black_box(probe.sample(processes).expect("sample"));
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(n);
    (per(wall.elapsed()), per(support::cpu() - cpu0))
}

fn main() {
    let seconds: u32 = support::number_arg(30);
    let (wall, cpu0) = (Instant::now(), support::cpu());
    let mut probe = match NvmlProbe::open() {
        Ok(p) => p,
        Err(e) => {
            println!("gpu_probe: {e}: nothing to measure on this machine");
            return;
        }
    };
    println!(
        "{}: opened in {:.1} ms wall, {:.1} ms CPU",
        probe.describe(),
        wall.elapsed().as_secs_f64() * 1e3,
        (support::cpu() - cpu0).as_secs_f64() * 1e3
    );
    let devices = probe.sample(true).expect("sample");
    for d in &devices {
        println!(
            "device {}: {} ({} MiB, {} processes, MIG {})",
            d.index,
            d.name,
            d.memory_total >> 20,
            d.processes.as_ref().map_or(0, Vec::len),
            match &d.mig {
                None => "absent".to_string(),
                Some(m) if m.enabled => format!("on, {} instances", m.instances.len()),
                Some(_) => "off".to_string(),
            }
        );
    }
    measure(&mut probe, 50, false);
    let (light_wall, light_cpu) = measure(&mut probe, 2000, false);
    println!("sample without processes (2000): {light_wall:.1} µs wall, {light_cpu:.1} µs CPU");
    let (full_wall, full_cpu) = measure(&mut probe, 200, true);
    println!("sample with processes and MIG (200): {full_wall:.1} µs wall, {full_cpu:.1} µs CPU");

    // The agent's cadence: one sample a second, processes every tenth.
    let (wall, cpu0) = (Instant::now(), support::cpu());
    for tick in 0..seconds {
        let next = wall + Duration::from_secs(u64::from(tick) + 1);
        std::hint::black_box(probe.sample(tick % 10 == 0).expect("sample"));
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let (elapsed, used) = (wall.elapsed(), support::cpu() - cpu0);
    println!(
        "at 1 Hz for {seconds} s (processes every 10th): {:.2} ms CPU in {:.1} s = {:.4}% of one core (goal < 0.1%)",
        used.as_secs_f64() * 1e3,
        elapsed.as_secs_f64(),
        100.0 * used.as_secs_f64() / elapsed.as_secs_f64()
    );
}
