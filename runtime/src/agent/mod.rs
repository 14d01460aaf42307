//! The berth agent: runs one target's workloads from signed bundles, on its own when the
//! control plane is out of reach (docs/agent.md).
//!
//! One loop pulls the bundle (on an interval and on `POST /v1/sync`), verifies and admits it
//! ([`crate::backends::edge::bundle`]), stores it ([`state`]) and reconciles: artifacts into the model cache
//! ([`cache`]), then replicas started, restarted and stopped ([`supervise`]). A second loop
//! samples the GPUs ([`gpu`]) and reclaims idle workloads; the HTTP API ([`api`]) reads what
//! both know. The same agent runs embedded in `berth apply` for `runtime = local` targets,
//! fed bundles in-process instead of pulling.
//!
//! Must never: run a bundle that did not verify, replace the running bundle with a rejected
//! one, or run an artifact whose digest did not match.

pub mod api;
pub mod cache;
pub mod floor;
pub mod gpu;
pub mod import;
pub mod metrics;
pub mod oci;
pub mod source;
pub mod state;
pub mod supervise;
pub mod tls;

use crate::backends::edge::bundle::{self, Bundle, BundleWorkload, SignedBundle};
use ed25519_dalek::VerifyingKey;
use serde::Serialize;
use state::{NewEvent, State};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use supervise::Running;
use tokio::sync::Notify;

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Where desired state comes from.
pub enum Feed {
    /// Pulled from a bundle store, or read from a carried bundle (an OCI image layout on
    /// removable media, [`import`]), or both, and verified with the trusted key.
    Pull {
        source: Option<String>,
        /// The directory of a carried bundle, read at start and watched every interval.
        import: Option<PathBuf>,
        trust: Box<VerifyingKey>,
        interval: Duration,
    },
    /// Handed over in-process by `berth apply` (local targets).
    Embedded,
}

/// The agent's audit trail, in its state directory (`berth audit --log STATE/audit.redb`).
pub const AUDIT_LOG: &str = "audit.redb";

/// Which GPU probe to use.
pub enum GpuChoice {
    Nvml,
    Recorded(PathBuf),
    Off,
}

pub struct Config {
    pub state_dir: PathBuf,
    pub feed: Feed,
    /// Refuse bundles for any other target.
    pub target: Option<String>,
    pub cache_budget: u64,
    pub max_events: u64,
    pub gpu: GpuChoice,
    pub gpu_interval: Duration,
    /// Processes are enumerated every this many samples.
    pub gpu_process_every: u32,
    /// A GPU sample is recorded as telemetry at most this often.
    pub gpu_record_interval: Duration,
    /// OCI registries: extra PEM roots, and credentials in Docker's `config.json` form.
    pub registry_ca: Option<PathBuf>,
    pub registry_auth: Option<PathBuf>,
}

