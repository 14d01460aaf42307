//! `berth status` for edge targets: asks the agent of every `edge` target of the plan
//! (`GET /v1/status` with the bearer token, over TLS when its URL is `https://`, trusting an
//! extra CA if given) and sets what it runs beside what the plan wants there: desired vs
//! running replicas per workload, bundle generation, model cache and GPUs. An agent that
//! cannot be reached or refuses the token is a reported state, with when it was last reached
//! (remembered under `--agent-seen`), never a failure of the whole command.
//! [`crate::backends::k8s::status`] prints this report beside the clusters'.
//!
//! Must never: print, log or store the token.

use crate::backends::edge::bundle::Bundle;
use crate::report::Ui;
use berth_compiler::ir::{Ir, Runtime};
use berth_compiler::plan::Plan;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Environment variable holding the agents' bearer token when no `--agent-token-file` is given.
pub const TOKEN_ENV: &str = "BERTH_AGENT_TOKEN";

#[derive(Debug, Clone, clap::Args)]
pub struct EdgeStatusArgs {
    /// File holding the bearer token of the edge agents' API (default: $BERTH_AGENT_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub agent_token_file: Option<PathBuf>,
    /// PEM file of a CA to trust for agents' TLS certificates (besides the public roots).
    #[arg(long, value_name = "FILE")]
    pub agent_ca: Option<PathBuf>,
    /// Directory where the last time each agent answered is remembered.
    #[arg(long, value_name = "DIR", default_value = ".berth/agents")]
    pub agent_seen: PathBuf,
}

/// How the agent answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    Reachable,
    /// It answered 401 or 403: the token is missing or wrong.
    Unauthorized,
    /// No connection, a TLS failure, a timeout or an answer that is not a status.
    Unreachable,
    /// No token was given, so it was not asked.
    NoToken,
}

/// One workload placed on (or run by) an edge target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EdgeWorkload {
    pub workload: String,
    /// Replicas the plan places on the target.
    pub desired: u32,
    /// Replicas the agent reports running.
    pub running: u32,
    /// The agent's state (`running`, `starting`, `blocked`, `reclaimed`), or `not_in_bundle`
    /// when the agent does not run this workload (its bundle is older or not yet pulled).
    pub state: String,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EdgeTargetStatus {
    pub target: String,
    pub agent: String,
    pub state: Reach,
    pub error: Option<String>,
    /// When the agent last answered (milliseconds since the epoch), if ever seen from here.
    pub last_reachable_ms: Option<u64>,
    /// The agent's bundle generation and the plan it came from.
    pub generation: Option<u64>,
    /// (A spec planned now gets a new plan id at every instant: compare workloads, not ids.)
    pub bundle_plan_id: Option<String>,
    pub workloads: Vec<EdgeWorkload>,
    /// The agent's model cache (`bytes`, `budget`, `artifacts`), source and GPUs as it reports
    /// them.
    pub cache: Option<Value>,
    pub source: Option<Value>,
    pub gpus: Option<Value>,
}

/// What `berth status` knows about the plan's edge targets, in plan order.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Report(pub Vec<EdgeTargetStatus>);

/// The last answer remembered for one target.
#[derive(Serialize, Deserialize)]
struct Seen {
    at_ms: u64,
    generation: Option<u64>,
}

