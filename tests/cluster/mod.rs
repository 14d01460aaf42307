//! Real Kubernetes control planes for the end-to-end tests, built from upstream Go modules by
//! `tests/cluster/build.sh` (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
//! KWOK) and started here on loopback ports: one independent cluster per kubeconfig context,
//! each with its own etcd, CA and serving certificate, bearer tokens, an audit log, and
//! simulated nodes (KWOK plays their kubelets: pods the scheduler binds become Running and
//! Ready, pods of Jobs complete).
//!
//! A [`Fleet`] tears everything down when dropped — on success, failure or panic — and after
//! a failure keeps its folder and prints where each component's log is. Processes are
//! guarded (see `process.rs`): even a test killed outright leaves none behind. One fleet runs
//! at a time in a test process, so that a 2-core machine is not asked to start a dozen API
//! servers at once.
//!
//! Nothing is skipped: without Go the build fails, and the test with it, saying how to
//! install Go.

#![allow(dead_code)]

#[path = "../fault_proxy/mod.rs"]
pub mod fault_proxy;
pub mod nim;
pub mod nodes;
pub mod pki;
pub mod process;
pub mod proxy;

use nodes::NodeSpec;
use pki::Pki;
use process::{Process, free_port};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The user of the harness's own token (group `system:masters`): nodes, test fixtures.
pub const ADMIN: &str = "test-admin";

/// The user of the token in the fleet's kubeconfig, which berth runs with (group
/// `system:masters`): the audit log tells its requests from the harness's.
pub const BERTH: &str = "berth-user";

/// How long one component may take to become ready on a loaded 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// The bin directory of the control plane, built (or found in the cache) once per test
/// process.
pub fn binaries() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| built_by("build.sh"))
}

/// The bin directory of Flux's controllers and CRDs (`build-flux.sh`), once per process.
pub fn flux_binaries() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| built_by("build-flux.sh"))
}

/// Runs `tests/cluster/SCRIPT`, which builds (or finds cached) and prints a bin directory.
fn built_by(script: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/cluster")
        .join(script);
    let out = std::process::Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}); see the messages above",
        script.display(),
        out.status
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The tokio runtime the harness's own requests run on.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// The workload whose Job's pods KWOK keeps running (see `Cluster::kwok_stages`).
pub const HELD_JOB_WORKLOAD: &str = "running_sweep";

/// One cluster: its processes, address, credentials and folder.
pub struct Cluster {
    pub context: String,
    pub dir: PathBuf,
    pub port: u16,
    pub pki: Pki,
    pub admin_token: String,
    /// The token of [`BERTH`].
    pub berth_token: String,
    /// Tokens of further users (`--token-auth-file`, no groups), by user name.
    pub tokens: Vec<(String, String)>,
    http: reqwest::Client,
    /// For the components' health endpoints (self-signed serving certificates).
    insecure: reqwest::Client,
    processes: Vec<Process>,
}

/// An HTTP answer of the API server.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// PersistentVolumes each test cluster starts with ([`Cluster::create_volumes`]).
pub const VOLUMES: usize = 24;