impl Config {
    /// An embedded agent in `state_dir` that samples no GPU, with a 1 MiB cache and 1000
    /// events: what the API's tests and its fuzz target serve from.
    pub fn minimal(state_dir: PathBuf) -> Config {
        Config {
            state_dir,
            feed: Feed::Embedded,
            target: None,
            cache_budget: 1 << 20,
            max_events: 1000,
            gpu: GpuChoice::Off,
            gpu_interval: Duration::from_secs(1),
            gpu_process_every: 10,
            gpu_record_interval: Duration::from_secs(60),
            registry_ca: None,
            registry_auth: None,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SourceStatus {
    pub address: Option<String>,
    pub last_attempt_ms: Option<u64>,
    pub last_success_ms: Option<u64>,
    pub reachable: Option<bool>,
    pub last_error: Option<String>,
    /// Why the last bundle the source offered was refused; cleared once the source offers
    /// one that is accepted (or the one already running).
    pub last_rejection: Option<String>,
    /// When that refusal happened (ms since the Unix epoch).
    pub last_rejection_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct GpuView {
    pub probe: String,
    /// Set when there is no usable probe ("no NVML: …").
    pub unavailable: Option<String>,
    pub devices: Vec<gpu::GpuSample>,
}

pub struct Agent {
    pub config: Config,
    pub state: Arc<State>,
    cache: cache::Cache,
    client: reqwest::Client,
    current: Mutex<Option<Bundle>>,
    running: tokio::sync::Mutex<BTreeMap<String, Running>>,
    /// Workloads that cannot run, and why (artifact rejected, no container runtime, …).
    blocked: Mutex<BTreeMap<String, String>>,
    /// Workloads reclaimed under the current generation: not restarted until a new one.
    reclaimed: Mutex<BTreeMap<String, u64>>,
    /// The last bundle accepted, as [`floor`] keeps it beside the database.
    floor: Mutex<Option<floor::Floor>>,
    pub source: Mutex<SourceStatus>,
    /// The carried bundle's directory, when the agent has one ([`import`]).
    pub import: Mutex<import::ImportStatus>,
    pub gpus: Mutex<GpuView>,
    pub sync_now: Notify,
    pub started: Instant,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("{0}")]
    Registries(String),
}

impl Agent {
    pub fn open(config: Config) -> Result<Arc<Agent>, AgentError> {
        let (state, recovered) =
            State::open_or_recover(&config.state_dir, config.max_events, now_ms() / 1000)?;
        let state = Arc::new(state);
        if let Some(r) = &recovered {
            tracing::error!(
                "the state database is corrupt ({}): moved it aside to `{}` and started with a \
                 fresh one; the bundle is fetched again from the source",
                r.reason,
                r.aside.display()
            );
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| AgentError::Client(e.to_string()))?;
        let registries = oci::Registries::from_files(
            config.registry_ca.as_deref(),
            config.registry_auth.as_deref(),
        )
        .map_err(AgentError::Registries)?;
        let cache = cache::Cache::new(
            config.state_dir.join("cache"),
            config.cache_budget,
            client.clone(),
        )
        .with_registries(registries);
        // The bundle of the previous life, verified when it was accepted.
        let current = state
            .meta("bundle")?
            .and_then(|bytes| serde_json::from_slice::<SignedBundle>(&bytes).ok())
            .and_then(|s| serde_json::from_str::<Bundle>(&s.payload).ok());
        let reclaimed = state
            .meta("reclaimed")?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let (address, import_dir) = match &config.feed {
            Feed::Pull { source, import, .. } => (source.clone(), import.clone()),
            Feed::Embedded => (None, None),
        };
        let agent = Arc::new(Agent {
            state,
            cache,
            client,
            current: Mutex::new(current),
            running: tokio::sync::Mutex::new(BTreeMap::new()),
            blocked: Mutex::new(BTreeMap::new()),
            reclaimed: Mutex::new(reclaimed),
            floor: Mutex::new(floor::read(&config.state_dir)),
            source: Mutex::new(SourceStatus {
                address,
                ..SourceStatus::default()
            }),
            import: Mutex::new(import::ImportStatus::new(import_dir)),
            gpus: Mutex::new(GpuView::default()),
            sync_now: Notify::new(),
            started: Instant::now(),
            config,
        });
        if let Some(r) = recovered {
            agent.record(
                "state_recovered",
                None,
                serde_json::json!({ "moved_aside": r.aside.display().to_string(), "reason": r.reason }),
            );
        }
        Ok(agent)
    }

    pub fn current(&self) -> Option<Bundle> {
        self.current.lock().ok().and_then(|c| c.clone())
    }

    fn keep_ns(&self) -> u64 {
        self.current()
            .and_then(|b| b.workloads.iter().map(|w| w.telemetry.buffer_ns()).max())
            .unwrap_or(bundle::LIVE_BUFFER_NS)
    }

    /// Appends to the agent's audit trail (`STATE/audit.redb`); a failure is logged, never
    /// fatal (the act has happened).
    fn audit(
        &self,
        action: crate::audit::Action,
        (target, plan_id): (&str, &str),
        detail: serde_json::Value,
    ) {
        let entry = crate::audit::Entry {
            actor: format!("agent:{target}"),
            action,
            plan_id: plan_id.to_string(),
            target: Some(target.to_string()),
            outcome: "ok".into(),
            detail,
        };
        let log = crate::audit::AuditLog::at(self.config.state_dir.join(AUDIT_LOG));
        if let Err(e) = log.append(entry) {
            tracing::warn!("audit: the record was not written: {e}");
        }
    }

    /// Records an agent-level event (kept as long as the longest workload buffer).
    pub fn record(&self, kind: &'static str, workload: Option<&str>, detail: serde_json::Value) {
        let keep_ns = self
            .current()
            .and_then(|b| {
                let w = b
                    .workloads
                    .iter()
                    .find(|w| Some(w.name.as_str()) == workload)?;
                Some(w.telemetry.buffer_ns())
            })
            .unwrap_or_else(|| self.keep_ns());
        let event = NewEvent {
            kind,
            workload: workload.map(str::to_string),
            detail,
            keep_ns,
        };
        let _ = self.state.record(event, now_ms());
    }

    /// Runs until `shutdown` completes, then stops every workload.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        let leftovers = supervise::stop_leftovers(&self.state);
        if !leftovers.is_empty() {
            self.record(
                "workload_exited",
                None,
                serde_json::json!({ "stopped_leftovers": leftovers }),
            );
        }
        let sampler = tokio::spawn(self.clone().sample_gpus());
        tokio::pin!(shutdown);
        let interval = match &self.config.feed {
            Feed::Pull { interval, .. } => *interval,
            Feed::Embedded => Duration::from_secs(5),
        };
        loop {
            self.pull().await;
            self.import_carried().await;
            self.reconcile().await;
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.sync_now.notified() => {}
                _ = &mut shutdown => break,
            }
        }
        sampler.abort();
        let running = std::mem::take(&mut *self.running.lock().await);
        for (_, r) in running {
            r.stop().await;
        }
    }

    /// Pulls once (pull feeds only); admits a new bundle or records why not.
    pub async fn pull(&self) {
        let Feed::Pull {
            source: Some(source),
            trust,
            ..
        } = &self.config.feed
        else {
            return;
        };
        let etag = self
            .state
            .meta("etag")
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok());
        let attempt = now_ms();
        let pulled = source::pull(&self.client, source, etag.as_deref()).await;
        let mut status = self.source.lock().map(|s| s.clone()).unwrap_or_default();
        status.last_attempt_ms = Some(attempt);
        match pulled {
            Err(e) => {
                status.reachable = Some(false);
                status.last_error = Some(e);
            }
            Ok(pulled) => {
                status.reachable = Some(true);
                status.last_error = None;
                status.last_success_ms = Some(attempt);
                let verdict = match pulled {
                    source::Pulled::NotModified => None,
                    source::Pulled::Changed { bytes, etag } => {
                        Some(self.admit(&bytes, etag.as_deref(), trust))
                    }
                    source::Pulled::TooLarge => {
                        let reason = format!(
                            "the bundle is larger than {} bytes",
                            source::MAX_BUNDLE_BYTES
                        );
                        Some(Err(self.refuse(reason)))
                    }
                };
                match verdict {
                    // What the source offers now is what runs: an older refusal is history
                    // (the `bundle_rejected` event keeps it).
                    Some(Ok(())) => {
                        status.last_rejection = None;
                        status.last_rejection_ms = None;
                    }
                    Some(Err(rejection)) => {
                        status.last_rejection = Some(rejection);
                        status.last_rejection_ms = Some(attempt);
                    }
                    None => {}
                }
            }
        }
        if let Ok(mut s) = self.source.lock() {
            *s = status;
        }
    }