/// Why no agent could be asked at all (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot read the agent token file `{path}`: {message}")]
    Token { path: PathBuf, message: String },
    #[error("cannot read the CA certificate `{path}`: {message}")]
    Ca { path: PathBuf, message: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

impl Report {
    /// Asks the agent of every edge target of `plan` for its status, all at once.
    pub fn collect(ir: &Ir, plan: &Plan, args: &EdgeStatusArgs) -> Result<Report, SetupError> {
        let targets: Vec<(&str, &str)> = ir
            .targets
            .iter()
            .filter_map(|t| match &t.runtime {
                Runtime::Edge { agent } => Some((t.name.as_str(), agent.as_str())),
                _ => None,
            })
            .collect();
        if targets.is_empty() {
            return Ok(Report::default());
        }
        let token = read_token(args.agent_token_file.as_deref())?;
        let client = client(args.agent_ca.as_deref())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SetupError::Client(e.to_string()))?;
        let answers = runtime.block_on(futures::future::join_all(targets.iter().map(
            |(_, agent)| async {
                match &token {
                    Some(token) => ask(&client, agent, token).await,
                    None => Err((
                        Reach::NoToken,
                        format!("no token: give --agent-token-file or set {TOKEN_ENV}"),
                    )),
                }
            },
        )));
        let statuses = targets
            .iter()
            .zip(answers)
            .map(|(&(target, agent), answer)| {
                let desired = Bundle::from_plan(ir, plan, target, 0);
                let seen_file = args.agent_seen.join(format!("{target}.json"));
                target_status(target, agent, &desired, answer, &seen_file)
            })
            .collect();
        Ok(Report(statuses))
    }

    /// Whether an agent could not be asked (exit 1, as for a cluster that cannot be read).
    pub fn flagged(&self) -> bool {
        self.0.iter().any(|s| s.state != Reach::Reachable)
    }

    /// Human text on stdout, one block per edge target.
    pub fn print(&self, ui: &mut Ui<'_>) -> io::Result<()> {
        for s in &self.0 {
            write!(ui.out, "edge target `{}` at {}: ", s.target, s.agent)?;
            match s.state {
                Reach::Reachable => {
                    let generation = s.generation.map_or_else(
                        || "no bundle yet".to_string(),
                        |g| format!("generation {g}"),
                    );
                    let plan = s.bundle_plan_id.as_deref().unwrap_or("-");
                    writeln!(ui.out, "{generation} (plan {plan})")?;
                }
                _ => {
                    let label = match s.state {
                        Reach::Unauthorized => "unauthorized",
                        Reach::NoToken => "not asked",
                        _ => "unreachable",
                    };
                    write!(ui.out, "{label}: {}", s.error.as_deref().unwrap_or(""))?;
                    match s.last_reachable_ms {
                        Some(ms) => writeln!(
                            ui.out,
                            " (last reached {}{})",
                            timestamp(ms),
                            s.generation
                                .map(|g| format!(", generation {g}"))
                                .unwrap_or_default()
                        )?,
                        None => writeln!(ui.out, " (never reached from here)")?,
                    }
                }
            }
            for w in &s.workloads {
                let reason = w
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                writeln!(
                    ui.out,
                    "  {:<20} {}/{} running  {}{reason}",
                    w.workload, w.running, w.desired, w.state
                )?;
            }
            if s.state == Reach::Reachable {
                let cache = s.cache.as_ref().unwrap_or(&Value::Null);
                writeln!(
                    ui.out,
                    "  cache: {} of {} bytes, {} artifact(s); gpu: {}",
                    cache["bytes"],
                    cache["budget"],
                    cache["artifacts"],
                    gpu_line(s.gpus.as_ref().unwrap_or(&Value::Null))
                )?;
            }
        }
        Ok(())
    }
}

/// One target's status from the agent's answer (or failure) and what the plan wants there;
/// remembers a successful answer in `seen_file`, recalls it after a failure.
fn target_status(
    target: &str,
    agent: &str,
    desired: &Bundle,
    answer: Result<Value, (Reach, String)>,
    seen_file: &Path,
) -> EdgeTargetStatus {
    let mut status = EdgeTargetStatus {
        target: target.to_string(),
        agent: agent.to_string(),
        state: Reach::Reachable,
        error: None,
        last_reachable_ms: None,
        generation: None,
        bundle_plan_id: None,
        workloads: compare(desired, None),
        cache: None,
        source: None,
        gpus: None,
    };
    match answer {
        Ok(live) => {
            status.generation = live["generation"].as_u64();
            status.bundle_plan_id = live["plan_id"].as_str().map(str::to_string);
            status.workloads = compare(desired, Some(&live));
            status.cache = Some(live["cache"].clone());
            status.source = Some(live["source"].clone());
            status.gpus = Some(live["gpus"].clone());
            let seen = Seen {
                at_ms: crate::agent::now_ms(),
                generation: status.generation,
            };
            status.last_reachable_ms = Some(seen.at_ms);
            remember(seen_file, &seen);
        }
        Err((reach, error)) => {
            status.state = reach;
            status.error = Some(error);
            let seen = std::fs::read(seen_file)
                .ok()
                .and_then(|b| serde_json::from_slice::<Seen>(&b).ok());
            if let Some(seen) = seen {
                status.last_reachable_ms = Some(seen.at_ms);
                status.generation = seen.generation;
            }
        }
    }
    status
}

