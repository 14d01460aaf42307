//! Running workloads: one supervised task per replica that starts the command (process
//! runtime: `exec:COMMAND` through `/bin/sh -c`) or the container (`podman`/`docker run`),
//! restarts it with exponential backoff when it exits, and stops it on request.
//!
//! Each replica runs in its own process group, recorded (pid and start time) in the state, so
//! an agent restarted after `kill -9` stops what its previous life left running instead of
//! running it twice. Must never: signal a process it did not start (the start time guards
//! against recycled pids).

use super::state::{NewEvent, ProcessRecord, State};
use crate::backends::edge::bundle::BundleWorkload;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A replica that ran this long before exiting starts again without delay growth.
const HEALTHY_RUN: Duration = Duration::from_secs(10);
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How a workload's image is run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launch {
    /// `exec:COMMAND`: a shell command on this machine.
    Process(String),
    /// A container image, run through a container engine CLI.
    Container { engine: String, image: String },
}

/// Finds how to run `image`: `exec:` commands need nothing; images need podman, or a docker
/// whose engine answers. The error says what is missing.
pub fn launch_for(image: &str) -> Result<Launch, String> {
    if let Some(command) = image.strip_prefix("exec:") {
        return Ok(Launch::Process(command.trim().to_string()));
    }
    let mut tried = Vec::new();
    for engine in ["podman", "docker"] {
        match std::process::Command::new(engine)
            .arg("info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Ok(status) if status.success() => {
                return Ok(Launch::Container {
                    engine: engine.to_string(),
                    image: image.to_string(),
                });
            }
            Ok(_) => tried.push(format!(
                "{engine} is installed but its engine does not answer"
            )),
            Err(_) => tried.push(format!("{engine} is not installed")),
        }
    }
    Err(format!(
        "no container runtime for image `{image}`: {}",
        tried.join("; ")
    ))
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplicaStatus {
    /// `starting`, `running`, `backoff`, `stopped`.
    pub state: &'static str,
    pub pid: Option<u32>,
    pub restarts: u32,
    pub last_exit: Option<String>,
}

struct Replica {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    status: Arc<Mutex<ReplicaStatus>>,
}

/// What runs one workload: its spec (to notice changes) and its replicas.
pub struct Running {
    pub spec: BundleWorkload,
    replicas: Vec<Replica>,
}

impl Running {
    pub fn statuses(&self) -> Vec<ReplicaStatus> {
        self.replicas
            .iter()
            .map(|r| r.status.lock().map(|s| s.clone()).unwrap_or_default())
            .collect()
    }

    /// The pids of the running replicas (process group leaders).
    pub fn pids(&self) -> Vec<u32> {
        self.statuses().iter().filter_map(|s| s.pid).collect()
    }

    /// Stops every replica and waits for them.
    pub async fn stop(self) {
        for r in &self.replicas {
            let _ = r.stop.send(true);
        }
        for r in self.replicas {
            let _ = r.task.await;
        }
    }
}

/// What a replica needs besides its spec.
#[derive(Clone)]
pub struct Context {
    pub state: Arc<State>,
    pub logs: PathBuf,
    pub target: String,
    pub plan_id: String,
    pub model: Option<PathBuf>,
}

/// Starts every replica of `spec`.
pub fn start(spec: BundleWorkload, launch: Launch, ctx: Context) -> Running {
    let replicas = (0..spec.replicas)
        .map(|index| {
            let (stop, stopped) = watch::channel(false);
            let status = Arc::new(Mutex::new(ReplicaStatus {
                state: "starting",
                ..ReplicaStatus::default()
            }));
            let task = tokio::spawn(supervise(
                spec.clone(),
                index,
                launch.clone(),
                ctx.clone(),
                stopped,
                status.clone(),
            ));
            Replica { stop, task, status }
        })
        .collect();
    Running { spec, replicas }
}

fn set(status: &Mutex<ReplicaStatus>, f: impl FnOnce(&mut ReplicaStatus)) {
    if let Ok(mut s) = status.lock() {
        f(&mut s);
    }
}