    /// Verifies and admits a published bundle; the error is the reason it was rejected (also
    /// recorded as a `bundle_rejected` event).
    pub fn admit(
        &self,
        bytes: &[u8],
        etag: Option<&str>,
        trust: &VerifyingKey,
    ) -> Result<(), String> {
        match self.judge(bytes, trust) {
            Ok(None) => {
                // The same bundle again (a store without ETags): remember the tag only.
                if let Some(etag) = etag {
                    let _ = self.state.set_meta("etag", etag.as_bytes());
                }
                Ok(())
            }
            Ok(Some((signed, offered))) => self
                .install(&signed.to_bytes(), etag, offered)
                .inspect_err(|e| tracing::error!("cannot store an accepted bundle: {e}")),
            Err(e) => {
                // The same rejected content is not evaluated (nor reported) again.
                if let Some(etag) = etag {
                    let _ = self.state.set_meta("etag", etag.as_bytes());
                }
                Err(self.refuse(e.to_string()))
            }
        }
    }

    /// Whether the published bundle `bytes` may run: its signature verified with `trust`, then
    /// the admission rules (target, generation) against the running bundle and the floor.
    /// `None`: it is the bundle already running.
    fn judge(
        &self,
        bytes: &[u8],
        trust: &VerifyingKey,
    ) -> Result<Option<(SignedBundle, Bundle)>, bundle::BundleError> {
        let held = self.current();
        let (signed, offered) = SignedBundle::verify(bytes, trust)?;
        if held
            .as_ref()
            .is_some_and(|h| h.canonical_bytes() == offered.canonical_bytes())
        {
            return Ok(None);
        }
        bundle::admissible(&offered, held.as_ref(), self.config.target.as_deref())?;
        // The database may have been lost (moved aside when corrupt): the floor still
        // keeps an older or foreign bundle out.
        if let Some(floor) = self.floor.lock().ok().and_then(|f| f.clone()) {
            floor.admits(&offered, self.config.target.as_deref())?;
        }
        Ok(Some((signed, offered)))
    }