/// The token from `file`, else from [`TOKEN_ENV`]; `None` when neither is given.
fn read_token(file: Option<&Path>) -> Result<Option<String>, SetupError> {
    let token = match file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| SetupError::Token {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?
            .trim()
            .to_string(),
        None => std::env::var(TOKEN_ENV)
            .unwrap_or_default()
            .trim()
            .to_string(),
    };
    Ok(Some(token).filter(|t| !t.is_empty()))
}

fn client(ca: Option<&Path>) -> Result<reqwest::Client, SetupError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(10));
    if let Some(path) = ca {
        let ca_error = |message: String| SetupError::Ca {
            path: path.to_path_buf(),
            message,
        };
        let pem = std::fs::read(path).map_err(|e| ca_error(e.to_string()))?;
        let certificates =
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca_error(e.to_string()))?;
        if certificates.is_empty() {
            return Err(ca_error("no PEM certificate in it".into()));
        }
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder
        .build()
        .map_err(|e| SetupError::Client(error_chain(&e)))
}

/// The agent's `/v1/status`, or how the asking failed.
async fn ask(client: &reqwest::Client, agent: &str, token: &str) -> Result<Value, (Reach, String)> {
    let url = format!("{}/v1/status", agent.trim_end_matches('/'));
    let unreachable = |e: reqwest::Error| (Reach::Unreachable, error_chain(&e));
    let response = client
        .get(&url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(unreachable)?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err((
            Reach::Unauthorized,
            format!("the agent refused the token ({status})"),
        ));
    }
    if !status.is_success() {
        return Err((Reach::Unreachable, format!("the agent answered {status}")));
    }
    let body = response.bytes().await.map_err(unreachable)?;
    serde_json::from_slice(&body).map_err(|e| {
        (
            Reach::Unreachable,
            format!("the agent's status is not JSON: {e}"),
        )
    })
}

/// An error and its causes, `: `-separated (reqwest's own message leaves out the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Per workload, the plan's replicas beside the agent's; the agent's extra workloads last.
fn compare(desired: &Bundle, live: Option<&Value>) -> Vec<EdgeWorkload> {
    let live_workloads: Vec<&Value> = live
        .and_then(|l| l["workloads"].as_array())
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let find = |name: &str| live_workloads.iter().find(|w| w["name"] == name).copied();
    let mut out: Vec<EdgeWorkload> = desired
        .workloads
        .iter()
        .map(|w| match find(&w.name) {
            Some(l) => from_live(&w.name, w.replicas, l),
            None => EdgeWorkload {
                workload: w.name.clone(),
                desired: w.replicas,
                running: 0,
                state: if live.is_some() {
                    "not_in_bundle".into()
                } else {
                    "unknown".into()
                },
                reason: None,
            },
        })
        .collect();
    for l in live_workloads {
        let name = l["name"].as_str().unwrap_or_default();
        if !desired.workloads.iter().any(|w| w.name == name) {
            out.push(from_live(name, 0, l));
        }
    }
    out
}

fn from_live(name: &str, desired: u32, live: &Value) -> EdgeWorkload {
    let running = live["replicas"]
        .as_array()
        .map_or(0, |r| r.iter().filter(|r| r["state"] == "running").count());
    EdgeWorkload {
        workload: name.to_string(),
        desired,
        running: u32::try_from(running).unwrap_or(u32::MAX),
        state: live["state"].as_str().unwrap_or("unknown").to_string(),
        reason: live["reason"].as_str().map(str::to_string),
    }
}

fn gpu_line(gpus: &Value) -> String {
    if let Some(why) = gpus["unavailable"].as_str() {
        return why.to_string();
    }
    let devices = gpus["devices"].as_array().map_or(0, Vec::len);
    format!(
        "{} ({devices} device(s))",
        gpus["probe"].as_str().unwrap_or("none")
    )
}

fn timestamp(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(
            || format!("{ms} ms"),
            |t| {
                t.round(jiff::Unit::Second)
                    .map_or_else(|_| t.to_string(), |t| t.to_string())
            },
        )
}

/// Best effort: a status that cannot remember when it saw an agent still reports it.
fn remember(file: &Path, seen: &Seen) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    if let Ok(bytes) = serde_json::to_vec(seen) {
        let tmp = file.with_extension("json.tmp");
        if std::fs::write(&tmp, bytes).is_ok() {
            let _ = std::fs::rename(&tmp, file);
        }
    }
}
