//! Real Flux reconciles what berth commits for an Arc target. A real control plane
//! (tests/cluster: etcd, kube-apiserver, controller-manager, scheduler, KWOK), Flux's real
//! source-controller and kustomize-controller built from their Go modules
//! (tests/cluster/build-flux.sh), the GitOps repository served over git's smart HTTP by
//! `git http-backend` (tests/git_http), and ARM by the test double (tests/arm).
//!
//! The one part played by the test is the Arc cluster agent's: it turns the Flux
//! configuration berth created through ARM into the `GitRepository` and `Kustomization`
//! objects the Arc extension makes from it (`<config>` and `<config>-<kustomization>`, in the
//! configuration's namespace, with its URL, branch, paths, prune, wait and intervals), and
//! reports their conditions back into the configuration's `statuses`, as the agent does.
//! Everything Flux does — fetching the repository, building the kustomization, applying,
//! waiting, pruning, reporting a broken commit — is real Flux.

mod arm;
mod cluster;
mod git_http;
mod isolated;
mod test_tls;

use arm::ArmDouble;
use cluster::nodes::NodeSpec;
use cluster::process::{Process, free_port};
use cluster::{Cluster, flux_binaries};
use git_http::{GitHttp, git};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CLUSTER_ID: &str =
    "/subscriptions/0000/resourceGroups/ai/providers/Microsoft.Kubernetes/connectedClusters/eu";
const FLUX_NS: &str = "flux-system";
/// How long Flux may take for one step on a loaded 2-core machine.
const FLUX_TIMEOUT: Duration = Duration::from_secs(180);

