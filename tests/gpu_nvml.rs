//! NVML against a real GPU: the agent's probe reads every device, and a real `berth agent`
//! attributes a real CUDA process to its workload, exports its utilisation under
//! dcgm-exporter's names, keeps it while it computes and reclaims it once idle.
//!
//! These tests need an NVIDIA driver (and, for the second, Python with PyTorch built for
//! CUDA). Where there is none they say so and pass, unless `BERTH_REQUIRE_GPU=1` is set (the
//! device machine's run sets it, so a missing GPU there is a failure, not a skip).

mod agent_proc;

use agent_proc::workload_state;
use berth_runtime::agent::gpu::{GpuProbe, NvmlProbe};
use berth_runtime::backends::edge::bundle::{
    BUNDLE_FORMAT, Bundle, BundleWorkload, ReclaimContract, TelemetryContract, keys,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const TOKEN: &str = "gpu-test-token-41";

/// The `berth` binary: `BERTH_BIN` where the test runs away from its build (the device
/// machine), else the one Cargo built.
fn berth() -> PathBuf {
    std::env::var_os("BERTH_BIN").map_or_else(|| env!("CARGO_BIN_EXE_berth").into(), Into::into)
}

/// `true` when the test must run; `false` (after saying why) when it may be skipped.
fn available(what: &str, missing: Option<String>) -> bool {
    let Some(reason) = missing else { return true };
    assert!(
        std::env::var_os("BERTH_REQUIRE_GPU").is_none(),
        "BERTH_REQUIRE_GPU is set but {what} is missing: {reason}"
    );
    eprintln!("skipped: {what} is missing here: {reason}");
    false
}

#[test]
fn nvml_reads_every_real_device() {
    let probe = NvmlProbe::open();
    if !available("an NVIDIA driver", probe.as_ref().err().cloned()) {
        return;
    }
    let mut probe = probe.expect("probe");
    assert!(
        probe.describe().starts_with("nvml (driver "),
        "{}",
        probe.describe()
    );
    let devices = probe.sample(true).expect("a sample with processes");
    assert!(!devices.is_empty(), "NVML opened but listed no device");
    for d in &devices {
        assert!(!d.name.is_empty() && d.name != "unknown", "{d:?}");
        assert!(
            d.memory_total > 0 && d.memory_used <= d.memory_total,
            "{d:?}"
        );
        assert!(
            d.uuid.as_deref().is_some_and(|u| u.starts_with("GPU-")),
            "{d:?}"
        );
        assert!(d.processes.is_some(), "processes were asked for: {d:?}");
        match &d.mig {
            Some(mig) if mig.enabled => {
                for i in &mig.instances {
                    assert!(
                        i.memory_total > 0 && i.memory_used <= i.memory_total,
                        "{i:?}"
                    );
                    assert!(i.profile.contains('g'), "{i:?}");
                }
            }
            // MIG off (or absent): the device gives whole-device utilisation.
            _ => assert!(d.utilization.is_some_and(|u| u <= 100), "{d:?}"),
        }
        // Datacentre GPUs since Ampere have MIG; NVML must say whether it is on.
        if ["A100", "A30", "H100", "H200", "B200", "GH200"]
            .iter()
            .any(|m| d.name.contains(m))
        {
            assert!(d.mig.is_some(), "{} has MIG but NVML said nothing", d.name);
        }
    }
    // Without processes the sample leaves them out (the agent keeps the last list).
    let light = probe.sample(false).expect("a sample without processes");
    assert!(light.iter().all(|d| d.processes.is_none()));
    println!(
        "{} {}",
        probe.describe(),
        serde_json::to_string(&devices).expect("json")
    );
}

/// A Python that imports torch and sees a CUDA device, or why not.
fn torch_missing() -> Option<String> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import torch; assert torch.cuda.is_available(), 'no CUDA'",
        ])
        .output();
    match out {
        Err(e) => Some(format!("python3: {e}")),
        Ok(o) if !o.status.success() => Some(
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("torch failed")
                .to_string(),
        ),
        Ok(_) => None,
    }
}

