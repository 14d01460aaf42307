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
    /// Percent of time a kernel ran over the driver's last sample period; absent where the
    /// driver gives none (a device in MIG mode), which reclaim never reads as idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<u32>,
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
    /// Multi-Instance GPU, on devices that have the mode: whether it is on, and the GPU
    /// instances when it is. Absent where the device (or the driver) has no MIG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigState>,
}

impl GpuSample {
    /// Every process listed on the device and on its MIG instances.
    pub fn all_processes(&self) -> impl Iterator<Item = &GpuProcess> {
        let instances = self.mig.iter().flat_map(|m| &m.instances);
        self.processes
            .iter()
            .flatten()
            .chain(instances.flat_map(|i| i.processes.iter().flatten()))
    }

    /// The same, to fill in the workloads.
    pub fn all_processes_mut(&mut self) -> impl Iterator<Item = &mut GpuProcess> {
        let instances = self.mig.iter_mut().flat_map(|m| &mut m.instances);
        self.processes
            .iter_mut()
            .flatten()
            .chain(instances.flat_map(|i| i.processes.iter_mut().flatten()))
    }

    /// Whether this sample enumerated processes (else the last enumeration stands).
    pub fn processes_enumerated(&self) -> bool {
        self.processes.is_some()
    }

    /// Forgets the processes (a sample that did not enumerate them).
    pub fn forget_processes(&mut self) {
        self.processes = None;
        for instance in self.mig.iter_mut().flat_map(|m| &mut m.instances) {
            instance.processes = None;
        }
    }
}

/// A device's MIG mode and, when it is on, its instances (each a slice of the GPU that
/// workloads are allocated as a whole: `nvidia.com/mig-1g.18gb`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigState {
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<MigInstance>,
}

/// One MIG instance. NVML gives no utilisation for an instance (dcgm-exporter reads it from
/// the profiling counters), so an instance is busy when a process holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigInstance {
    /// The instance's index under its parent device.
    pub index: u32,
    /// The instance's profile (`1g.18gb`), from the name NVML gives it.
    pub profile: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Bytes.
    pub memory_total: u64,
    pub memory_used: u64,
    /// Compute processes on the instance, when enumerated this time.
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

/// NVML, opened once. What cannot change while the driver is loaded (names, UUIDs) is read
/// at open; a sample reads only the figures that move (memory, utilisation, power,
/// temperature, clock: five NVML calls a device). Processes and MIG instances are enumerated
/// only when asked (the agent asks every tenth sample), which keeps the 1 Hz sample cheap.
pub struct NvmlProbe {
    nvml: nvml_wrapper::Nvml,
    driver: String,
    devices: Vec<DeviceFacts>,
}

/// A device's facts that do not change while the driver is loaded, and its MIG state as last
/// enumerated (`None`: the device has no MIG mode).
struct DeviceFacts {
    name: String,
    uuid: Option<String>,
    mig: Option<MigState>,
}

impl NvmlProbe {
    /// Loads and initialises NVML; the error reads "no NVML: …".
    pub fn open() -> Result<NvmlProbe, String> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("no NVML: {e}"))?;
        let driver = nvml
            .sys_driver_version()
            .unwrap_or_else(|_| "unknown".into());
        let count = nvml.device_count().map_err(|e| format!("no NVML: {e}"))?;
        let mut devices = Vec::new();
        for index in 0..count {
            let device = nvml
                .device_by_index(index)
                .map_err(|e| format!("no NVML: device {index}: {e}"))?;
            devices.push(DeviceFacts {
                name: device.name().unwrap_or_else(|_| "unknown".into()),
                uuid: device.uuid().ok(),
                mig: mig_state(&device, false),
            });
        }
        Ok(NvmlProbe {
            nvml,
            driver,
            devices,
        })
    }
}

/// The compute processes on a device or MIG instance.
fn compute_processes(device: &nvml_wrapper::Device<'_>) -> Result<Vec<GpuProcess>, String> {
    let list = device
        .running_compute_processes()
        .map_err(|e| e.to_string())?;
    Ok(list
        .into_iter()
        .map(|p| GpuProcess {
            pid: p.pid,
            used_memory: match p.used_gpu_memory {
                nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
            },
            workload: None,
        })
        .collect())
}

/// The profile in a MIG instance's name: `NVIDIA H200 MIG 1g.18gb` → `1g.18gb`.
fn mig_profile(name: &str) -> String {
    name.rsplit_once(" MIG ")
        .map_or(name, |(_, profile)| profile)
        .trim()
        .to_string()
}

