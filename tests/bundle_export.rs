//! Carried bundles end to end: `berth bundle export` writes an edge target's signed bundle
//! and its models (an `oci://` artifact pushed to Debian's real `docker-registry`, TLS and
//! htpasswd, and a `file://` one) as an OCI image layout; then the registry is stopped, the
//! model file removed and the agent's bundle store is a closed port, and a real `berth agent
//! --import DIR` accepts the bundle and stages its models from the layout alone. A tampered
//! blob, a foreign signature and an older generation are refused, and what runs keeps
//! running.

mod agent_proc;
mod isolated;
mod registry;
mod test_tls;

use agent_proc::{http, workload_state};
use registry::Registry;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "carried-token-51c2";

fn sha256(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        berth_compiler::plan::hex(&Sha256::digest(bytes))
    )
}

fn berth(args: &[&str]) -> (i32, String, String) {
    let out = isolated::berth().args(args).output().expect("run berth");
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(out.stdout),
        text(out.stderr),
    )
}

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A port nothing listens on: the bundle store, cut.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
}

/// A site's spec, its registry with the model pushed, and the control plane's keys.
struct Site {
    dir: tempfile::TempDir,
    registry: Registry,
    weights: Vec<u8>,
    labels: Vec<u8>,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().expect("temp dir");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let registry = Registry::start();
        let weights: Vec<u8> = (0..3 << 20).map(|i: u32| (i * 7 + 3) as u8).collect();
        let digest = registry.push(
            &rt,
            "models/vision",
            "2.0",
            &[
                ("weights.bin", weights.clone()),
                ("classes.txt", b"leak\nsteam\n".to_vec()),
            ],
        );
        let labels = b"carried labels v1\n".to_vec();
        let root = dir.path();
        std::fs::write(root.join("labels.txt"), &labels).expect("labels");
        std::fs::write(
            root.join("registry-auth.json"),
            registry::good_auth(&registry),
        )
        .expect("auth");
        let (code, _, err) = berth(&["keys", "generate", p(&root.join("cp"))]);
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = berth(&["keys", "generate", p(&root.join("other"))]);
        assert_eq!(code, 0, "{err}");
        let spec = root.join("spec");
        std::fs::create_dir_all(&spec).expect("spec dir");
        std::fs::write(
            spec.join("site.berth"),
            format!(
                r#"use std.gpu.{{L4}}

model detector {{
  version = "2.0"
  variant main {{
    format = onnx
    gpu_memory = 1GiB
    artifact = "oci://{host}/models/vision:2.0"
    digest = "{digest}"
  }}
}}

model labels {{
  version = "1"
  variant main {{
    format = onnx
    gpu_memory = 1GiB
    artifact = "file://{labels_path}"
    digest = "{labels_digest}"
  }}
}}

workload vision {{
  release = "2.0"
  image = "exec:cp $BERTH_MODEL/weights.bin {seen}; sleep 100"
  kind = service
  class = production
  identity = service_account("vision")
  replicas = 1
  model = detector
  resources {{ cpu = 1  memory = 1GiB  gpu = 1 }}
  connectivity = disconnected
  environments = [airgapped]
}}

workload labeller {{
  release = "1"
  image = "exec:cp $BERTH_MODEL {seen_labels}; sleep 100"
  kind = service
  class = production
  identity = service_account("labeller")
  replicas = 1
  model = labels
  resources {{ cpu = 1  memory = 1GiB  gpu = 1 }}
  connectivity = disconnected
  environments = [airgapped]
}}

workload api {{
  release = "1"
  image = "registry.example.com/api:1"
  kind = service
  class = production
  identity = service_account("api")
  replicas = 1
  resources {{ cpu = 1  memory = 1GiB }}
}}

placement api {{
  targets = [cloud]
}}

target site {{
  class = airgapped
  runtime = edge {{ agent = "https://site.local:7443" }}
  connectivity = disconnected
  cpu = 8
  memory = 16GiB
  pool main {{
    accelerator = L4
    count = 2
  }}
}}

target cloud {{
  class = cloud
  runtime = kubernetes {{ context = "cloud", namespace = "apps" }}
  connectivity = connected
  cpu = 8
  memory = 16GiB
}}
"#,
                host = registry.host(),
                labels_path = root.join("labels.txt").display(),
                labels_digest = sha256(&labels),
                seen = root.join("seen.bin").display(),
                seen_labels = root.join("seen-labels.txt").display(),
            ),
        )
        .expect("spec");
        Site {
            dir,
            registry,
            weights,
            labels,
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `berth bundle export SPEC --target TARGET OUT` signed with `key` (`cp` or `other`).
    fn export(&self, target: &str, out: &Path, key: &str) -> (i32, String, String) {
        self.export_with(&[], target, out, key)
    }

    /// [`Site::export`] with global flags `flags` (`--output json`).
    fn export_with(
        &self,
        flags: &[&str],
        target: &str,
        out: &Path,
        key: &str,
    ) -> (i32, String, String) {
        let root = self.root();
        let (spec, store, key) = (
            root.join("spec"),
            root.join("store"),
            root.join(format!("{key}.key")),
        );
        let auth = root.join("registry-auth.json");
        let mut args = flags.to_vec();
        args.extend([
            "bundle",
            "export",
            p(&spec),
            "--target",
            target,
            p(out),
            "--bundles",
            p(&store),
            "--key",
            p(&key),
            "--registry-ca",
            p(&self.registry.ca),
            "--registry-auth",
            p(&auth),
        ]);
        berth(&args)
    }

    fn export_ok(&self, name: &str, key: &str) -> PathBuf {
        let out = self.root().join(name);
        let (code, _, err) = self.export("site", &out, key);
        assert_eq!(code, 0, "{err}");
        out
    }
}

/// A real `berth agent` whose bundle store is a closed port and which reads `import`.
struct Agent {
    child: Child,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl Agent {
    fn start(site: &Site, import: &Path) -> Agent {
        let root = site.root();
        let token = root.join("agent.token");
        std::fs::write(&token, TOKEN).expect("token");
        let mut command = isolated::berth();
        command
            .args(["agent", "--listen", "127.0.0.1:0", "--interval", "0.3"])
            .args(["--no-gpu", "--target", "site", "--state"])
            .arg(root.join("state"))
            .arg("--trust")
            .arg(root.join("cp.pub"))
            .arg("--source")
            .arg(format!(
                "http://127.0.0.1:{}/site.bundle.json",
                closed_port()
            ))
            .arg("--import")
            .arg(import)
            .arg("--token-file")
            .arg(&token)
            .stdout(Stdio::null());
        let (child, url, stderr) = agent_proc::spawn(command);
        Agent { child, url, stderr }
    }

    fn status(&self) -> Value {
        let (code, body) = http(&self.url, "GET", "/v1/status", Some(TOKEN));
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("status JSON")
    }

    fn running(&self, name: &str) -> Value {
        wait_for(Duration::from_secs(30), || {
            let s = self.status();
            (workload_state(&s, name).as_deref() == Some("running")).then_some(s)
        })
    }

    /// Waits until the import's last refusal contains `needle`; the status.
    fn refused(&self, needle: &str) -> Value {
        wait_for(Duration::from_secs(30), || {
            let s = self.status();
            s["import"]["last_rejection"]
                .as_str()
                .is_some_and(|r| r.contains(needle))
                .then_some(s)
        })
    }

    fn imported(&self, generation: u64) -> Value {
        wait_for(Duration::from_secs(30), || {
            let s = self.status();
            (s["import"]["imported_generation"] == generation && s["generation"] == generation)
                .then_some(s)
        })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

fn pid_of(status: &Value, name: &str) -> Value {
    status["workloads"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["name"] == name)
        .map_or(Value::Null, |w| w["replicas"][0]["pid"].clone())
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("read")).expect("JSON")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The blob of layer `layer` of the first index entry `pick` chooses.
fn blob_of(layout: &Path, pick: impl Fn(&Value) -> bool, layer: usize) -> PathBuf {
    let index = read_json(&layout.join("index.json"));
    let entry = index["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .find(|m| pick(m))
        .expect("an entry")
        .clone();
    let blob = |digest: &str| layout.join("blobs/sha256").join(&digest[7..]);
    let manifest = read_json(&blob(entry["digest"].as_str().expect("digest")));
    blob(manifest["layers"][layer]["digest"].as_str().expect("layer"))
}

/// Puts `layout` in the agent's import directory `dir`, as a disk swapped in its slot.
fn swap_in(layout: &Path, dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    copy_dir(layout, dir);
}

#[test]
fn a_carried_bundle_runs_with_no_network_and_its_models_from_the_media_alone() {
    let mut site = Site::new();
    let root = site.root().to_path_buf();
    let carry = root.join("usb");
    let (code, _, err) = site.export("site", &carry, "cp");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("bundle generation 1 published"), "{err}");
    assert!(err.contains("2 artifact(s)"), "{err}");

    // A real OCI image layout: every blob it names is there under its digest.
    assert_eq!(
        read_json(&carry.join("oci-layout")),
        serde_json::json!({"imageLayoutVersion": "1.0.0"})
    );
    let index = read_json(&carry.join("index.json"));
    assert_eq!(index["schemaVersion"], 2);
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 3, "{index}");
    assert_eq!(
        manifests[0]["artifactType"],
        "application/vnd.berth.bundle.v1+json"
    );
    let names: Vec<&str> = manifests
        .iter()
        .filter_map(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str())
        .collect();
    let oci_name = format!("{}/models/vision:2.0", site.registry.host());
    assert!(names.contains(&oci_name.as_str()), "{names:?}");
    let check = |digest: &str| {
        let bytes = std::fs::read(carry.join("blobs/sha256").join(&digest[7..])).expect("blob");
        assert_eq!(sha256(&bytes), digest);
        bytes
    };
    for m in manifests {
        let manifest: Value =
            serde_json::from_slice(&check(m["digest"].as_str().expect("digest"))).expect("json");
        check(manifest["config"]["digest"].as_str().expect("config"));
        for layer in manifest["layers"].as_array().expect("layers") {
            check(layer["digest"].as_str().expect("layer"));
        }
    }
    assert!(
        !carry.join(".berth-export").exists(),
        "no working files left"
    );

    // The network is cut: the registry stopped, the model file gone, the store a closed port.
    site.registry.stop();
    std::fs::remove_file(root.join("labels.txt")).expect("remove the model file");
    let agent = Agent::start(&site, &carry);
    agent.running("vision");
    let status = agent.running("labeller");
    assert_eq!(status["generation"], 1, "{status}");
    assert_eq!(status["import"]["imported_generation"], 1, "{status}");
    assert_eq!(status["source"]["reachable"], false, "{status}");
    assert_eq!(status["cache"]["artifacts"], 2, "{status}");
    let seen = wait_for(Duration::from_secs(10), || {
        std::fs::read(root.join("seen.bin"))
            .ok()
            .filter(|b| b.len() == site.weights.len())
    });
    assert_eq!(seen, site.weights);
    let labels = wait_for(Duration::from_secs(10), || {
        std::fs::read(root.join("seen-labels.txt")).ok()
    });
    assert_eq!(labels, site.labels);
    let log = agent.stderr.lock().expect("log").clone();
    assert!(log.contains("bundle accepted: generation 1"), "{log}");
}

#[test]
fn tampered_blobs_foreign_signatures_and_older_generations_are_refused() {
    let mut site = Site::new();
    let root = site.root().to_path_buf();
    let first = site.export_ok("first", "cp");
    let second = site.export_ok("second", "cp");
    let foreign = site.export_ok("foreign", "other");
    let is_vision = |m: &Value| {
        m["annotations"]["dev.berth.artifact"]
            .as_str()
            .is_some_and(|a| a.starts_with("oci://"))
    };
    let is_bundle = |m: &Value| m["artifactType"] == "application/vnd.berth.bundle.v1+json";

    // One byte of the model's layer changed on the media.
    let bad_layer = root.join("bad-layer");
    copy_dir(&first, &bad_layer);
    let blob = blob_of(&bad_layer, is_vision, 0);
    let mut bytes = std::fs::read(&blob).expect("layer");
    bytes[1000] ^= 0xff;
    std::fs::write(&blob, bytes).expect("tamper");
    // One byte of the signed bundle changed on the media.
    let bad_bundle = root.join("bad-bundle");
    copy_dir(&second, &bad_bundle);
    let blob = blob_of(&bad_bundle, is_bundle, 0);
    let text = std::fs::read_to_string(&blob).expect("bundle");
    let altered = text.replace("\"replicas\\\":1", "\"replicas\\\":9");
    assert_ne!(altered, text, "the payload names its replicas");
    std::fs::write(&blob, altered).expect("tamper");

    site.registry.stop();
    let slot = root.join("slot");
    swap_in(&bad_layer, &slot);
    let agent = Agent::start(&site, &slot);
    let status = agent.refused("has digest");
    assert_eq!(status["generation"], Value::Null, "{status}");
    let cached = |kind: &str| {
        std::fs::read_dir(root.join("state/cache").join(kind))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(cached("oci"), 0, "the tampered model is not cached");
    assert_eq!(cached("partial"), 0, "nor left half copied");

    swap_in(&first, &slot);
    agent.imported(1);
    let pid = pid_of(&agent.running("vision"), "vision");

    swap_in(&bad_bundle, &slot);
    let status = agent.refused("does not hash to its digest");
    assert_eq!(status["generation"], 1, "{status}");
    swap_in(&foreign, &slot);
    let status = agent.refused("the signature does not verify with the trusted key");
    assert_eq!(status["generation"], 1, "{status}");
    let vision = agent.running("vision");
    assert_eq!(
        pid_of(&vision, "vision"),
        pid,
        "the running bundle kept running"
    );
    assert_eq!(vision["cache"]["artifacts"], 2, "{vision}");

    swap_in(&second, &slot);
    agent.imported(2);
    swap_in(&first, &slot);
    let status = agent.refused("generation 1 is not newer than generation 2");
    assert_eq!(status["generation"], 2, "{status}");
    let log = agent.stderr.lock().expect("log").clone();
    assert!(
        log.contains("bundle refused: carried bundle"),
        "refusals are logged: {log}"
    );
}

#[test]
fn only_edge_targets_can_be_exported_and_an_export_again_fetches_nothing_the_media_holds() {
    let site = Site::new();
    let root = site.root().to_path_buf();
    let out = root.join("out");
    let (code, _, err) = site.export("cloud", &out, "cp");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("target `cloud` is not an edge target (its runtime is kubernetes)"),
        "{err}"
    );
    assert!(err.contains("exportable targets: `site`"), "{err}");
    let (code, _, err) = site.export("nowhere", &out, "cp");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("the spec has no target `nowhere`"), "{err}");
    assert!(err.contains("exportable targets: `site`"), "{err}");
    assert!(!out.exists(), "nothing written");
    assert!(!root.join("store").exists(), "nothing published");

    // Exported twice to the same media: the second run fetches nothing the media holds.
    let json = |run: (i32, String, String)| -> Value {
        assert_eq!(run.0, 0, "{}", run.2);
        serde_json::from_str(&run.1).expect("one JSON document")
    };
    let first = json(site.export_with(&["--output", "json"], "site", &out, "cp"));
    assert_eq!(first["target"], "site");
    assert_eq!(first["generation"], 1);
    let fetched = |doc: &Value| -> Vec<bool> {
        doc["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .map(|a| a["fetched"].as_bool().expect("fetched"))
            .collect()
    };
    assert_eq!(fetched(&first), [true, true], "{first}");
    let again = json(site.export_with(&["--output", "json"], "site", &out, "cp"));
    assert_eq!(again["generation"], 2);
    assert_eq!(fetched(&again), [false, false], "{again}");
    assert_eq!(
        again["bytes"], first["bytes"],
        "the old bundle's blobs were removed"
    );
}

/// `skopeo` (Debian's), or `None` after saying why the check is skipped; under `CI=true` its
/// absence fails the test.
fn skopeo() -> Option<&'static str> {
    let tool = "skopeo";
    if Command::new(tool).arg("--version").output().is_err() {
        let message = format!("`{tool}` is not installed (apt-get install skopeo)");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{message}");
        eprintln!("skipped: {message}");
        return None;
    }
    Some(tool)
}

fn run(tool: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(tool).args(args).output().expect("run");
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (out.status.success(), text(out.stdout), text(out.stderr))
}

/// A real OCI tool reads the exported layout: `skopeo` finds every manifest of the index by
/// its name, its bytes hash to the digest the index gives, and `skopeo copy
/// --preserve-digests` copies each (checking every blob's digest as it reads it) to a `dir:`
/// whose files are the layout's, byte for byte. The model's manifest, copied by skopeo into
/// the real registry under another name, keeps its digest: the agent's cache pulls it from
/// there by the digest the bundle pins. A layout with one byte of a layer changed is refused
/// by skopeo too.
#[test]
fn skopeo_reads_the_exported_layout_and_its_digests_match() {
    let Some(skopeo) = skopeo() else {
        return;
    };
    let site = Site::new();
    let root = site.root().to_path_buf();
    let carry = site.export_ok("usb", "cp");
    let index = read_json(&carry.join("index.json"));
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 3, "{index}");
    for (i, entry) in manifests.iter().enumerate() {
        let name = entry["annotations"]["org.opencontainers.image.ref.name"]
            .as_str()
            .expect("every entry is named");
        let digest = entry["digest"].as_str().expect("digest");
        let source = format!("oci:{}:{name}", p(&carry));
        let (ok, raw, err) = run(skopeo, &["inspect", "--raw", &source]);
        assert!(ok, "skopeo cannot read `{name}`: {err}");
        assert_eq!(sha256(raw.as_bytes()), digest, "`{name}`");
        let out = root.join(format!("copied-{i}"));
        let (ok, _, err) = run(
            skopeo,
            &[
                "copy",
                "--preserve-digests",
                &source,
                &format!("dir:{}", p(&out)),
            ],
        );
        assert!(ok, "skopeo cannot copy `{name}`: {err}");
        let copied = std::fs::read(out.join("manifest.json")).expect("manifest");
        assert_eq!(sha256(&copied), digest, "`{name}`");
        let manifest: Value = serde_json::from_slice(&copied).expect("JSON");
        let mut blobs = vec![manifest["config"]["digest"].as_str().expect("config")];
        for layer in manifest["layers"].as_array().expect("layers") {
            blobs.push(layer["digest"].as_str().expect("layer"));
        }
        for blob in blobs {
            let bytes = std::fs::read(out.join(&blob[7..])).expect("copied blob");
            assert_eq!(sha256(&bytes), blob, "`{name}`");
            assert_eq!(
                bytes,
                std::fs::read(carry.join("blobs/sha256").join(&blob[7..])).expect("blob"),
            );
        }
    }

