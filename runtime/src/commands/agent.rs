//! `berth agent`: the edge agent ([`crate::agent`]) run in the foreground, its API served
//! over HTTP or TLS, until SIGTERM or SIGINT.

use crate::agent::state::StateError;
use crate::agent::{Agent, AgentError, Config, Feed, GpuChoice, api, tls};
use crate::backends::edge::bundle::keys;
use crate::report::{Exit, Ui};
use crate::tasks::{async_runtime, shutdown_signal};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// Directory of the agent's durable state (database, model cache, logs).
    #[arg(long, value_name = "DIR")]
    pub state: PathBuf,
    /// The control plane's public key (`berth keys generate`): only bundles it signed run.
    #[arg(long, value_name = "KEY.pub")]
    pub trust: PathBuf,
    /// The bundle to pull: an http(s) URL, `file://PATH` or a path.
    #[arg(long, value_name = "URL", required_unless_present = "import")]
    pub source: Option<String>,
    /// A carried bundle (`berth bundle export`): the OCI image layout in DIR, read at start
    /// and watched every --interval; its bundle and artifacts need no network.
    #[arg(long = "import", value_name = "DIR")]
    pub import: Option<PathBuf>,
    /// Address of the HTTP API.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7443")]
    pub listen: SocketAddr,
    /// PEM certificate chain (leaf first) to serve the API over TLS; needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// File holding the bearer token API callers must present.
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
    /// Accept only bundles for this target (by default: the target of the first accepted).
    #[arg(long, value_name = "NAME")]
    pub target: Option<String>,
    /// Seconds between pulls and looks at --import (`POST /v1/sync`: at once).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub interval: f64,
    /// Bytes the model cache may hold before unused artifacts are evicted.
    #[arg(long, value_name = "BYTES", default_value_t = 50 << 30)]
    pub cache_budget: u64,
    /// Most telemetry events kept unacknowledged, whatever the workloads' buffers allow.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub max_events: u64,
    /// Replay GPU samples from this file of JSON lines instead of asking NVML.
    #[arg(long, value_name = "FILE")]
    pub gpu_samples: Option<PathBuf>,
    /// Do not sample GPUs.
    #[arg(long, conflicts_with = "gpu_samples")]
    pub no_gpu: bool,
    /// Seconds between GPU samples (NVML refreshes utilisation every 1/6 to 1 s).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub gpu_interval: f64,
    /// Seconds between GPU samples recorded as telemetry.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub gpu_record_interval: f64,
    /// PEM roots to trust for OCI registries (`oci://` artifacts), besides the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// Registry credentials in Docker's `config.json` form (`auths.<registry>.auth`).
    #[arg(long, value_name = "FILE")]
    pub registry_auth: Option<PathBuf>,
}

fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.01)).unwrap_or(Duration::from_secs(1))
}

/// Runs `berth agent`: the edge agent in the foreground until SIGTERM or SIGINT.
pub fn run(args: AgentArgs, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let trust = match keys::read_verifying(&args.trust) {
        Ok(key) => key,
        Err(e) => {
            ui.problem(
                &e,
                Some("--trust takes the .pub file `berth keys generate` wrote"),
            )?;
            return Ok(Exit::Trouble);
        }
    };
    let token = match std::fs::read_to_string(&args.token_file) {
        Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
        Ok(_) => {
            ui.problem(
                &format_args!("the token file `{}` is empty", args.token_file.display()),
                None,
            )?;
            return Ok(Exit::Trouble);
        }
        Err(e) => {
            ui.problem(
                &format_args!(
                    "cannot read the token file `{}`: {e}",
                    args.token_file.display()
                ),
                None,
            )?;
            return Ok(Exit::Trouble);
        }
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => match tls::server_config(cert, key) {
            Ok(config) => Some(config),
            Err(e) => {
                ui.problem(&e, Some("--tls-cert and --tls-key take PEM files"))?;
                return Ok(Exit::Trouble);
            }
        },
        _ => None,
    };
    let gpu = match (&args.gpu_samples, args.no_gpu) {
        (Some(path), _) => GpuChoice::Recorded(path.clone()),
        (None, true) => GpuChoice::Off,
        (None, false) => GpuChoice::Nvml,
    };
    let config = Config {
        state_dir: args.state.clone(),
        feed: Feed::Pull {
            source: args.source.clone(),
            import: args.import.clone(),
            trust: Box::new(trust),
            interval: seconds(args.interval),
        },
        target: args.target.clone(),
        cache_budget: args.cache_budget,
        max_events: args.max_events,
        gpu,
        gpu_interval: seconds(args.gpu_interval),
        gpu_process_every: 10,
        gpu_record_interval: seconds(args.gpu_record_interval),
        registry_ca: args.registry_ca.clone(),
        registry_auth: args.registry_auth.clone(),
    };
    let Some(runtime) = async_runtime(ui)? else {
        return Ok(Exit::Trouble);
    };
    runtime.block_on(async {
        let agent = match Agent::open(config) {
            Ok(agent) => agent,
            Err(e) => {
                let hint = match &e {
                    AgentError::State(StateError::Busy { .. }) => {
                        "another agent is using this --state directory: stop it, or give this \
                         one its own directory"
                    }
                    AgentError::State(StateError::Unusable { .. }) => {
                        "check the permissions and free space of the --state directory"
                    }
                    _ => "",
                };
                ui.problem(&e, (!hint.is_empty()).then_some(hint))?;
                return Ok(Exit::Trouble);
            }
        };
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                ui.problem(&format_args!("cannot listen on {}: {e}", args.listen), None)?;
                return Ok(Exit::Trouble);
            }
        };
        let address = listener.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let api = tokio::spawn(api::serve(listener, tls, agent.clone(), token));
        let run = tokio::spawn(agent.clone().run(shutdown_signal()));
        // Give the GPU probe a moment to report what it found.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let gpus = agent.gpus.lock().map(|g| g.clone()).unwrap_or_default();
        ui.status(&format_args!("agent listening on {scheme}://{address}"))?;
        match gpus.unavailable {
            Some(reason) => ui.status(&format_args!("gpu: {reason}"))?,
            None => ui.status(&format_args!("gpu: {}", gpus.probe))?,
        }
        ui.err.flush()?;
        let _ = run.await;
        api.abort();
        ui.status(&"agent stopped")?;
        Ok(Exit::Clean)
    })
}
