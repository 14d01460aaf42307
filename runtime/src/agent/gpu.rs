//! Live GPU use behind the [`GpuProbe`] trait: NVML through nvml-wrapper (the library is
//! loaded at run time, so `berth` links and runs on machines without an NVIDIA driver), or
//! samples recorded earlier and replayed from a file.
//!
//! Must never: crash or fail the agent when NVML is missing; "no NVML: …" is a state.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One device at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSample {
    pub index: u32,
    pub name: String,
    /// Bytes.
    pub memory_total: u64,
    pub memory_used: u64,
    /// Percent of time a kernel ran over the driver's last sample period.
    pub utilization: u32,
    /// The device's UUID (`GPU-…`), when the driver gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Power draw in milliwatts, on devices that measure it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_mw: Option<u32>,
    /// GPU temperature, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    /// SM clock, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<u32>,
    /// Compute processes, when enumerated this time (it costs milliseconds: done less often).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Vec<GpuProcess>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// Bytes, when the driver reports it.
    pub used_memory: Option<u64>,
    /// The workload the process belongs to, filled in by the agent (or already present in a
    /// recording made by one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
}

/// A source of GPU samples.
pub trait GpuProbe: Send {
    /// Every device now; with `processes`, also the compute processes on each.
    fn sample(&mut self, processes: bool) -> Result<Vec<GpuSample>, String>;
    /// What the probe is, for status: `nvml (driver 550.54)`, `recorded (FILE)`.
    fn describe(&self) -> String;
}

/// NVML, opened once.
pub struct NvmlProbe {
    nvml: nvml_wrapper::Nvml,
    driver: String,
}

impl NvmlProbe {
    /// Loads and initialises NVML; the error reads "no NVML: …".
    pub fn open() -> Result<NvmlProbe, String> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("no NVML: {e}"))?;
        let driver = nvml
            .sys_driver_version()
            .unwrap_or_else(|_| "unknown".into());
        Ok(NvmlProbe { nvml, driver })
    }
}

impl GpuProbe for NvmlProbe {
    fn sample(&mut self, processes: bool) -> Result<Vec<GpuSample>, String> {
        let count = self.nvml.device_count().map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for index in 0..count {
            let device = self
                .nvml
                .device_by_index(index)
                .map_err(|e| e.to_string())?;
            let memory = device.memory_info().map_err(|e| e.to_string())?;
            let utilization = device.utilization_rates().map_err(|e| e.to_string())?.gpu;
            let processes = if processes {
                let list = device
                    .running_compute_processes()
                    .map_err(|e| e.to_string())?;
                Some(
                    list.into_iter()
                        .map(|p| GpuProcess {
                            pid: p.pid,
                            used_memory: match p.used_gpu_memory {
                                nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                                nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                            },
                            workload: None,
                        })
                        .collect(),
                )
            } else {
                None
            };
            // What a device does not measure (power on some boards) is left out, not an error.
            out.push(GpuSample {
                index,
                name: device.name().unwrap_or_else(|_| "unknown".into()),
                memory_total: memory.total,
                memory_used: memory.used,
                utilization,
                uuid: device.uuid().ok(),
                power_mw: device.power_usage().ok(),
                temperature_c: device
                    .temperature(nvml_wrapper::enum_wrappers::device::TemperatureSensor::Gpu)
                    .ok(),
                sm_clock_mhz: device
                    .clock_info(nvml_wrapper::enum_wrappers::device::Clock::SM)
                    .ok(),
                processes,
            });
        }
        Ok(out)
    }

    fn describe(&self) -> String {
        format!("nvml (driver {})", self.driver)
    }
}

/// Samples replayed from a file of JSON lines, one line per sampling instant (a list of
/// [`GpuSample`]); after the last line the last one repeats. For sites that export samples
/// from another tool, and for testing reclaim on machines without a GPU.
pub struct RecordedProbe {
    lines: Vec<Vec<GpuSample>>,
    next: usize,
    path: String,
}

impl RecordedProbe {
    pub fn open(path: &Path) -> Result<RecordedProbe, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read GPU samples `{}`: {e}", path.display()))?;
        let lines = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map_err(|e| format!("`{}` line {}: {e}", path.display(), i + 1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RecordedProbe {
            lines,
            next: 0,
            path: path.display().to_string(),
        })
    }
}

impl GpuProbe for RecordedProbe {
    fn sample(&mut self, processes: bool) -> Result<Vec<GpuSample>, String> {
        let Some(line) = self.lines.get(self.next).or(self.lines.last()) else {
            return Ok(Vec::new());
        };
        self.next = (self.next + 1).min(self.lines.len());
        let mut line = line.clone();
        if !processes {
            line.iter_mut().for_each(|g| g.processes = None);
        }
        Ok(line)
    }

    fn describe(&self) -> String {
        format!("recorded ({})", self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_missing_is_a_reported_state() {
        // This machine has no NVIDIA driver; on one that has, the probe opens.
        if let Err(e) = NvmlProbe::open() {
            assert!(e.starts_with("no NVML: "), "{e}");
        }
    }

    #[test]
    fn recorded_samples_replay_in_order_then_hold() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("gpu.jsonl");
        let line = |u: u32| {
            format!(
                r#"[{{"index":0,"name":"L4","memory_total":100,"memory_used":10,"utilization":{u},"processes":[{{"pid":7,"used_memory":10}}]}}]"#
            )
        };
        std::fs::write(&path, format!("{}\n{}\n", line(50), line(0))).expect("write");
        let mut probe = RecordedProbe::open(&path).expect("open");
        assert_eq!(probe.sample(true).expect("sample")[0].utilization, 50);
        let second = probe.sample(false).expect("sample");
        assert_eq!(second[0].utilization, 0);
        assert_eq!(second[0].processes, None);
        assert_eq!(probe.sample(true).expect("sample")[0].utilization, 0);
    }
}