    /// Reports a refused bundle: a line on stderr and a `bundle_rejected` event. Returns the
    /// reason.
    fn refuse(&self, reason: String) -> String {
        let held = self.current().map(|h| h.generation);
        match held {
            Some(g) => tracing::warn!("bundle refused: {reason}; generation {g} keeps running"),
            None => tracing::warn!("bundle refused: {reason}"),
        }
        self.record(
            "bundle_rejected",
            None,
            serde_json::json!({ "reason": reason, "held": held }),
        );
        reason
    }

    /// Stores `bundle` as the one to run (with its bytes as published) and its event, in one
    /// transaction.
    pub fn install(&self, stored: &[u8], etag: Option<&str>, bundle: Bundle) -> Result<(), String> {
        let event = NewEvent {
            kind: "bundle_accepted",
            workload: None,
            detail: serde_json::json!({
                "generation": bundle.generation,
                "plan_id": bundle.plan_id,
                "target": bundle.target,
            }),
            keep_ns: bundle
                .workloads
                .iter()
                .map(|w| w.telemetry.buffer_ns())
                .max()
                .unwrap_or(bundle::LIVE_BUFFER_NS),
        };
        self.state
            .accept_bundle(stored, etag, event, now_ms())
            .map_err(|e| e.to_string())?;
        let signer = match &self.config.feed {
            Feed::Pull { trust, .. } => bundle::keys::fingerprint(trust),
            _ => "unknown".to_string(),
        };
        self.audit(
            crate::audit::Action::BundleAccepted,
            (&bundle.target, &bundle.plan_id),
            serde_json::json!({ "generation": bundle.generation, "signed_by": signer }),
        );
        let floor = floor::Floor::of(&bundle);
        if let Err(e) = floor::write(&self.config.state_dir, &floor) {
            // The database holds the bundle: admission stays guarded while it is sound.
            tracing::error!("cannot write the admission floor: {e}");
        }
        if let Ok(mut f) = self.floor.lock() {
            *f = Some(floor);
        }
        tracing::info!(
            "bundle accepted: generation {} of target `{}`",
            bundle.generation,
            bundle.target
        );
        if let Ok(mut current) = self.current.lock() {
            *current = Some(bundle);
        }
        Ok(())
    }