    // Into the real registry under another name, by skopeo; then pulled by the agent's
    // cache code (`berth fetch`) by the digest the bundle pins.
    let vision = format!("{}/models/vision:2.0", site.registry.host());
    let pinned = manifests
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == vision.as_str())
        .and_then(|m| m["digest"].as_str())
        .expect("the model's entry")
        .to_string();
    let certs = root.join("certs");
    std::fs::create_dir_all(&certs).expect("certs");
    std::fs::copy(&site.registry.ca, certs.join("ca.crt")).expect("ca");
    let creds = format!("{}:{}", registry::USER, registry::PASSWORD);
    let copy = format!("{}/models/copied:1", site.registry.host());
    let (ok, _, err) = run(
        skopeo,
        &[
            "copy",
            "--preserve-digests",
            "--dest-cert-dir",
            p(&certs),
            "--dest-creds",
            &creds,
            &format!("oci:{}:{vision}", p(&carry)),
            &format!("docker://{copy}"),
        ],
    );
    assert!(ok, "skopeo cannot push the model: {err}");
    let into = root.join("staged");
    let (code, _, err) = berth(&[
        "fetch",
        &format!("oci://{copy}"),
        "--digest",
        &pinned,
        "--into",
        p(&into),
        "--registry-ca",
        p(&site.registry.ca),
        "--registry-auth",
        p(&root.join("registry-auth.json")),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(into.join(&pinned[7..]).join("weights.bin")).expect("weights"),
        site.weights
    );

    // One byte of the model's layer changed: skopeo refuses it as the agent does.
    let is_vision = |m: &Value| m["annotations"]["dev.berth.artifact"] == format!("oci://{vision}");
    let blob = blob_of(&carry, is_vision, 0);
    let mut bytes = std::fs::read(&blob).expect("layer");
    bytes[77] ^= 0x01;
    std::fs::write(&blob, bytes).expect("tamper");
    let (ok, _, err) = run(
        skopeo,
        &[
            "copy",
            &format!("oci:{}:{vision}", p(&carry)),
            &format!("dir:{}", p(&root.join("tampered"))),
        ],
    );
    assert!(!ok, "skopeo copied a tampered layout");
    assert!(err.contains("Digest did not match"), "{err}");
}