/// Holds 4 GiB of GPU memory, multiplies matrices for `BUSY` seconds (touching `busy` when it
/// starts), then touches `idle` and keeps the memory without computing.
const LOAD: &str = r#"
import pathlib, sys, time, torch
marks, busy = pathlib.Path(sys.argv[1]), float(sys.argv[2])
hold = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
x = torch.randn(8192, 8192, device="cuda")
(x @ x).sum().item()
(marks / "busy").write_text(str(time.time()))
end = time.time() + busy
while time.time() < end:
    for _ in range(8):
        y = x @ x
    torch.cuda.synchronize()
(marks / "idle").write_text(str(time.time()))
while True:
    time.sleep(1)
"#;

struct Agent {
    child: Child,
    url: String,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    fn status(&self) -> Value {
        let (code, body) = agent_proc::http(&self.url, "GET", "/v1/status", Some(TOKEN));
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("status JSON")
    }
}

/// The first device sample listing a process of `workload`.
fn device_held_by(status: &Value, workload: &str) -> Option<Value> {
    status["gpus"]["devices"]
        .as_array()?
        .iter()
        .find(|d| {
            d["processes"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["workload"] == workload))
        })
        .cloned()
}

fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn start_agent(root: &Path, notebook: BundleWorkload) -> Agent {
    let secret = keys::generate().expect("randomness");
    let (_, public) = keys::write_pair(&root.join("cp"), &secret).expect("keys");
    let bundle = Bundle {
        format: BUNDLE_FORMAT.into(),
        target: "gpu-site".into(),
        generation: 1,
        plan_id: "sha256:gpu-test".into(),
        workloads: vec![notebook],
    };
    let source = root.join("site.bundle.json");
    std::fs::write(&source, bundle.sign(&secret).to_bytes()).expect("bundle");
    let token = root.join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let mut command = Command::new(berth());
    command
        .args(["agent", "--listen", "127.0.0.1:0", "--interval", "5"])
        .args(["--gpu-interval", "0.2", "--gpu-record-interval", "1"])
        .arg("--state")
        .arg(root.join("state"))
        .arg("--trust")
        .arg(public)
        .arg("--source")
        .arg(&source)
        .arg("--token-file")
        .arg(token);
    let (child, url, _log) = agent_proc::spawn(command);
    Agent { child, url }
}