    /// Brings the running workloads in line with the current bundle.
    pub async fn reconcile(&self) {
        let Some(bundle) = self.current() else {
            return;
        };
        // Stop what is gone. What changed is stopped only once its new release can start
        // (its model fetched and verified, below): a model that cannot be had, or that is not
        // the one pinned, leaves the earlier release running.
        let gone: Vec<Running> = {
            let mut running = self.running.lock().await;
            let names: Vec<String> = running
                .keys()
                .filter(|name| !bundle.workloads.iter().any(|w| &w.name == *name))
                .cloned()
                .collect();
            names.iter().filter_map(|n| running.remove(n)).collect()
        };
        for r in gone {
            r.stop().await;
        }
        let reclaimed = self.reclaimed.lock().map(|r| r.clone()).unwrap_or_default();
        let mut needed = Vec::new();
        for w in &bundle.workloads {
            if let Some(v) = &w.variant
                && let Some(d) = &v.digest
            {
                needed.push(d.clone());
            }
            // `Some(true)`: this release runs; `Some(false)`: an earlier one does.
            let current = self.running.lock().await.get(&w.name).map(|r| r.spec == *w);
            if current == Some(true) {
                continue;
            }
            if reclaimed.get(&w.name) == Some(&bundle.generation) {
                if let Some(old) = self.running.lock().await.remove(&w.name) {
                    old.stop().await;
                }
                continue;
            }
            // Downloads happen without the lock: status and reclaim go on meanwhile.
            match self.prepare(w).await {
                Ok((launch, model)) => {
                    self.set_blocked(&w.name, None);
                    let old = self.running.lock().await.remove(&w.name);
                    if let Some(old) = old {
                        old.stop().await;
                    }
                    let ctx = supervise::Context {
                        state: self.state.clone(),
                        logs: self.config.state_dir.join("logs"),
                        target: bundle.target.clone(),
                        plan_id: bundle.plan_id.clone(),
                        model,
                    };
                    let run = supervise::start(w.clone(), launch, ctx);
                    self.running.lock().await.insert(w.name.clone(), run);
                }
                Err(reason) => self.set_blocked(&w.name, Some(reason)),
            }
        }
        // An earlier release still running keeps its model too.
        for r in self.running.lock().await.values() {
            if let Some(v) = &r.spec.variant
                && let Some(d) = &v.digest
            {
                needed.push(d.clone());
            }
        }
        self.cache.evict(&self.state, &needed);
    }

    fn set_blocked(&self, workload: &str, reason: Option<String>) {
        if let Ok(mut blocked) = self.blocked.lock() {
            match reason {
                Some(r) => blocked.insert(workload.to_string(), r),
                None => blocked.remove(workload),
            };
        }
    }

    /// The launch and the cached model of `w`, or why it cannot run.
    async fn prepare(
        &self,
        w: &BundleWorkload,
    ) -> Result<(supervise::Launch, Option<PathBuf>), String> {
        let launch = supervise::launch_for(&w.image)?;
        let Some(variant) = &w.variant else {
            return Ok((launch, None));
        };
        match self
            .cache
            .ensure_from(
                &self.state,
                &variant.staging.pull,
                &variant.artifact,
                variant.digest.as_deref(),
            )
            .await
        {
            Ok((path, fetched)) => {
                if fetched {
                    self.record(
                        "artifact_fetched",
                        Some(&w.name),
                        serde_json::json!({ "artifact": variant.artifact, "digest": variant.digest }),
                    );
                }
                Ok((launch, Some(path)))
            }
            Err(e) => {
                let reason = e.to_string();
                if !matches!(e, cache::FetchError::Fetch { .. }) {
                    self.record(
                        "artifact_rejected",
                        Some(&w.name),
                        serde_json::json!({ "artifact": variant.artifact, "reason": reason }),
                    );
                }
                Err(reason)
            }
        }
    }