impl Cluster {
    /// Starts etcd, the API server, the controller manager, the scheduler and KWOK, creates
    /// `nodes` and waits until they are Ready. `users` get bearer tokens and no permission.
    pub fn start(context: &str, dir: &Path, nodes: &[NodeSpec], users: &[&str]) -> Cluster {
        let bin = binaries();
        std::fs::create_dir_all(dir.join("logs")).expect("cluster dir");
        let pki = Pki::create(dir);
        let admin_token = pki::token(ADMIN);
        let berth_token = pki::token(BERTH);
        let tokens: Vec<(String, String)> = users
            .iter()
            .map(|u| (u.to_string(), pki::token(u)))
            .collect();
        let mut csv = format!(
            "{admin_token},{ADMIN},{ADMIN},\"system:masters\"\n{berth_token},{BERTH},{BERTH},\"system:masters\"\n"
        );
        for (user, token) in &tokens {
            csv.push_str(&format!("{token},{user},{user}\n"));
        }
        std::fs::write(dir.join("tokens.csv"), csv).expect("tokens");
        std::fs::write(
            dir.join("audit-policy.yaml"),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n",
        )
        .expect("audit policy");
        let ca = reqwest::Certificate::from_pem(&std::fs::read(&pki.ca_cert).expect("ca"))
            .expect("ca pem");
        let http = reqwest::Client::builder()
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(30))
            .build()
            .expect("http client");
        let insecure = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(5))
            .build()
            .expect("http client");
        let mut cluster = Cluster {
            context: context.to_string(),
            dir: dir.to_path_buf(),
            port: free_port(),
            pki,
            admin_token,
            berth_token,
            tokens,
            http,
            insecure,
            processes: Vec::new(),
        };
        let etcd = cluster.start_etcd(bin);
        cluster.start_apiserver(bin, &etcd);
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        std::fs::write(
            &admin_kubeconfig,
            kubeconfig(&[(
                context,
                &cluster.server(),
                &cluster.pki.ca_cert,
                &cluster.admin_token,
            )]),
        )
        .expect("write kubeconfig");
        cluster.start_controllers(bin, &admin_kubeconfig);
        for node in nodes {
            let answer = cluster.request("POST", "/api/v1/nodes", Some(node.to_json()));
            assert_eq!(
                answer.status, 201,
                "create node {}: {:?}",
                node.name, answer.body
            );
        }
        cluster.wait_nodes_ready(nodes.len());
        cluster.create_volumes(VOLUMES);
        cluster
    }

    /// `count` PersistentVolumes of 1 TiB, every access mode, no storage class: what a
    /// storage provisioner would make, since KWOK's nodes have no CSI driver. The real
    /// controller manager binds the claims berth renders (model staging) to them, and the
    /// real scheduler then places the pods that mount them.
    fn create_volumes(&self, count: usize) {
        for i in 0..count {
            let volume = serde_json::json!({
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": format!("test-volume-{i}")},
                "spec": {
                    "capacity": {"storage": "1Ti"},
                    "accessModes": ["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": format!("/var/lib/test-volumes/{i}")},
                },
            });
            let answer = self.request("POST", "/api/v1/persistentvolumes", Some(volume));
            assert_eq!(answer.status, 201, "create volume: {:?}", answer.body);
        }
    }

    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Where each component's log is.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.processes.iter().map(|p| p.log.clone()).collect()
    }

    fn spawn(&mut self, name: &str, bin: &Path, args: &[String]) {
        let log = self.dir.join("logs").join(format!("{name}.log"));
        self.processes
            .push(Process::spawn(name, &bin.join(name), args, &log));
    }

    /// Waits until `url` answers 200 (with the admin token when `authorised`), failing with
    /// the tail of the last component's log when it exits or the time runs out.
    fn wait_ready(&mut self, url: &str, authorised: bool) {
        let deadline = Instant::now() + START_TIMEOUT;
        let client = if authorised {
            &self.http
        } else {
            &self.insecure
        };
        loop {
            let process = self.processes.last_mut().expect("a process");
            if let Some(status) = process.exited() {
                panic!(
                    "{} of cluster `{}` exited ({status}) before it was ready; log {}:\n{}",
                    process.name,
                    self.context,
                    process.log.display(),
                    process.log_tail(30)
                );
            }
            let mut request = client.get(url);
            if authorised {
                request = request.bearer_auth(&self.admin_token);
            }
            let ok = runtime().block_on(async {
                matches!(request.send().await, Ok(r) if r.status().is_success())
            });
            if ok {
                return;
            }
            if Instant::now() > deadline {
                let process = self.processes.last().expect("a process");
                panic!(
                    "{} of cluster `{}` not ready after {:?}; log {}:\n{}",
                    process.name,
                    self.context,
                    START_TIMEOUT,
                    process.log.display(),
                    process.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts etcd; returns its client URL.
    fn start_etcd(&mut self, bin: &Path) -> String {
        let (client, peer) = (free_port(), free_port());
        let url = format!("http://127.0.0.1:{client}");
        let args = [
            format!("--data-dir={}", self.dir.join("etcd").display()),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer}"),
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ];
        self.spawn("etcd", bin, &args);
        self.wait_ready(&format!("{url}/health"), false);
        url
    }

    fn start_apiserver(&mut self, bin: &Path, etcd: &str) {
        let d = |name: &str| self.dir.join(name).display().to_string();
        let args = [
            format!("--etcd-servers={etcd}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // No `kubernetes` Service endpoints: nothing in these clusters dials the API server
            // through its Service, and a loopback address may not be an endpoint.
            "--endpoint-reconciler-type=none".into(),
            format!("--secure-port={}", self.port),
            format!("--cert-dir={}", d("certs")),
            format!("--tls-cert-file={}", self.pki.server_cert.display()),
            format!("--tls-private-key-file={}", self.pki.server_key.display()),
            format!("--token-auth-file={}", d("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-issuer=https://127.0.0.1:{}", self.port),
            format!("--service-account-key-file={}", self.pki.sa_pub.display()),
            format!(
                "--service-account-signing-key-file={}",
                self.pki.sa_key.display()
            ),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--allow-privileged=true".into(),
            format!("--audit-policy-file={}", d("audit-policy.yaml")),
            format!("--audit-log-path={}", d("audit.log")),
            "--audit-log-maxsize=1000".into(),
        ];
        self.spawn("kube-apiserver", bin, &args);
        let url = format!("{}/readyz", self.server());
        self.wait_ready(&url, true);
    }

    fn start_controllers(&mut self, bin: &Path, kubeconfig: &Path) {
        let k = format!("--kubeconfig={}", kubeconfig.display());
        let kcm = free_port();
        self.spawn(
            "kube-controller-manager",
            bin,
            &[
                k.clone(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={kcm}"),
                format!(
                    "--service-account-private-key-file={}",
                    self.pki.sa_key.display()
                ),
                format!("--root-ca-file={}", self.pki.ca_cert.display()),
                "--use-service-account-credentials=false".into(),
                // Ready pods and finished Jobs are noticed at once, not on a resync.
                "--concurrent-deployment-syncs=5".into(),
            ],
        );
        self.wait_ready(&format!("https://127.0.0.1:{kcm}/healthz"), false);
        let scheduler = free_port();
        self.spawn(
            "kube-scheduler",
            bin,
            &[
                k.clone(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={scheduler}"),
            ],
        );
        self.wait_ready(&format!("https://127.0.0.1:{scheduler}/healthz"), false);
        let kwok = free_port();
        self.spawn(
            "kwok",
            bin,
            &[
                k,
                "--manage-all-nodes=false".into(),
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".into(),
                "--manage-nodes-with-label-selector=".into(),
                "--cidr=10.0.0.0/16".into(),
                "--node-ip=10.0.0.1".into(),
                "--node-lease-duration-seconds=40".into(),
                format!("--server-address=127.0.0.1:{kwok}"),
                format!("--config={}", self.kwok_stages(bin).display()),
            ],
        );
        self.wait_ready(&format!("http://127.0.0.1:{kwok}/healthz"), false);
    }

    /// KWOK's stages as built (`build.sh`), but for one thing: the pods of a workload named
    /// [`HELD_JOB_WORKLOAD`] are never completed, so a Job whose pods keep holding GPUs, as a
    /// long training run's do, can be seen (KWOK otherwise completes a Job's pods at once).
    fn kwok_stages(&self, bin: &Path) -> PathBuf {
        let built = std::fs::read_to_string(bin.join("kwok-stages.yaml")).expect("kwok stages");
        let owned_by_job = "    - key: '.metadata.ownerReferences.[].kind'\n      operator: 'In'\n      values:\n      - 'Job'\n";
        assert_eq!(
            built.matches(owned_by_job).count(),
            1,
            "KWOK's pod-complete stage selects a Job's pods as it did: {built}"
        );
        let held = format!(
            "{owned_by_job}    - key: '.metadata.labels[\"berth.dev/workload\"]'\n      operator: 'NotIn'\n      values:\n      - '{HELD_JOB_WORKLOAD}'\n"
        );
        let path = self.dir.join("kwok-stages.yaml");
        std::fs::write(&path, built.replace(owned_by_job, &held)).expect("write kwok stages");
        path
    }

    fn wait_nodes_ready(&self, count: usize) {
        self.wait_for("every node Ready and untainted", START_TIMEOUT, || {
            let nodes = self.list("/api/v1/nodes");
            nodes.len() == count
                && nodes.iter().all(|n| {
                    let ready = n["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True");
                    let not_ready_taint = n["spec"]["taints"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|t| t["key"] == "node.kubernetes.io/not-ready");
                    ready && !not_ready_taint
                })
        });
    }

    /// One request as the admin; JSON body when `body` is set (`PATCH` bodies are
    /// server-side apply patches).
    pub fn request(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        self.request_as(&self.admin_token, method, path, body)
    }

    pub fn request_as(&self, token: &str, method: &str, path: &str, body: Option<Value>) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let is_patch = method == reqwest::Method::PATCH;
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.server()))
            .bearer_auth(token);
        if let Some(body) = body {
            let kind = if is_patch {
                "application/apply-patch+yaml"
            } else {
                "application/json"
            };
            request = request.header("content-type", kind).body(body.to_string());
        }
        runtime().block_on(async {
            let response = request.send().await.expect("request to the API server");
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            Answer {
                status,
                body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
            }
        })
    }

    /// The object at `path`, if it exists.
    pub fn get(&self, path: &str) -> Option<Value> {
        let answer = self.request("GET", path, None);
        match answer.status {
            200 => Some(answer.body),
            404 => None,
            other => panic!("GET {path}: {other} {:?}", answer.body),
        }
    }

    /// The items of the collection at `path`.
    pub fn list(&self, path: &str) -> Vec<Value> {
        let answer = self.request("GET", path, None);
        assert_eq!(answer.status, 200, "GET {path}: {:?}", answer.body);
        answer.body["items"].as_array().cloned().unwrap_or_default()
    }

    /// Server-side applies `object` at `path` as field manager `manager`.
    pub fn apply_as_manager(
        &self,
        manager: &str,
        path: &str,
        object: Value,
        force: bool,
    ) -> Answer {
        let sep = if path.contains('?') { '&' } else { '?' };
        let path = format!("{path}{sep}fieldManager={manager}&force={force}");
        self.request("PATCH", &path, Some(object))
    }

    /// Waits until every CustomResourceDefinition of `names` is established.
    pub fn wait_crds_established(&self, names: &[String], timeout: Duration) {
        self.wait_for("CRDs to be established", timeout, || {
            names.iter().all(|name| {
                let answer = self.request(
                    "GET",
                    &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
                    None,
                );
                answer.body["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Established" && c["status"] == "True")
                    })
            })
        });
    }

    /// Polls `check` every 100 ms until it holds; panics after `timeout`.
    pub fn wait_for(&self, what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        while !check() {
            assert!(
                Instant::now() < deadline,
                "cluster `{}`: timed out after {timeout:?} waiting for {what}",
                self.context
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every audit event the API server has logged so far (stage `ResponseComplete`).
    pub fn audit(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.join("audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .collect()
    }

    /// `VERB requestURI` of every write `user` made that was not a dry run.
    pub fn writes_by(&self, user: &str) -> Vec<String> {
        self.audit()
            .into_iter()
            .filter(|e| e["user"]["username"] == user)
            // The apply locks' writes are counted apart (`lease_writes_by`).
            .filter(|e| e["objectRef"]["resource"] != "leases")
            .filter(|e| {
                matches!(
                    e["verb"].as_str(),
                    Some("create" | "update" | "patch" | "delete" | "deletecollection")
                )
            })
            .map(|e| {
                format!(
                    "{} {}",
                    e["verb"].as_str().unwrap_or(""),
                    e["requestURI"].as_str().unwrap_or("")
                )
            })
            .filter(|line| !line.contains("dryRun=All"))
            .collect()
    }

    /// `user`'s writes of Leases (the apply locks), as `verb path`.
    pub fn lease_writes_by(&self, user: &str) -> Vec<String> {
        self.audit()
            .into_iter()
            .filter(|e| e["user"]["username"] == user)
            .filter(|e| e["objectRef"]["resource"] == "leases")
            .filter(|e| matches!(e["verb"].as_str(), Some("create" | "update" | "patch")))
            .map(|e| {
                format!(
                    "{} {}",
                    e["verb"].as_str().unwrap_or(""),
                    e["requestURI"].as_str().unwrap_or("")
                )
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The controllers before the API server, the API server before etcd.
        while let Some(mut process) = self.processes.pop() {
            process.stop();
        }
    }
}

/// A kubeconfig naming one context per `(context, server, ca file, token)`.
pub fn kubeconfig(entries: &[(&str, &str, &Path, &str)]) -> String {
    let mut clusters = String::new();
    let mut users = String::new();
    let mut contexts = String::new();
    for (context, server, ca, token) in entries {
        clusters.push_str(&format!(
            "- name: {context}\n  cluster:\n    server: {server}\n    certificate-authority: {}\n",
            ca.display()
        ));
        users.push_str(&format!(
            "- name: {context}-user\n  user:\n    token: {token}\n"
        ));
        contexts.push_str(&format!(
            "- name: {context}\n  context:\n    cluster: {context}\n    user: {context}-user\n"
        ));
    }
    let current = entries.first().map_or("", |e| e.0);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n{clusters}users:\n{users}contexts:\n{contexts}current-context: {current}\n"
    )
}

/// Several clusters, one per context, started together; a kubeconfig naming them all.
pub struct Fleet {
    pub clusters: Vec<Cluster>,
    pub dir: PathBuf,
    /// A kubeconfig naming every cluster, with the [`BERTH`] user's token.
    pub kubeconfig: PathBuf,
    temp: Option<tempfile::TempDir>,
    _turn: MutexGuard<'static, ()>,
}

impl Fleet {
    /// Starts one cluster per `(context, nodes)`, in parallel; `users` get tokens on each.
    pub fn start(specs: &[(String, Vec<NodeSpec>)], users: &[&str]) -> Fleet {
        static TURN: Mutex<()> = Mutex::new(());
        let turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let temp = tempfile::Builder::new()
            .prefix("berth-fleet-")
            .tempdir()
            .expect("fleet dir");
        let dir = temp.path().to_path_buf();
        let clock = Instant::now();
        let started: Vec<std::thread::Result<Cluster>> = std::thread::scope(|scope| {
            let handles: Vec<_> = specs
                .iter()
                .map(|(context, nodes)| {
                    let dir = &dir;
                    scope.spawn(move || {
                        // One more try in a fresh folder: a loopback port found free may be
                        // taken by another process before the component binds it.
                        let first = std::panic::catch_unwind(|| {
                            Cluster::start(context, &dir.join(context), nodes, users)
                        });
                        first.unwrap_or_else(|_| {
                            eprintln!("cluster `{context}` failed to start; trying once more");
                            Cluster::start(context, &dir.join(format!("{context}-2")), nodes, users)
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let mut clusters = Vec::new();
        let mut failure = None;
        for result in started {
            match result {
                Ok(cluster) => clusters.push(cluster),
                Err(panic) => failure = failure.or(Some(panic)),
            }
        }
        if let Some(panic) = failure {
            drop(clusters);
            let kept = temp.keep();
            eprintln!(
                "test clusters failed to start; their logs are kept in {}",
                kept.display()
            );
            std::panic::resume_unwind(panic);
        }
        eprintln!(
            "{} test cluster(s) started in {:.1?}: {}",
            clusters.len(),
            clock.elapsed(),
            dir.display()
        );
        let kubeconfig = dir.join("kubeconfig");
        let entries: Vec<(&str, String, &Path, &str)> = clusters
            .iter()
            .map(|c| {
                (
                    c.context.as_str(),
                    c.server(),
                    c.pki.ca_cert.as_path(),
                    c.berth_token.as_str(),
                )
            })
            .collect();
        let entries: Vec<(&str, &str, &Path, &str)> = entries
            .iter()
            .map(|(a, b, c, d)| (*a, b.as_str(), *c, *d))
            .collect();
        std::fs::write(&kubeconfig, self::kubeconfig(&entries)).expect("write kubeconfig");
        Fleet {
            clusters,
            dir,
            kubeconfig,
            temp: Some(temp),
            _turn: turn,
        }
    }

    /// One cluster per Kubernetes context of the compiled spec, with the simulated nodes of
    /// its pools.
    pub fn for_ir(ir: &berth_compiler::ir::Ir, users: &[&str]) -> Fleet {
        let specs: Vec<(String, Vec<NodeSpec>)> = nodes::contexts(ir)
            .into_iter()
            .map(|context| {
                let nodes = nodes::nodes_for_context(ir, &context);
                (context, nodes)
            })
            .collect();
        Fleet::start(&specs, users)
    }

    pub fn cluster(&self, context: &str) -> &Cluster {
        self.clusters
            .iter()
            .find(|c| c.context == context)
            .unwrap_or_else(|| panic!("no test cluster for context `{context}`"))
    }

    /// Every token, for tests that check none is printed.
    pub fn secrets(&self) -> Vec<String> {
        self.clusters
            .iter()
            .flat_map(|c| {
                [c.admin_token.clone(), c.berth_token.clone()]
                    .into_iter()
                    .chain(c.tokens.iter().map(|t| t.1.clone()))
            })
            .collect()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let logs: Vec<PathBuf> = self.clusters.iter().flat_map(Cluster::logs).collect();
        self.clusters.clear();
        if std::thread::panicking()
            && let Some(temp) = self.temp.take()
        {
            let kept = temp.keep();
            eprintln!(
                "the test failed; the clusters' folder is kept: {}",
                kept.display()
            );
            for log in logs {
                eprintln!("  log: {}", log.display());
            }
        }
    }
}

/// A spec compiled and planned at `at`, its plan saved in a temp dir it owns.
pub struct Planned {
    pub spec: PathBuf,
    pub ir: berth_compiler::ir::Ir,
    pub plan: berth_compiler::plan::Plan,
    /// The saved plan (pretty JSON).
    pub plan_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Planned {
    pub fn plan_arg(&self) -> &str {
        self.plan_path.to_str().expect("UTF-8 path")
    }

    pub fn spec_arg(&self) -> &str {
        self.spec.to_str().expect("UTF-8 path")
    }
}

pub fn plan_spec(spec: &Path, at: &str) -> Planned {
    use berth_runtime::files::{self, FsReader};
    let loaded = files::load(&[spec.to_path_buf()], &FsReader).expect("load spec");
    let sources = berth_runtime::files::relative_sources(spec, &loaded);
    let planned = berth_compiler::driver::plan(&sources, at.parse().expect("at"))
        .unwrap_or_else(|_| panic!("{} plans", spec.display()));
    let ir = berth_compiler::driver::compile(&sources)
        .ir
        .expect("the spec compiles");
    let dir = tempfile::tempdir().expect("temp dir");
    let plan_path = dir.path().join("plan.json");
    std::fs::write(
        &plan_path,
        serde_json::to_string_pretty(&planned.plan).expect("json"),
    )
    .expect("write plan");
    Planned {
        spec: spec.to_path_buf(),
        ir,
        plan: planned.plan,
        plan_path,
        _dir: dir,
    }
}