/// The device's MIG mode and instances; `None` when the device has no MIG mode.
fn mig_state(device: &nvml_wrapper::Device<'_>, processes: bool) -> Option<MigState> {
    let mode = device.mig_mode().ok()?;
    if mode.current == 0 {
        return Some(MigState {
            enabled: false,
            instances: Vec::new(),
        });
    }
    let mut instances = Vec::new();
    // The count is the most the device can hold; indices without an instance are skipped.
    for index in 0..device.mig_device_count().unwrap_or(0) {
        let Ok(instance) = device.mig_device_by_index(index) else {
            continue;
        };
        let Ok(memory) = instance.memory_info() else {
            continue;
        };
        instances.push(MigInstance {
            index,
            profile: mig_profile(&instance.name().unwrap_or_default()),
            uuid: instance.uuid().ok(),
            memory_total: memory.total,
            memory_used: memory.used,
            processes: processes
                .then(|| compute_processes(&instance).ok())
                .flatten(),
        });
    }
    Some(MigState {
        enabled: true,
        instances,
    })
}

impl GpuProbe for NvmlProbe {
    fn sample(&mut self, processes: bool) -> Result<Vec<GpuSample>, String> {
        let mut out = Vec::with_capacity(self.devices.len());
        for (index, facts) in (0u32..).zip(self.devices.iter_mut()) {
            let device = self
                .nvml
                .device_by_index(index)
                .map_err(|e| e.to_string())?;
            let memory = device.memory_info().map_err(|e| e.to_string())?;
            // MIG mode changes only through an administrator (and a GPU reset): re-read with
            // the processes, not every sample.
            if processes {
                facts.mig = mig_state(&device, true);
            }
            let mig_enabled = facts.mig.as_ref().is_some_and(|m| m.enabled);
            let utilization = match device.utilization_rates() {
                Ok(rates) => Some(rates.gpu),
                // A device in MIG mode has no whole-device utilisation.
                Err(_) if mig_enabled => None,
                Err(e) => return Err(e.to_string()),
            };
            let processes = if processes {
                // In MIG mode the processes are listed per instance; the parent may refuse.
                match compute_processes(&device) {
                    Ok(list) => Some(list),
                    Err(_) if mig_enabled => Some(Vec::new()),
                    Err(e) => return Err(e),
                }
            } else {
                None
            };
            // What a device does not measure (power on some boards) is left out, not an error.
            out.push(GpuSample {
                index,
                name: facts.name.clone(),
                memory_total: memory.total,
                memory_used: memory.used,
                utilization,
                uuid: facts.uuid.clone(),
                power_mw: device.power_usage().ok(),
                temperature_c: device
                    .temperature(nvml_wrapper::enum_wrappers::device::TemperatureSensor::Gpu)
                    .ok(),
                sm_clock_mhz: device
                    .clock_info(nvml_wrapper::enum_wrappers::device::Clock::SM)
                    .ok(),
                processes,
                mig: facts.mig.clone(),
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
            line.iter_mut().for_each(GpuSample::forget_processes);
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
    fn a_mig_instance_profile_is_the_end_of_its_name() {
        assert_eq!(mig_profile("NVIDIA H200 MIG 1g.18gb"), "1g.18gb");
        assert_eq!(mig_profile("NVIDIA A100-SXM4-40GB MIG 3g.20gb"), "3g.20gb");
        assert_eq!(mig_profile("2g.35gb"), "2g.35gb");
    }

    #[test]
    fn mig_instances_replay_and_their_processes_are_forgotten_between_enumerations() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("gpu.jsonl");
        std::fs::write(
            &path,
            r#"[{"index":0,"name":"NVIDIA H100","memory_total":100,"memory_used":30,"mig":{"enabled":true,"instances":[{"index":0,"profile":"1g.10gb","memory_total":10,"memory_used":3,"processes":[{"pid":9,"used_memory":3}]}]}}]"#,
        )
        .expect("write");
        let mut probe = RecordedProbe::open(&path).expect("open");
        let full = probe.sample(true).expect("sample");
        assert_eq!(
            full[0].utilization, None,
            "MIG mode: no whole-device figure"
        );
        assert_eq!(
            full[0].all_processes().map(|p| p.pid).collect::<Vec<_>>(),
            [9]
        );
        let light = probe.sample(false).expect("sample");
        assert_eq!(light[0].all_processes().count(), 0);
        assert!(!light[0].processes_enumerated());
        assert_eq!(light[0].mig.as_ref().map(|m| m.instances.len()), Some(1));
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
        assert_eq!(probe.sample(true).expect("sample")[0].utilization, Some(50));
        let second = probe.sample(false).expect("sample");
        assert_eq!(second[0].utilization, Some(0));
        assert_eq!(second[0].processes, None);
        assert_eq!(probe.sample(true).expect("sample")[0].utilization, Some(0));
    }
}