    /// A snapshot for `GET /v1/status`.
    pub async fn status(&self) -> serde_json::Value {
        let bundle = self.current();
        let running = self.running.lock().await;
        let blocked = self.blocked.lock().map(|b| b.clone()).unwrap_or_default();
        let reclaimed = self.reclaimed.lock().map(|r| r.clone()).unwrap_or_default();
        let workloads: Vec<serde_json::Value> = bundle
            .iter()
            .flat_map(|b| &b.workloads)
            .map(|w| {
                let replicas = running
                    .get(&w.name)
                    .map(Running::statuses)
                    .unwrap_or_default();
                let state = if reclaimed
                    .get(&w.name)
                    .is_some_and(|g| Some(*g) == bundle.as_ref().map(|b| b.generation))
                {
                    "reclaimed"
                } else if blocked.contains_key(&w.name) {
                    "blocked"
                } else if replicas.iter().any(|r| r.state == "running") {
                    "running"
                } else {
                    "starting"
                };
                serde_json::json!({
                    "name": w.name,
                    "state": state,
                    "reason": blocked.get(&w.name),
                    "replicas": replicas,
                })
            })
            .collect();
        let (bytes, artifacts) = self.cache.usage(&self.state);
        let (buffered, dropped) = self.state.telemetry_counts().unwrap_or((0, 0));
        serde_json::json!({
            "target": bundle.as_ref().map(|b| &b.target),
            "generation": bundle.as_ref().map(|b| b.generation),
            "plan_id": bundle.as_ref().map(|b| &b.plan_id),
            "source": self.source.lock().map(|s| s.clone()).unwrap_or_default(),
            "import": self.import.lock().ok().filter(|i| i.dir.is_some()).map(|i| i.clone()),
            "workloads": workloads,
            "cache": { "bytes": bytes, "budget": self.cache.budget, "artifacts": artifacts },
            "gpus": self.gpus.lock().map(|g| g.clone()).unwrap_or_default(),
            "telemetry": { "buffered": buffered, "dropped": dropped },
            "uptime_s": self.started.elapsed().as_secs(),
        })
    }