#[test]
fn a_real_cuda_process_is_attributed_kept_while_busy_and_reclaimed_once_idle() {
    if !available("an NVIDIA driver", NvmlProbe::open().err())
        || !available("PyTorch with CUDA", torch_missing())
    {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let script = root.join("load.py");
    std::fs::write(&script, LOAD).expect("script");
    let marks = root.join("marks");
    std::fs::create_dir(&marks).expect("marks");
    // The idle clock runs from the start: the threshold must outlast importing PyTorch and
    // making a CUDA context (10 to 20 s on a cold machine), and the busy phase must outlast
    // the threshold to show that utilisation keeps the notebook.
    let idle_after = Duration::from_secs(30);
    let busy_for = 36;
    let notebook = BundleWorkload {
        name: "notebook".into(),
        release: "1".into(),
        image: format!(
            "exec:exec python3 '{}' '{}' {busy_for}",
            script.display(),
            marks.display()
        ),
        kind: "notebook".into(),
        class: "research".into(),
        replicas: 1,
        gpus_per_replica: 1,
        pool: None,
        accelerator: None,
        variant: None,
        data: vec![],
        telemetry: TelemetryContract::Buffer(3_600_000_000_000),
        reclaim: Some(ReclaimContract {
            policy: "idle_notebooks".into(),
            idle_after_ns: u64::try_from(idle_after.as_nanos()).expect("ns"),
        }),
    };
    let agent = start_agent(root, notebook);

    // Busy: the CUDA process is on a device, attributed to the notebook, with its memory and
    // a utilisation above zero, and /metrics says so under dcgm-exporter's names.
    wait_for(Duration::from_secs(120), "the load's busy phase", || {
        let state = workload_state(&agent.status(), "notebook");
        assert_ne!(
            state.as_deref(),
            Some("reclaimed"),
            "reclaimed before it used the GPU; its log:\n{}",
            std::fs::read_to_string(root.join("state/logs/notebook-0.log")).unwrap_or_default()
        );
        marks.join("busy").exists().then_some(())
    });
    let busy_since = Instant::now();
    let held = wait_for(
        Duration::from_secs(15),
        "a busy device holding the notebook's process",
        || {
            device_held_by(&agent.status(), "notebook")
                .filter(|d| d["utilization"].as_u64().is_some_and(|u| u > 0))
        },
    );
    assert!(
        held["memory_used"].as_u64().unwrap_or(0) >= 4 << 30,
        "the process holds 4 GiB: {held}"
    );
    let process = held["processes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["workload"] == "notebook"))
        .expect("the notebook's process")
        .clone();
    assert!(
        process["used_memory"].as_u64().is_none_or(|b| b >= 4 << 30),
        "{process}"
    );
    let (code, metrics) = agent_proc::http(&agent.url, "GET", "/metrics", Some(TOKEN));
    assert_eq!(code, 200, "{metrics}");
    let util = metrics
        .lines()
        .find(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{") && l.contains("workload=\"notebook\""))
        .unwrap_or_else(|| panic!("no utilisation series for the notebook:\n{metrics}"));
    assert!(
        util.contains(&format!(
            "UUID=\"{}\"",
            held["uuid"].as_str().unwrap_or("?")
        )),
        "{util}"
    );
    println!("busy: {held}\n{util}");

    // Still running past the idle threshold while it computes: utilisation is the evidence.
    std::thread::sleep((idle_after + Duration::from_secs(2)).saturating_sub(busy_since.elapsed()));
    assert!(
        !marks.join("idle").exists(),
        "the load finished its busy phase too early to tell"
    );
    assert_eq!(
        workload_state(&agent.status(), "notebook").as_deref(),
        Some("running"),
        "reclaimed while computing"
    );

    // Idle (memory held, no kernels): reclaimed once the threshold has passed, not before.
    wait_for(Duration::from_secs(60), "the load's idle phase", || {
        marks.join("idle").exists().then_some(())
    });
    let idle_since = Instant::now();
    wait_for(idle_after + Duration::from_secs(20), "the reclaim", || {
        (workload_state(&agent.status(), "notebook").as_deref() == Some("reclaimed")).then_some(())
    });
    // NVML's utilisation covers up to the last second, so idleness is seen a little late,
    // never early.
    assert!(
        idle_since.elapsed() >= idle_after - Duration::from_millis(500),
        "reclaimed {:?} after going idle, before the {idle_after:?} threshold",
        idle_since.elapsed()
    );
    let pid = process["pid"].as_u64().expect("pid");
    let mut probe = NvmlProbe::open().expect("probe");
    wait_for(Duration::from_secs(15), "the GPU freed", || {
        let devices = probe.sample(true).expect("sample");
        (!devices
            .iter()
            .flat_map(|d| d.all_processes())
            .any(|p| u64::from(p.pid) == pid))
        .then_some(())
    });
    let mut events = Vec::new();
    let mut cursor = 0;
    loop {
        let path = format!("/v1/telemetry?after={cursor}&limit=100");
        let (code, body) = agent_proc::http(&agent.url, "GET", &path, Some(TOKEN));
        assert_eq!(code, 200, "{body}");
        let page: Value = serde_json::from_str(&body).expect("telemetry JSON");
        let batch = page["events"].as_array().cloned().unwrap_or_default();
        if batch.is_empty() {
            break;
        }
        cursor = page["next"].as_u64().expect("next");
        events.extend(batch);
    }
    let reclaim = events
        .iter()
        .find(|e| e["kind"] == "reclaim")
        .unwrap_or_else(|| panic!("no reclaim event among {} events", events.len()));
    assert_eq!(reclaim["workload"], "notebook", "{reclaim}");
    println!(
        "reclaimed {:?} after the load went idle; event {reclaim}",
        idle_since.elapsed()
    );
}