async fn supervise(
    spec: BundleWorkload,
    index: u32,
    launch: Launch,
    ctx: Context,
    mut stopped: watch::Receiver<bool>,
    status: Arc<Mutex<ReplicaStatus>>,
) {
    let key = format!("{}/{index}", spec.name);
    let keep_ns = spec.telemetry.buffer_ns();
    let record = |kind: &'static str, detail: serde_json::Value| {
        let _ = ctx.state.record(
            NewEvent {
                kind,
                workload: Some(spec.name.clone()),
                detail,
                keep_ns,
            },
            super::now_ms(),
        );
    };
    let mut backoff = BACKOFF_MIN;
    loop {
        if *stopped.borrow() {
            break;
        }
        let started = Instant::now();
        let mut child = match spawn(&spec, index, &launch, &ctx) {
            Ok(child) => child,
            Err(e) => {
                set(&status, |s| {
                    s.state = "backoff";
                    s.last_exit = Some(format!("cannot start: {e}"));
                });
                record(
                    "workload_exited",
                    serde_json::json!({ "replica": index, "error": e.to_string() }),
                );
                if wait_or_stop(&mut stopped, backoff).await {
                    break;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let pid = child.id();
        set(&status, |s| {
            s.state = "running";
            s.pid = pid;
        });
        let event = NewEvent {
            kind: "workload_started",
            workload: Some(spec.name.clone()),
            detail: serde_json::json!({ "replica": index, "pid": pid }),
            keep_ns,
        };
        let process = pid.map(|pid| ProcessRecord {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
        });
        // The process and its event are one transaction: a restarted agent knows of every
        // process it started.
        match process {
            Some(p) => drop(ctx.state.started(&key, p, event, super::now_ms())),
            None => drop(ctx.state.record(event, super::now_ms())),
        }
        let exit = tokio::select! {
            exit = child.wait() => Some(exit),
            _ = stopped.changed() => None,
        };
        let exit = match exit {
            Some(exit) => exit,
            None => {
                if let Some(pid) = pid {
                    signal_group(pid, rustix::process::Signal::TERM);
                }
                match tokio::time::timeout(STOP_GRACE, child.wait()).await {
                    Ok(exit) => exit,
                    Err(_) => {
                        if let Some(pid) = pid {
                            signal_group(pid, rustix::process::Signal::KILL);
                        }
                        child.wait().await
                    }
                }
            }
        };
        // The group may hold children of the shell: stop them too.
        if let Some(pid) = pid {
            signal_group(pid, rustix::process::Signal::KILL);
        }
        let _ = ctx.state.set_process(&key, None);
        let how = match &exit {
            Ok(status) => status.to_string(),
            Err(e) => e.to_string(),
        };
        record(
            "workload_exited",
            serde_json::json!({ "replica": index, "status": how }),
        );
        let stopping = *stopped.borrow();
        set(&status, |s| {
            s.pid = None;
            s.last_exit = Some(how);
            s.state = if stopping { "stopped" } else { "backoff" };
        });
        if stopping {
            break;
        }
        if started.elapsed() >= HEALTHY_RUN {
            backoff = BACKOFF_MIN;
        }
        set(&status, |s| s.restarts += 1);
        if wait_or_stop(&mut stopped, backoff).await {
            break;
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    set(&status, |s| s.state = "stopped");
}

/// Sleeps `delay` unless asked to stop first; true when asked.
async fn wait_or_stop(stopped: &mut watch::Receiver<bool>, delay: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => *stopped.borrow(),
        _ = stopped.changed() => true,
    }
}

fn spawn(
    spec: &BundleWorkload,
    index: u32,
    launch: &Launch,
    ctx: &Context,
) -> std::io::Result<tokio::process::Child> {
    std::fs::create_dir_all(&ctx.logs)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ctx.logs.join(format!("{}-{index}.log", spec.name)))?;
    let mut command = match launch {
        Launch::Process(line) => {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(line);
            c
        }
        Launch::Container { engine, image } => {
            let mut c = tokio::process::Command::new(engine);
            c.args(["run", "--rm", "--name"])
                .arg(format!("berth-{}-{}-{index}", ctx.target, spec.name))
                .arg(image);
            c
        }
    };
    command
        .env("BERTH_WORKLOAD", &spec.name)
        .env("BERTH_RELEASE", &spec.release)
        .env("BERTH_TARGET", &ctx.target)
        .env("BERTH_PLAN_ID", &ctx.plan_id)
        .env("BERTH_REPLICA", index.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .kill_on_drop(false);
    if let Some(model) = &ctx.model {
        command.env("BERTH_MODEL", model);
    }
    command.spawn()
}

/// Signals the process group led by `pid` (errors mean it is gone already).
pub fn signal_group(pid: u32, signal: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// `/proc/PID/stat` fields after the command name (which may hold spaces and parentheses).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Start time in clock ticks since boot (field 22).
pub fn start_ticks(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The process group of `pid` (field 5).
pub fn process_group(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(2)?.parse().ok()
}

/// Stops process groups a previous life of the agent started and left running.
pub fn stop_leftovers(state: &State) -> Vec<String> {
    let mut stopped = Vec::new();
    for (key, record) in state.processes().unwrap_or_default() {
        if start_ticks(record.pid) == Some(record.start_ticks) {
            signal_group(record.pid, rustix::process::Signal::KILL);
            stopped.push(key.clone());
        }
        let _ = state.set_process(&key, None);
    }
    stopped
}

/// Which workload each pid belongs to, by process group.
pub fn owners(running: &BTreeMap<String, Running>) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for (name, r) in running {
        for pid in r.pids() {
            out.insert(pid, name.clone());
        }
    }
    out
}