    /// Samples the GPUs, records samples and reclaims idle workloads, forever.
    async fn sample_gpus(self: Arc<Self>) {
        let (probe, unavailable): (Option<Box<dyn gpu::GpuProbe>>, Option<String>) =
            match &self.config.gpu {
                GpuChoice::Off => (None, Some("GPU sampling is off".into())),
                GpuChoice::Nvml => match gpu::NvmlProbe::open() {
                    Ok(p) => (Some(Box::new(p)), None),
                    Err(e) => (None, Some(e)),
                },
                GpuChoice::Recorded(path) => match gpu::RecordedProbe::open(path) {
                    Ok(p) => (Some(Box::new(p)), None),
                    Err(e) => (None, Some(e)),
                },
            };
        if let Ok(mut view) = self.gpus.lock() {
            view.probe = probe
                .as_ref()
                .map_or_else(|| "none".into(), |p| p.describe());
            view.unavailable = unavailable;
        }
        let Some(mut probe) = probe else { return };
        let mut idle_since: BTreeMap<String, Instant> = BTreeMap::new();
        let mut last_recorded: Option<Instant> = None;
        let mut tick = 0u32;
        loop {
            let processes = tick.is_multiple_of(self.config.gpu_process_every.max(1));
            tick = tick.wrapping_add(1);
            // NVML calls block (process enumeration for milliseconds): on a blocking thread,
            // never on the runtime's threads that serve the API.
            let Ok((back, sampled)) = tokio::task::spawn_blocking(move || {
                let sampled = probe.sample(processes);
                (probe, sampled)
            })
            .await
            else {
                return;
            };
            probe = back;
            match sampled {
                Ok(mut devices) => {
                    let owners = supervise::owners(&*self.running.lock().await);
                    for d in &mut devices {
                        for p in d.all_processes_mut() {
                            if p.workload.is_none() {
                                let group = supervise::process_group(p.pid).unwrap_or(p.pid);
                                p.workload = owners.get(&group).cloned();
                            }
                        }
                    }
                    // Keep the last process list when this sample did not enumerate them.
                    if let Ok(mut view) = self.gpus.lock() {
                        for d in &mut devices {
                            if !d.processes_enumerated()
                                && let Some(last) = view.devices.iter().find(|o| o.index == d.index)
                            {
                                d.processes.clone_from(&last.processes);
                                if let (Some(now), Some(then)) = (&mut d.mig, &last.mig) {
                                    now.instances.clone_from(&then.instances);
                                }
                            }
                        }
                        view.devices = devices.clone();
                        view.unavailable = None;
                    }
                    if last_recorded.is_none_or(|t| t.elapsed() >= self.config.gpu_record_interval)
                    {
                        last_recorded = Some(Instant::now());
                        self.record(
                            "gpu_sample",
                            None,
                            serde_json::json!({ "devices": devices }),
                        );
                    }
                    self.reclaim_idle(&devices, &mut idle_since).await;
                }
                Err(e) => {
                    if let Ok(mut view) = self.gpus.lock() {
                        view.unavailable = Some(e);
                    }
                }
            }
            tokio::time::sleep(self.config.gpu_interval).await;
        }
    }

    /// Stops workloads whose reclaim rule's idle time has passed: a workload is busy while
    /// any GPU one of its processes uses shows utilisation above zero.
    async fn reclaim_idle(
        &self,
        devices: &[gpu::GpuSample],
        idle_since: &mut BTreeMap<String, Instant>,
    ) {
        let Some(bundle) = self.current() else { return };
        let mut running = self.running.lock().await;
        for w in &bundle.workloads {
            let Some(rule) = &w.reclaim else { continue };
            if w.gpus_per_replica == 0 || !running.contains_key(&w.name) {
                idle_since.remove(&w.name);
                continue;
            }
            // Utilisation the driver does not give (a MIG device) is never evidence of idleness.
            let busy = devices.iter().any(|d| {
                d.utilization.is_none_or(|u| u > 0)
                    && d.all_processes()
                        .any(|p| p.workload.as_deref() == Some(&w.name))
            });
            if busy {
                idle_since.remove(&w.name);
                continue;
            }
            let since = *idle_since
                .entry(w.name.clone())
                .or_insert_with(Instant::now);
            let idle = since.elapsed();
            if idle.as_nanos() >= u128::from(rule.idle_after_ns) {
                idle_since.remove(&w.name);
                if let Some(r) = running.remove(&w.name) {
                    r.stop().await;
                }
                if let Ok(mut reclaimed) = self.reclaimed.lock() {
                    reclaimed.insert(w.name.clone(), bundle.generation);
                    if let Ok(bytes) = serde_json::to_vec(&*reclaimed) {
                        let _ = self.state.set_meta("reclaimed", &bytes);
                    }
                }
                let detail = serde_json::json!({
                    "policy": rule.policy,
                    "idle_ms": idle.as_millis() as u64,
                    "gpus": w.gpus_per_replica * w.replicas,
                });
                self.record("reclaim", Some(&w.name), detail.clone());
                self.audit(
                    crate::audit::Action::Reclaimed,
                    (&bundle.target, &bundle.plan_id),
                    serde_json::json!({ "workload": w.name, "evidence": detail }),
                );
            }
        }
    }
}