struct Setup {
    cluster: Cluster,
    arm: ArmDouble,
    git: GitHttp,
    dir: tempfile::TempDir,
    spec: PathBuf,
    controllers: Vec<Process>,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = Cluster::start(
            "arc-eu",
            &dir.path().join("cluster"),
            &[NodeSpec::cpu("eu-node-0", 32_000, 128 << 30)],
            &[],
        );
        let repos = dir.path().join("repos");
        std::fs::create_dir_all(&repos).expect("mkdir");
        git(
            &repos,
            &[
                "init",
                "--quiet",
                "--bare",
                "--initial-branch=main",
                "gitops.git",
            ],
        );
        git(
            &repos.join("gitops.git"),
            &["config", "http.receivepack", "true"],
        );
        let git = GitHttp::start(&repos);
        let spec = dir.path().join("spec");
        std::fs::create_dir(&spec).expect("mkdir");
        let mut setup = Setup {
            cluster,
            arm: ArmDouble::start(),
            git,
            dir,
            spec,
            controllers: Vec::new(),
        };
        setup.install_flux();
        setup
    }

    fn repo_url(&self) -> String {
        format!("{}/gitops.git", self.git.url)
    }

    /// Flux's CRDs, its namespace, and the two controllers against the cluster.
    fn install_flux(&mut self) {
        let bin = flux_binaries();
        let mut crds: Vec<PathBuf> = std::fs::read_dir(bin.join("crds"))
            .expect("CRDs")
            .flatten()
            .map(|e| e.path())
            .collect();
        crds.sort();
        let mut names = Vec::new();
        for crd in crds {
            let text = std::fs::read_to_string(&crd).expect("CRD");
            let body: Value =
                serde_saphyr::from_str(text.trim_start_matches("---\n")).expect("CRD YAML");
            let answer = self.cluster.request(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                Some(body),
            );
            assert_eq!(answer.status, 201, "{crd:?}: {:?}", answer.body);
            names.push(
                answer.body["metadata"]["name"]
                    .as_str()
                    .expect("name")
                    .to_string(),
            );
        }
        let answer = self.cluster.request(
            "POST",
            "/api/v1/namespaces",
            Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLUX_NS}})),
        );
        assert_eq!(answer.status, 201, "{:?}", answer.body);
        self.cluster.wait_crds_established(&names, FLUX_TIMEOUT);
        let kubeconfig = self.cluster.dir.join("admin.kubeconfig");
        let storage = free_port();
        let logs = self.cluster.dir.join("logs");
        let common = |health: u16| -> Vec<String> {
            vec![
                format!("KUBECONFIG={}", kubeconfig.display()),
                format!("RUNTIME_NAMESPACE={FLUX_NS}"),
            ]
            .into_iter()
            .chain([String::new()])
            .chain([
                format!("--metrics-addr=127.0.0.1:{}", free_port()),
                format!("--health-addr=127.0.0.1:{health}"),
                "--log-level=debug".to_string(),
            ])
            .collect()
        };
        let artifacts = self.dir.path().join("artifacts");
        std::fs::create_dir_all(&artifacts).expect("artifacts dir");
        let source_health = free_port();
        let mut args = common(source_health);
        args[2] = bin.join("source-controller").display().to_string();
        args.extend([
            format!(
                "--storage-path={}",
                self.dir.path().join("artifacts").display()
            ),
            format!("--storage-addr=127.0.0.1:{storage}"),
            format!("--storage-adv-addr=127.0.0.1:{storage}"),
        ]);
        self.controllers.push(Process::spawn(
            "source-controller",
            Path::new("/usr/bin/env"),
            &args,
            &logs.join("source-controller.log"),
        ));
        let kustomize_health = free_port();
        let mut args = common(kustomize_health);
        args[2] = bin.join("kustomize-controller").display().to_string();
        args.push("--no-remote-bases".to_string());
        self.controllers.push(Process::spawn(
            "kustomize-controller",
            Path::new("/usr/bin/env"),
            &args,
            &logs.join("kustomize-controller.log"),
        ));
        for port in [source_health, kustomize_health] {
            self.wait_healthy(port);
        }
    }

    fn wait_healthy(&mut self, port: u16) {
        let deadline = Instant::now() + FLUX_TIMEOUT;
        loop {
            let ok = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            if ok {
                return;
            }
            for c in &mut self.controllers {
                if let Some(status) = c.exited() {
                    panic!("{} exited ({status}):\n{}", c.name, c.log_tail(40));
                }
            }
            assert!(
                Instant::now() < deadline,
                "a Flux controller never became healthy"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn write_spec(&self, workload: &str) {
        let text = format!(
            r#"target eu_arc {{
  class        = cloud
  runtime      = arc {{ cluster = "{CLUSTER_ID}"
                      repo = "{repo}"  branch = "main"  path = "clusters/eu"  namespace = "ml"
                      context = "arc-eu" }}
  connectivity = connected
  cpu    = 16
  memory = 64GiB
}}

workload {workload} {{
  release  = "1"
  image    = "registry.k8s.io/pause:3.10"
  class    = production
  identity = service_account("{workload}")
  replicas = 2
  resources {{ cpu = 0.1  memory = 64MiB }}
}}
"#,
            repo = self.repo_url()
        );
        std::fs::write(self.spec.join("arc.berth"), text).expect("write spec");
    }

    fn berth(&self, args: &[&str]) -> (i32, String, String) {
        self.berth_with(args, &self.dir.path().join("none"))
    }

    /// berth with `kubeconfig` as its `KUBECONFIG`.
    fn berth_with(&self, args: &[&str], kubeconfig: &Path) -> (i32, String, String) {
        let mut command = isolated::berth();
        command.args(args).env("KUBECONFIG", kubeconfig);
        for (k, v) in self.arm.env() {
            command.env(k, v);
        }
        let out = command.output().expect("run berth");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The Arc agent's part: the Flux objects of the configuration berth created through ARM,
    /// applied server-side, then asked to reconcile now (as `flux reconcile` does).
    fn arc_agent_sync(&self) {
        let path = format!(
            "{CLUSTER_ID}/providers/Microsoft.KubernetesConfiguration/fluxConfigurations/berth"
        );
        let config = self
            .arm
            .resource(&path)
            .expect("berth created the configuration");
        let p = &config["properties"];
        let name = config["name"].as_str().expect("name");
        let ns = p["namespace"].as_str().expect("namespace");
        let seconds = |v: &Value| format!("{}s", v.as_u64().unwrap_or(600));
        let now = jiff::Timestamp::now().to_string();
        let git = &p["gitRepository"];
        let source = json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": name, "namespace": ns,
                         "annotations": {"reconcile.fluxcd.io/requestedAt": now}},
            "spec": {
                "url": git["url"], "ref": {"branch": git["repositoryRef"]["branch"]},
                "interval": seconds(&git["syncIntervalInSeconds"]),
                "timeout": seconds(&git["timeoutInSeconds"]),
            }
        });
        self.apply(
            &format!("/apis/source.toolkit.fluxcd.io/v1/namespaces/{ns}/gitrepositories/{name}"),
            source,
        );
        for (k, spec) in p["kustomizations"].as_object().expect("kustomizations") {
            let depends: Vec<Value> = spec["dependsOn"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_str)
                        .map(|d| json!({"name": format!("{name}-{d}")}))
                        .collect()
                })
                .unwrap_or_default();
            let object = json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": format!("{name}-{k}"), "namespace": ns,
                             "annotations": {"reconcile.fluxcd.io/requestedAt": now}},
                "spec": {
                    "sourceRef": {"kind": "GitRepository", "name": name},
                    "path": spec["path"], "prune": spec["prune"], "wait": spec["wait"],
                    "interval": seconds(&spec["syncIntervalInSeconds"]),
                    "timeout": seconds(&spec["timeoutInSeconds"]),
                    "dependsOn": depends,
                }
            });
            self.apply(
                &format!(
                    "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{ns}/kustomizations/{name}-{k}"
                ),
                object,
            );
        }
    }

    fn apply(&self, path: &str, object: Value) {
        let answer = self.cluster.request(
            "PATCH",
            &format!("{path}?fieldManager=arc-agent&force=true"),
            Some(object),
        );
        assert!(
            answer.status == 200 || answer.status == 201,
            "{path}: {:?}",
            answer.body
        );
    }

    /// The Arc agent's report: each Flux object's conditions into the configuration's
    /// `statuses`, its compliance from `Ready`, the source's revision.
    fn arc_agent_report(&self) {
        let mut statuses = Vec::new();
        let mut revision = Value::Null;
        for (kind, list) in [
            (
                "GitRepository",
                "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories",
            ),
            (
                "Kustomization",
                "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations",
            ),
        ] {
            for object in self.cluster.list(list) {
                let conditions = object["status"]["conditions"].clone();
                let ready = conditions.as_array().and_then(|c| {
                    c.iter()
                        .find(|c| c["type"] == "Ready")
                        .map(|c| c["status"].clone())
                });
                let compliance = match ready.as_ref().and_then(Value::as_str) {
                    Some("True") => "Compliant",
                    Some("False") => "Non-Compliant",
                    _ => "Pending",
                };
                if kind == "GitRepository" {
                    revision = object["status"]["artifact"]["revision"].clone();
                }
                statuses.push(json!({
                    "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
                    "kind": kind, "complianceState": compliance, "statusConditions": conditions,
                }));
            }
        }
        let overall = if statuses
            .iter()
            .any(|s| s["complianceState"] == "Non-Compliant")
        {
            "Non-Compliant"
        } else if statuses.iter().all(|s| s["complianceState"] == "Compliant") {
            "Compliant"
        } else {
            "Pending"
        };
        self.arm.report_flux_status(
            &format!(
                "{CLUSTER_ID}/providers/Microsoft.KubernetesConfiguration/fluxConfigurations/berth"
            ),
            json!({"complianceState": overall, "statuses": statuses, "sourceSyncedCommitId": revision}),
        );
    }

    fn ready(&self, kind: &str, name: &str) -> Option<(String, String)> {
        let path = match kind {
            "Kustomization" => format!(
                "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{FLUX_NS}/kustomizations/{name}"
            ),
            _ => format!(
                "/apis/source.toolkit.fluxcd.io/v1/namespaces/{FLUX_NS}/gitrepositories/{name}"
            ),
        };
        let object = self.cluster.get(&path)?;
        let conditions = object["status"]["conditions"].as_array()?.clone();
        let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
        Some((
            ready["status"].as_str().unwrap_or("").to_string(),
            ready["message"].as_str().unwrap_or("").to_string(),
        ))
    }

    fn wait_for(&mut self, what: &str, mut check: impl FnMut(&Setup) -> bool) {
        let deadline = Instant::now() + FLUX_TIMEOUT;
        while !check(self) {
            if Instant::now() > deadline {
                let logs: Vec<String> = self
                    .controllers
                    .iter()
                    .map(|c| format!("--- {}\n{}", c.name, c.log_tail(30)))
                    .collect();
                panic!("timed out waiting for {what}\n{}", logs.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

fn deployment_ready(s: &Setup, name: &str) -> bool {
    s.cluster
        .get(&format!("/apis/apps/v1/namespaces/ml/deployments/{name}"))
        .is_some_and(|d| d["status"]["readyReplicas"].as_u64() == Some(2))
}

#[test]
fn flux_reconciles_what_berth_commits_prunes_what_it_drops_and_reports_a_broken_commit() {
    let mut s = Setup::new();
    let spec = s.spec.display().to_string();

    // berth applies: the commit (pushed over smart HTTP), then the Flux configuration.
    s.write_spec("echo");
    let started = Instant::now();
    let (code, _, err) = s.berth(&["apply", &spec]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("configuration `berth` created"), "{err}");
    s.arc_agent_sync();
    s.wait_for("Deployment ml/echo ready through Flux", |s| {
        deployment_ready(s, "echo")
    });
    let to_ready = started.elapsed();
    s.wait_for("Kustomization berth-eu-arc Ready", |s| {
        s.ready("Kustomization", "berth-eu-arc")
            .is_some_and(|(r, _)| r == "True")
    });
    let deployment = s
        .cluster
        .get("/apis/apps/v1/namespaces/ml/deployments/echo")
        .expect("deployment");
    assert_eq!(
        deployment["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"], "berth-eu-arc",
        "applied by Flux's kustomize-controller: {deployment}"
    );
    s.arc_agent_report();
    // No kubeconfig context for the cluster: ARM's state, and why the replicas are not there.
    let (code, out, err) = s.berth(&["status", &spec]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Flux configuration `berth` Compliant"),
        "{out}"
    );
    assert!(
        out.contains("  replicas not read: no kubeconfig context `arc-eu`"),
        "{out}"
    );
    // The context the spec names (as `az connectedk8s proxy` would give): desired vs ready
    // replicas of what Flux applied, read from the cluster itself.
    let kubeconfig = s.cluster.dir.join("admin.kubeconfig");
    let (code, out, err) = s.berth_with(&["status", &spec], &kubeconfig);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Flux configuration `berth` Compliant"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.contains("eu_arc")
            && l.contains("echo")
            && l.contains("2/2 ready  Deployment ml/echo")),
        "{out}"
    );
    let (code, out, err) = s.berth_with(&["--output", "json", "status", &spec], &kubeconfig);
    assert_eq!(code, 0, "{out}{err}");
    let doc: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(doc["arc"][0]["context"], "arc-eu", "{doc}");
    assert_eq!(doc["arc"][0]["workloads"][0]["ready"], 2, "{doc}");
    assert_eq!(doc["arc"][0]["workloads"][0]["desired"], 2, "{doc}");
    eprintln!("berth apply → Deployment ready through real Flux: {to_ready:?}");

    // A re-plan that moves the workload away (a new name): Flux prunes the old one.
    s.write_spec("echo2");
    let (code, _, err) = s.berth(&["apply", &spec]);
    assert_eq!(code, 0, "{err}");
    s.arc_agent_sync();
    s.wait_for("echo2 ready and echo pruned", |s| {
        deployment_ready(s, "echo2")
            && s.cluster
                .get("/apis/apps/v1/namespaces/ml/deployments/echo")
                .is_none()
    });

    // A broken commit, by hand (berth never makes one): Flux refuses it, berth status says why.
    let work = s.dir.path().join("hand");
    git(
        s.dir.path(),
        &[
            "clone",
            "--quiet",
            &s.repo_url(),
            work.to_str().expect("utf-8"),
        ],
    );
    std::fs::write(
        work.join("clusters/eu/ml.yaml"),
        "kind: Deployment\n  broken: [\n",
    )
    .expect("write");
    git(
        &work,
        &[
            "-c",
            "user.name=hand",
            "-c",
            "user.email=h@example.com",
            "commit",
            "-qam",
            "break it",
        ],
    );
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    s.arc_agent_sync();
    s.wait_for("the broken commit refused", |s| {
        s.ready("Kustomization", "berth-eu-arc")
            .is_some_and(|(r, _)| r == "False")
    });
    s.arc_agent_report();
    let (code, out, err) = s.berth(&["status", &spec]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("Flux configuration `berth` Non-Compliant"),
        "{out}"
    );
    let (_, message) = s.ready("Kustomization", "berth-eu-arc").expect("condition");
    let first_line = message.lines().next().unwrap_or_default().to_string();
    assert!(
        out.contains("Kustomization flux-system/berth-eu-arc: Non-Compliant: ")
            && out.contains(&first_line),
        "Flux's own message is shown: {message}\n{out}"
    );
    // The workload Flux applied before keeps running.
    assert!(deployment_ready(&s, "echo2"));
}
