//! `GET /metrics`: the agent's state in the Prometheus text exposition format, and its GPUs
//! under dcgm-exporter's metric names, units and labels (`DCGM_FI_DEV_GPU_UTIL` in %,
//! `DCGM_FI_DEV_FB_USED`/`_FREE` in MiB, `DCGM_FI_DEV_POWER_USAGE` in W,
//! `DCGM_FI_DEV_GPU_TEMP` in °C, `DCGM_FI_DEV_SM_CLOCK` in MHz; labels `gpu`, `UUID`,
//! `device`, `modelName`, `Hostname`), so dashboards built for dcgm-exporter (Grafana's
//! 12239 and its descendants) read an edge site as they read a cluster node; beside them
//! berth's own labels `target`, `plan` and `workload` (the workloads whose processes hold the
//! GPU, comma-separated, empty when none).
//!
//! Pure: the status document in, text out.

use serde_json::Value;
use std::fmt::Write as _;

/// Escapes a label value (`\\`, `"`, newline), as the text format requires.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric family: help, type, then its samples (`labels`, value); nothing when empty.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    if samples.is_empty() {
        return;
    }
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

fn labels(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// The exposition of the agent's `status` document, with `hostname` as dcgm-exporter's
/// `Hostname`.
pub fn exposition(status: &Value, hostname: &str) -> String {
    let number = |v: &Value| v.as_u64().unwrap_or(0).to_string();
    let mut out = String::new();
    let plain = |v: &Value| vec![(String::new(), number(v))];
    family(
        &mut out,
        "berth_agent_bundle_generation",
        "gauge",
        "Generation of the bundle the agent runs.",
        &plain(&status["generation"]),
    );
    family(
        &mut out,
        "berth_agent_telemetry_buffered",
        "gauge",
        "Telemetry events waiting to be acknowledged.",
        &plain(&status["telemetry"]["buffered"]),
    );
    family(
        &mut out,
        "berth_agent_telemetry_dropped_total",
        "counter",
        "Telemetry events dropped beyond the buffers.",
        &plain(&status["telemetry"]["dropped"]),
    );
    family(
        &mut out,
        "berth_agent_cache_bytes",
        "gauge",
        "Bytes in the model cache.",
        &plain(&status["cache"]["bytes"]),
    );
    let running: Vec<(String, String)> = status["workloads"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            (
                labels(&[("workload", w["name"].as_str().unwrap_or_default())]),
                u8::from(w["state"] == "running").to_string(),
            )
        })
        .collect();
    family(
        &mut out,
        "berth_agent_workload_running",
        "gauge",
        "1 when the workload runs.",
        &running,
    );

    let target = status["target"].as_str().unwrap_or_default();
    let plan = status["plan_id"].as_str().unwrap_or_default();
    let devices: Vec<&Value> = status["gpus"]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    // dcgm-exporter's labels of device `d`, then `mig` (a MIG instance's own), then berth's:
    // the workloads whose processes `holder` (the device, or the instance) lists.
    let gpu_labels = |d: &Value, mig: &[(&str, &str)], holder: &Value| {
        let index = d["index"].as_u64().unwrap_or(0).to_string();
        let device = format!("nvidia{index}");
        let mut workloads: Vec<&str> = holder["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["workload"].as_str())
            .collect();
        workloads.sort_unstable();
        workloads.dedup();
        let workloads = workloads.join(",");
        let mut pairs = vec![
            ("gpu", index.as_str()),
            ("UUID", d["uuid"].as_str().unwrap_or_default()),
            ("device", device.as_str()),
            ("modelName", d["name"].as_str().unwrap_or_default()),
            ("Hostname", hostname),
        ];
        pairs.extend_from_slice(mig);
        pairs.extend([("target", target), ("plan", plan), ("workload", &workloads)]);
        labels(&pairs)
    };
    let device_labels = |d: &Value| gpu_labels(d, &[], d);
    const MIB: f64 = 1048576.0;
    type Pick = fn(&Value) -> Option<String>;
    let gauges: [(&str, &str, Pick); 6] = [
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", |d| {
            d["utilization"].as_u64().map(|u| u.to_string())
        }),
        (
            "DCGM_FI_DEV_FB_USED",
            "Framebuffer memory used (in MiB).",
            |d| {
                d["memory_used"]
                    .as_u64()
                    .map(|b| ((b as f64 / MIB).round() as u64).to_string())
            },
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "Framebuffer memory free (in MiB).",
            |d| {
                let total = d["memory_total"].as_u64()?;
                let used = d["memory_used"].as_u64()?;
                Some(((total.saturating_sub(used) as f64 / MIB).round() as u64).to_string())
            },
        ),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", |d| {
            d["power_mw"]
                .as_u64()
                .map(|mw| format!("{:.3}", mw as f64 / 1000.0))
        }),
        ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", |d| {
            d["temperature_c"].as_u64().map(|c| c.to_string())
        }),
        (
            "DCGM_FI_DEV_SM_CLOCK",
            "SM clock frequency (in MHz).",
            |d| d["sm_clock_mhz"].as_u64().map(|c| c.to_string()),
        ),
    ];
    // A MIG instance's memory, as dcgm-exporter exports it per GPU instance (framebuffer
    // only: it gives no `DCGM_FI_DEV_GPU_UTIL` for MIG instances either): the parent's labels
    // and `GPU_I_PROFILE`. dcgm-exporter's `GPU_I_ID` is the GPU instance id, which NVML's
    // safe Rust binding does not give; berth's own `mig_index` (the instance's index under
    // its parent) and `mig_uuid` tell instances apart instead, and `workload` names the
    // workloads whose processes run on the instance.
    let instance_labels = |d: &Value, i: &Value| {
        let index = i["index"].as_u64().unwrap_or(0).to_string();
        let mig = [
            ("GPU_I_PROFILE", i["profile"].as_str().unwrap_or_default()),
            ("mig_index", index.as_str()),
            ("mig_uuid", i["uuid"].as_str().unwrap_or_default()),
        ];
        gpu_labels(d, &mig, i)
    };
    let instances: Vec<(&Value, &Value)> = devices
        .iter()
        .filter(|d| d["mig"]["enabled"] == true)
        .flat_map(|d| {
            d["mig"]["instances"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |i| (*d, i))
        })
        .collect();
    for (name, help, pick) in gauges {
        let mut samples: Vec<(String, String)> = devices
            .iter()
            .filter_map(|d| pick(d).map(|v| (device_labels(d), v)))
            .collect();
        if matches!(name, "DCGM_FI_DEV_FB_USED" | "DCGM_FI_DEV_FB_FREE") {
            // The instance's own memory figures, picked as a device's are.
            samples.extend(
                instances
                    .iter()
                    .filter_map(|(d, i)| pick(i).map(|v| (instance_labels(d, i), v))),
            );
        }
        family(&mut out, name, "gauge", help, &samples);
    }
    out
}

/// The name dcgm-exporter would put in `Hostname`: `NODE_NAME` (set on Kubernetes),
/// `HOSTNAME`, or `/etc/hostname`.
pub fn hostname() -> String {
    ["NODE_NAME", "HOSTNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn devices_get_dcgm_names_units_and_labels() {
        let status = serde_json::json!({
            "target": "rig_alpha", "plan_id": "sha256:ab", "generation": 3,
            "workloads": [{"name": "leak_watch", "state": "running"}],
            "gpus": {"devices": [{
                "index": 0, "name": "NVIDIA L4", "uuid": "GPU-1", "utilization": 87,
                "memory_total": 24u64 << 30, "memory_used": 6u64 << 30, "power_mw": 71500,
                "processes": [{"pid": 1, "workload": "leak_watch"}, {"pid": 2, "workload": "leak_watch"}],
            }]},
        });
        let text = exposition(&status, "edge-1");
        let labels = "gpu=\"0\",UUID=\"GPU-1\",device=\"nvidia0\",modelName=\"NVIDIA L4\",\
                      Hostname=\"edge-1\",target=\"rig_alpha\",plan=\"sha256:ab\",workload=\"leak_watch\"";
        assert!(
            text.contains(&format!("DCGM_FI_DEV_GPU_UTIL{{{labels}}} 87\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("DCGM_FI_DEV_FB_USED{{{labels}}} 6144\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("DCGM_FI_DEV_FB_FREE{{{labels}}} 18432\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("DCGM_FI_DEV_POWER_USAGE{{{labels}}} 71.500\n")),
            "{text}"
        );
        assert!(
            !text.contains("DCGM_FI_DEV_GPU_TEMP"),
            "not measured, not shown: {text}"
        );
        assert!(text.contains("berth_agent_bundle_generation 3\n"), "{text}");
    }

    #[test]
    fn mig_instances_get_their_memory_with_their_profile() {
        // An H100 in MIG mode with two 1g.10gb instances (the same profile twice: told apart
        // by `mig_index` and `mig_uuid`), one running a workload's process. The device gives
        // no utilisation in MIG mode, so no `DCGM_FI_DEV_GPU_UTIL` at all.
        let status = serde_json::json!({
            "target": "rig", "plan_id": "sha256:ab",
            "gpus": {"devices": [{
                "index": 0, "name": "NVIDIA H100", "uuid": "GPU-1",
                "memory_total": 80u64 << 30, "memory_used": 3u64 << 30,
                "mig": {"enabled": true, "instances": [
                    {"index": 0, "profile": "1g.10gb", "uuid": "MIG-a",
                     "memory_total": 10u64 << 30, "memory_used": 2u64 << 30,
                     "processes": [{"pid": 7, "workload": "detector"}]},
                    {"index": 1, "profile": "1g.10gb", "uuid": "MIG-b",
                     "memory_total": 10u64 << 30, "memory_used": 0},
                ]},
            }]},
        });
        let text = exposition(&status, "edge-1");
        let instance = |index: u32, uuid: &str, workload: &str| {
            format!(
                "gpu=\"0\",UUID=\"GPU-1\",device=\"nvidia0\",modelName=\"NVIDIA H100\",\
                 Hostname=\"edge-1\",GPU_I_PROFILE=\"1g.10gb\",mig_index=\"{index}\",\
                 mig_uuid=\"{uuid}\",target=\"rig\",plan=\"sha256:ab\",workload=\"{workload}\""
            )
        };
        for (line, why) in [
            (
                format!(
                    "DCGM_FI_DEV_FB_USED{{{}}} 2048\n",
                    instance(0, "MIG-a", "detector")
                ),
                "the busy instance",
            ),
            (
                format!(
                    "DCGM_FI_DEV_FB_FREE{{{}}} 8192\n",
                    instance(0, "MIG-a", "detector")
                ),
                "its free memory",
            ),
            (
                format!("DCGM_FI_DEV_FB_USED{{{}}} 0\n", instance(1, "MIG-b", "")),
                "the idle instance",
            ),
        ] {
            assert!(text.contains(&line), "{why}: {text}");
        }
        assert!(!text.contains("DCGM_FI_DEV_GPU_UTIL"), "{text}");
        // One family each, whole device and instances together.
        assert_eq!(text.matches("# TYPE DCGM_FI_DEV_FB_USED").count(), 1);
        assert_eq!(text.matches("DCGM_FI_DEV_FB_USED{").count(), 3, "{text}");
    }
}
