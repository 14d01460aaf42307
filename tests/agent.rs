//! End-to-end tests of `berth agent`, `berth keys` and `berth apply` with local targets: the
//! real binary, real processes, real HTTP on 127.0.0.1 (a small bundle store served from a
//! thread of this test, stopped and restarted to cut the link), real files. No mocks.

mod agent_proc;
mod isolated;
mod registry;
mod test_tls;

use agent_proc::{http, workload_state};
use berth_compiler::plan::VariantBinding;
use berth_runtime::backends::edge::bundle::{
    Bundle, BundleWorkload, ReclaimContract, TelemetryContract, keys,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use test_tls::tls_files;

const BERTH: &str = env!("CARGO_BIN_EXE_berth");
const TOKEN: &str = "test-token-7f3a";

// ------------------------------------------------------------------ a real HTTP bundle store

/// (path, when its body started to be sent, in ms since the epoch) per response.
type Bodies = Mutex<Vec<(String, u64)>>;

/// Serves the files of a directory over HTTP/1.1 with ETags, `If-None-Match`, `Range`, and
/// an optional rate limit; logs every request. Stopping it closes the port (the link is cut).
struct Store {
    dir: PathBuf,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    bodies: Arc<Bodies>,
    bytes_per_second: Option<usize>,
    running: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
}

impl Store {
    fn start(dir: &Path, bytes_per_second: Option<usize>) -> Store {
        let mut store = Store {
            dir: dir.to_path_buf(),
            port: 0,
            log: Arc::default(),
            bodies: Arc::default(),
            bytes_per_second,
            running: None,
        };
        store.resume();
        store
    }

    fn url(&self, file: &str) -> String {
        format!("http://127.0.0.1:{}/{file}", self.port)
    }

    fn requests(&self, needle: &str) -> Vec<String> {
        let log = self.log.lock().expect("log");
        log.iter().filter(|l| l.contains(needle)).cloned().collect()
    }

    fn resume(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).expect("bind the store");
        self.port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let bodies = self.bodies.clone();
        let (dir, log, rate, flag) = (
            self.dir.clone(),
            self.log.clone(),
            self.bytes_per_second,
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (dir, log, flag) = (dir.clone(), log.clone(), flag.clone());
                        let bodies = bodies.clone();
                        std::thread::spawn(move || {
                            serve(stream, &dir, (&log, &bodies), rate, &flag)
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        self.running = Some((stop, thread));
    }

    fn stop(&mut self) {
        if let Some((stop, thread)) = self.running.take() {
            stop.store(true, Ordering::SeqCst);
            thread.join().expect("store thread");
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(
    mut stream: TcpStream,
    dir: &Path,
    (log, bodies): (&Mutex<Vec<String>>, &Bodies),
    rate: Option<usize>,
    stop: &AtomicBool,
) {
    let _ = stream.set_nonblocking(false);
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        headers.push(lower.trim().to_string());
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let parts: Vec<&str> = request.split_whitespace().collect();
    let (method, path) = (
        parts.first().copied().unwrap_or(""),
        parts.get(1).copied().unwrap_or("/"),
    );
    let header = |name: &str| {
        headers
            .iter()
            .find_map(|h| h.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    log.lock()
        .expect("log")
        .push(format!("{method} {path} range={:?}", header("range:")));
    let file = dir.join(path.trim_start_matches('/'));
    if method == "PUT" {
        std::fs::write(&file, &body).expect("put");
        let _ = stream
            .write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    }
    let Ok(content) = std::fs::read(&file) else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    };
    let etag = format!(
        "\"{}\"",
        berth_compiler::plan::hex(&Sha256::digest(&content))
    );
    if header("if-none-match:").as_deref() == Some(etag.as_str()) {
        let _ = write!(
            stream,
            "HTTP/1.1 304 Not Modified\r\netag: {etag}\r\nconnection: close\r\n\r\n"
        );
        return;
    }
    let start = header("range:")
        .and_then(|r| {
            r.strip_prefix("bytes=")
                .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok())
        })
        .filter(|s| *s < content.len());
    let (status, slice) = match start {
        Some(s) => (
            format!(
                "206 Partial Content\r\ncontent-range: bytes {s}-{}/{}",
                content.len() - 1,
                content.len()
            ),
            &content[s..],
        ),
        None => ("200 OK".to_string(), &content[..]),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\netag: {etag}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        slice.len()
    );
    bodies
        .lock()
        .expect("bodies")
        .push((path.to_string(), now_ms()));
    match rate {
        None => {
            let _ = stream.write_all(slice);
        }
        Some(rate) => {
            for chunk in slice.chunks(rate / 20) {
                if stop.load(Ordering::SeqCst) || stream.write_all(chunk).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

// ------------------------------------------------------------------ the agent process

struct AgentProc {
    child: Child,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl AgentProc {
    fn start(state: &Path, trust: &Path, source: &str, extra: &[&str]) -> AgentProc {
        let token = state.with_extension("token");
        std::fs::write(&token, format!("{TOKEN}\n")).expect("token");
        // Measurements run a release build: `BERTH_AGENT_BIN=target/release/berth`.
        let bin = std::env::var("BERTH_AGENT_BIN").unwrap_or_else(|_| BERTH.to_string());
        let mut command = Command::new(bin);
        command
            .args(
                [
                    "agent",
                    "--listen",
                    "127.0.0.1:0",
                    "--interval",
                    "0.5",
                    "--no-gpu",
                ]
                .iter()
                .filter(|a| !(extra.iter().any(|e| e.starts_with("--gpu")) && **a == "--no-gpu")),
            )
            .arg("--state")
            .arg(state)
            .arg("--trust")
            .arg(trust)
            .arg("--source")
            .arg(source)
            .arg("--token-file")
            .arg(&token)
            .args(extra);
        let (child, url, stderr) = agent_proc::spawn(command);
        AgentProc { child, url, stderr }
    }

    fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        http(&self.url, "GET", path, token)
    }

    fn status(&self) -> Value {
        let (code, body) = self.get("/v1/status", Some(TOKEN));
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("status JSON")
    }

    /// Waits (at most `limit`) until workload `name` is in `state`; the status that said so.
    fn wait_for_workload(&self, name: &str, state: &str, limit: Duration) -> Value {
        wait_for(limit, || {
            let s = self.status();
            (workload_state(&s, name).as_deref() == Some(state)).then_some(s)
        })
    }

    fn sync(&self) {
        assert_eq!(http(&self.url, "POST", "/v1/sync", Some(TOKEN)).0, 202);
    }

    fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }

    fn terminate(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// A refused fetch leaves nothing in `partial`. The agent tries a blocked workload's fetch
/// again every reconcile (the source may be mended), so one may be under way at any
/// moment: what must hold is that the folder is empty between two tries, within 10 s. A
/// fetch that kept its bytes would leave it never empty.
fn assert_nothing_half_kept(partial: &Path) {
    let entries = || -> Vec<_> {
        std::fs::read_dir(partial)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default()
    };
    wait_for(Duration::from_secs(10), || {
        entries().is_empty().then_some(())
    });
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

// ------------------------------------------------------------------ bundles

struct Keys {
    secret: ed25519_dalek::SigningKey,
    public: PathBuf,
}

/// A test's folder, with the control plane's signing keys in it (`cp.key`, `cp.pub`): the
/// set-up most agent tests start from.
struct Fixture {
    dir: tempfile::TempDir,
    keys: Keys,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let keys = keys_in(dir.path());
        Fixture { dir, keys }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `store/`, created: the folder a model server serves.
    fn store_dir(&self) -> PathBuf {
        let served = self.root().join("store");
        std::fs::create_dir_all(&served).expect("store dir");
        served
    }
}

fn keys_in(dir: &Path) -> Keys {
    let secret = keys::generate().expect("randomness");
    let (_, public) = keys::write_pair(&dir.join("cp"), &secret).expect("keys");
    Keys { secret, public }
}

fn workload(name: &str, command: &str) -> BundleWorkload {
    BundleWorkload {
        name: name.into(),
        release: "1".into(),
        image: format!("exec:{command}"),
        kind: "service".into(),
        class: "production".into(),
        replicas: 1,
        gpus_per_replica: 0,
        pool: None,
        accelerator: None,
        variant: None,
        data: vec![],
        telemetry: TelemetryContract::Buffer(72 * 3_600_000_000_000),
        reclaim: None,
    }
}

fn bundle(generation: u64, workloads: Vec<BundleWorkload>) -> Bundle {
    Bundle {
        format: berth_runtime::backends::edge::bundle::BUNDLE_FORMAT.into(),
        target: "site".into(),
        generation,
        plan_id: format!("sha256:plan{generation}"),
        workloads,
    }
}

fn publish(dir: &Path, signed: &berth_runtime::backends::edge::bundle::SignedBundle) {
    let tmp = dir.join(".site.tmp");
    std::fs::write(&tmp, signed.to_bytes()).expect("write bundle");
    std::fs::rename(&tmp, dir.join("site.bundle.json")).expect("publish");
}

/// A command that appends a line to `file` every 100 ms.
fn ticking(file: &Path) -> String {
    format!(
        "while true; do echo tick >> '{}'; sleep 0.1; done",
        file.display()
    )
}

fn lines(file: &Path) -> usize {
    std::fs::read_to_string(file).map_or(0, |t| t.lines().count())
}

fn pid_of(status: &Value, name: &str) -> Option<u64> {
    status["workloads"]
        .as_array()?
        .iter()
        .find(|w| w["name"] == name)?["replicas"][0]["pid"]
        .as_u64()
}

fn alive(pid: u64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// Every event, reading with a cursor until none is left; each read acknowledges the last.
fn drain_telemetry(agent: &AgentProc, cursor: &mut u64) -> Vec<Value> {
    let mut all = Vec::new();
    loop {
        let (code, body) = agent.get(
            &format!("/v1/telemetry?after={cursor}&limit=7"),
            Some(TOKEN),
        );
        assert_eq!(code, 200, "{body}");
        let page: Value = serde_json::from_str(&body).expect("telemetry JSON");
        let events = page["events"].as_array().cloned().unwrap_or_default();
        if events.is_empty() {
            return all;
        }
        *cursor = page["next"].as_u64().expect("next");
        all.extend(events);
    }
}

// ------------------------------------------------------------------ tests

#[test]
fn keys_generate_writes_a_private_secret_and_prints_neither_key() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = dir.path().join("control-plane");
    let out = isolated::berth()
        .args(["keys", "generate"])
        .arg(&prefix)
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let secret = std::fs::read_to_string(prefix.with_extension("key")).expect("secret");
    let mode = std::fs::metadata(prefix.with_extension("key"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let hex = secret.trim().rsplit(':').next().expect("hex");
    assert!(!printed.contains(hex), "the secret was printed: {printed}");
    // A second run refuses to overwrite the pair.
    let again = isolated::berth()
        .args(["keys", "generate"])
        .arg(&prefix)
        .output()
        .expect("run");
    assert_eq!(again.status.code(), Some(1), "a refusal");
}

#[test]
fn signed_bundles_run_bad_ones_are_rejected_and_the_link_can_drop() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let served = fixture.store_dir();
    let (a, b) = (root.join("a.ticks"), root.join("b.ticks"));
    publish(
        &served,
        &bundle(1, vec![workload("a", &ticking(&a))]).sign(&keys.secret),
    );
    let mut store = Store::start(&served, None);
    let agent = AgentProc::start(
        &root.join("state"),
        &keys.public,
        &store.url("site.bundle.json"),
        &[],
    );

    // Accepted and running.
    let status = agent.wait_for_workload("a", "running", Duration::from_secs(20));
    assert_eq!(status["generation"], 1);
    let pid_a = pid_of(&status, "a").expect("pid");
    wait_for(Duration::from_secs(10), || (lines(&a) > 2).then_some(()));

    // Every protected endpoint refuses callers without the token or with a wrong one.
    for (method, path) in [
        ("GET", "/v1/status"),
        ("GET", "/v1/telemetry"),
        ("POST", "/v1/sync"),
        ("GET", "/metrics"),
        ("POST", "/v1/telemetry/ack"),
    ] {
        assert_eq!(
            http(&agent.url, method, path, None).0,
            401,
            "{path} without a token"
        );
        assert_eq!(
            http(&agent.url, method, path, Some("wrong")).0,
            401,
            "{path} with a wrong token"
        );
    }
    assert_eq!(agent.get("/healthz", None).0, 200);
    let (code, metrics) = agent.get("/metrics", Some(TOKEN));
    assert_eq!(code, 200);
    assert!(
        metrics.contains("berth_agent_bundle_generation 1"),
        "{metrics}"
    );

    // Forged (signed by another key), unsigned, and older or replayed: each rejected, and the
    // running bundle keeps running.
    let intruder = keys::generate().expect("randomness");
    let mut unsigned = bundle(3, vec![workload("evil", "sleep 100")]).sign(&keys.secret);
    unsigned.signature = String::new();
    let rejections = [
        (
            bundle(2, vec![workload("evil", "sleep 100")]).sign(&intruder),
            "signature",
        ),
        (unsigned, "unsigned"),
        (
            bundle(1, vec![workload("evil", "sleep 100")]).sign(&keys.secret),
            "generation 1 is not newer",
        ),
        (
            bundle(0, vec![workload("evil", "sleep 100")]).sign(&keys.secret),
            "generation 0 is not newer",
        ),
    ];
    for (bad, why) in rejections {
        publish(&served, &bad);
        agent.sync();
        let status = wait_for(Duration::from_secs(10), || {
            let s = agent.status();
            s["source"]["last_rejection"]
                .as_str()
                .is_some_and(|r| r.contains(why))
                .then_some(s)
        });
        assert_eq!(status["generation"], 1, "{why}");
        assert_eq!(
            pid_of(&status, "a"),
            Some(pid_a),
            "{why}: the running workload was disturbed"
        );
        assert_eq!(workload_state(&status, "evil"), None);
    }

    // A newer signed bundle replaces it: `a` stopped, `b` started, and `flap`, which exits
    // every 0.2 s, so that events keep coming while the link is down.
    let flap = workload("flap", "sleep 0.2; exit 3");
    publish(
        &served,
        &bundle(2, vec![workload("b", &ticking(&b)), flap.clone()]).sign(&keys.secret),
    );
    agent.sync();
    agent.wait_for_workload("b", "running", Duration::from_secs(20));
    wait_for(Duration::from_secs(10), || (!alive(pid_a)).then_some(()));

    // The link drops: workloads keep running, telemetry accumulates.
    let mut cursor = 0;
    let before = drain_telemetry(&agent, &mut cursor);
    store.stop();
    publish(
        &served,
        &bundle(
            3,
            vec![
                workload("b", &ticking(&b)),
                flap.clone(),
                workload("c", "sleep 1000"),
            ],
        )
        .sign(&keys.secret),
    );
    let offline = wait_for(Duration::from_secs(10), || {
        let s = agent.status();
        (s["source"]["reachable"] == false).then_some(s)
    });
    assert_eq!(offline["generation"], 2);
    let buffered = offline["telemetry"]["buffered"].as_u64().expect("buffered");
    wait_for(Duration::from_secs(20), || {
        (agent.status()["telemetry"]["buffered"].as_u64() > Some(buffered + 2)).then_some(())
    });
    let ticks = lines(&b);
    wait_for(Duration::from_secs(10), || {
        (lines(&b) > ticks + 5).then_some(())
    });
    assert_eq!(
        workload_state(&agent.status(), "b").as_deref(),
        Some("running")
    );

    // It comes back: the new bundle is picked up.
    store.resume();
    agent.sync();
    wait_for(Duration::from_secs(20), || {
        let s = agent.status();
        (s["generation"] == 3 && workload_state(&s, "c").as_deref() == Some("running"))
            .then_some(())
    });
    // Conditional GETs: an unchanged bundle is answered 304 (the log shows If-None-Match use
    // indirectly: the agent keeps pulling without re-accepting).
    let after = drain_telemetry(&agent, &mut cursor);
    let mut seqs: Vec<u64> = before
        .iter()
        .chain(&after)
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    let total = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), total, "an event was delivered twice");
    // Contiguous sequence numbers: none lost between the reads, none skipped.
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "an event was lost: {seqs:?}"
    );
    let kinds = |events: &[Value], kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    let all: Vec<Value> = before.iter().chain(&after).cloned().collect();
    assert_eq!(kinds(&all, "bundle_accepted"), 3, "{all:#?}");
    assert_eq!(kinds(&all, "bundle_rejected"), 4, "{all:#?}");
    assert!(kinds(&all, "workload_started") >= 3);
    assert!(kinds(&all, "workload_exited") >= 3, "{all:#?}");
    // Acknowledged events are gone: nothing is delivered twice.
    assert!(drain_telemetry(&agent, &mut cursor).is_empty());
    let status = agent.status();
    assert_eq!(status["telemetry"]["dropped"], 0);
    drop(agent);
}

/// A runtime for pushing to the test registry.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn model_bytes(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 % 251) as u8).collect()
}

/// Writes a `size`-byte model as `model.bin` into the store directory `served`; gives its
/// bytes and its `sha256:` digest.
fn serve_model(served: &Path, size: usize) -> (Vec<u8>, String) {
    let model = model_bytes(size);
    std::fs::write(served.join("model.bin"), &model).expect("model");
    let digest = format!(
        "sha256:{}",
        berth_compiler::plan::hex(&Sha256::digest(&model))
    );
    (model, digest)
}

fn with_model(mut w: BundleWorkload, uri: String, digest: String) -> BundleWorkload {
    w.variant = Some(VariantBinding {
        model: "m".into(),
        version: "1".into(),
        variant: "fp16".into(),
        artifact: uri,
        digest: Some(digest),
        staging: Default::default(),
    });
    w
}

#[test]
fn kill_9_mid_download_resumes_and_a_verified_artifact_is_never_fetched_again() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let served = fixture.store_dir();
    let (model, digest) = serve_model(&served, 6 << 20);
    // 2 MiB/s: the 6 MiB model takes about three seconds.
    let store = Store::start(&served, Some(2 << 20));
    let marker = root.join("served.ticks");
    let w = with_model(
        workload(
            "server",
            &format!("test -s \"$BERTH_MODEL\" && {}", ticking(&marker)),
        ),
        store.url("model.bin"),
        digest.clone(),
    );
    publish(&served, &bundle(1, vec![w]).sign(&keys.secret));
    let state = root.join("state");
    let partial = state
        .join("cache/partial")
        .join(format!("{}.part", &digest[7..]));
    let mut agent = AgentProc::start(&state, &keys.public, &store.url("site.bundle.json"), &[]);
    wait_for(Duration::from_secs(20), || {
        (std::fs::metadata(&partial).map_or(0, |m| m.len()) > 1 << 20).then_some(())
    });
    agent.kill9();
    assert!(
        !marker.exists(),
        "the workload ran before its artifact verified"
    );

    // Restarted: it resumes with a range request and runs the workload.
    let agent = AgentProc::start(&state, &keys.public, &store.url("site.bundle.json"), &[]);
    let status = agent.wait_for_workload("server", "running", Duration::from_secs(30));
    assert!(
        store
            .requests("model.bin")
            .iter()
            .any(|r| r.contains("range=Some(\"bytes=")),
        "no resumed download: {:?}",
        store.requests("model.bin")
    );
    assert_eq!(
        std::fs::read(state.join("cache/sha256").join(&digest[7..])).expect("cached"),
        model
    );
    assert_eq!(status["cache"]["artifacts"], 1);
    wait_for(Duration::from_secs(10), || {
        (lines(&marker) > 0).then_some(())
    });
    let pid = pid_of(&status, "server").expect("pid");

    // kill -9 mid-reconcile: the restarted agent stops the orphaned workload, runs it again,
    // and fetches nothing.
    let fetches = store.requests("model.bin").len();
    let mut agent = agent;
    agent.kill9();
    assert!(alive(pid), "the workload outlives a killed agent");
    let agent = AgentProc::start(&state, &keys.public, &store.url("site.bundle.json"), &[]);
    let status = agent.wait_for_workload("server", "running", Duration::from_secs(20));
    assert_ne!(pid_of(&status, "server"), Some(pid));
    wait_for(Duration::from_secs(10), || (!alive(pid)).then_some(()));
    assert_eq!(
        store.requests("model.bin").len(),
        fetches,
        "a verified artifact was fetched again"
    );
    assert_eq!(status["generation"], 1);
}

#[test]
fn an_artifact_with_a_wrong_digest_never_runs_and_the_status_says_why() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let model = root.join("model.bin");
    std::fs::write(&model, b"not the model you signed").expect("model");
    let marker = root.join("ran");
    let wrong = format!("sha256:{}", "ab".repeat(32));
    let w = with_model(
        workload(
            "tampered",
            &format!("touch '{}'; sleep 100", marker.display()),
        ),
        format!("file://{}", model.display()),
        wrong,
    );
    publish(root, &bundle(1, vec![w]).sign(&keys.secret));
    let agent = AgentProc::start(
        &root.join("state"),
        &keys.public,
        &root.join("site.bundle.json").display().to_string(),
        &[],
    );
    let status = agent.wait_for_workload("tampered", "blocked", Duration::from_secs(20));
    let reason = status["workloads"][0]["reason"]
        .as_str()
        .expect("reason")
        .to_string();
    assert!(reason.contains("has digest `sha256:"), "{reason}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(!marker.exists(), "a mismatching artifact ran");
    let mut cursor = 0;
    let events = drain_telemetry(&agent, &mut cursor);
    assert!(
        events.iter().any(|e| e["kind"] == "artifact_rejected"),
        "{events:#?}"
    );
}

/// A running agent with an `oci://` model on Debian's real registry (TLS, htpasswd): the
/// workload starts once the artifact is pulled and verified, and reads its layers from
/// `$BERTH_MODEL`; the registry's password appears nowhere in the status.
#[test]
fn an_oci_model_is_pulled_from_a_real_registry_before_its_workload_starts() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let rt = current_thread();
    let registry = registry::Registry::start();
    let weights = model_bytes(3 << 20);
    let digest = registry.push(
        &rt,
        "models/vision",
        "2.0",
        &[
            ("weights.bin", weights.clone()),
            ("labels.txt", b"ok\nscratch\n".to_vec()),
        ],
    );
    let auth = root.join("registry-auth.json");
    std::fs::write(&auth, registry::good_auth(&registry)).expect("auth");
    let copy = root.join("seen.bin");
    let w = with_model(
        workload(
            "vision",
            &format!(
                "cp \"$BERTH_MODEL/weights.bin\" '{}'; sleep 100",
                copy.display()
            ),
        ),
        format!("oci://{}/models/vision:2.0", registry.host()),
        digest,
    );
    publish(root, &bundle(1, vec![w]).sign(&keys.secret));
    let ca = registry.ca.display().to_string();
    let auth = auth.display().to_string();
    let agent = AgentProc::start(
        &root.join("state"),
        &keys.public,
        &root.join("site.bundle.json").display().to_string(),
        &["--registry-ca", &ca, "--registry-auth", &auth],
    );
    agent.wait_for_workload("vision", "running", Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&copy).map_or(0, |m| m.len()) < weights.len() as u64 {
        assert!(
            Instant::now() < deadline,
            "the workload never read its model"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read(&copy).expect("copy"), weights);
    let status = agent.status();
    assert_eq!(status["cache"]["artifacts"], 1, "{status}");
    let text = status.to_string();
    assert!(!text.contains(registry::PASSWORD), "{text}");
}

/// A running agent pulls its `oci://` models through a fault proxy in front of Debian's real
/// registry. Generation 1 runs on model 1; generation 2 names model 2, whose weights layer the
/// proxy corrupts as it streams (the manifest is true, the bytes lie). The new release is
/// blocked with the layer's digest as the reason and the earlier release keeps running on
/// model 1 (same pid); model 2 is neither cached nor left half fetched. Once the proxy is
/// honest again, the next reconcile replaces it.
#[test]
fn a_new_model_whose_layer_lies_never_replaces_the_running_one() {
    use registry::fault_proxy::{Fault, FaultKind};
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let rt = current_thread();
    let registry = registry::Registry::start();
    let proxy = registry.proxy();
    let (old, new) = (model_bytes(1 << 20), model_bytes((1 << 20) + 17));
    let old_digest = registry.push(&rt, "models/vision", "1", &[("weights.bin", old.clone())]);
    let new_digest = registry.push(&rt, "models/vision", "2", &[("weights.bin", new.clone())]);
    let lying = format!(
        "sha256:{}",
        berth_compiler::plan::hex(&Sha256::digest(&new))
    );
    let auth = root.join("registry-auth.json");
    std::fs::write(&auth, registry::auth_for(&proxy.host())).expect("auth");
    let seen = root.join("seen.bin");
    let release = |n: &str, digest: &str| {
        let mut w = with_model(
            workload(
                "vision",
                &format!(
                    "cp \"$BERTH_MODEL/weights.bin\" '{}'; sleep 100",
                    seen.display()
                ),
            ),
            format!("oci://{}/models/vision:{n}", proxy.host()),
            digest.to_string(),
        );
        w.release = n.into();
        w
    };
    publish(
        root,
        &bundle(1, vec![release("1", &old_digest)]).sign(&keys.secret),
    );
    let ca = registry.ca.display().to_string();
    let auth = auth.display().to_string();
    let state = root.join("state");
    let agent = AgentProc::start(
        &state,
        &keys.public,
        &root.join("site.bundle.json").display().to_string(),
        &["--registry-ca", &ca, "--registry-auth", &auth],
    );
    let status = agent.wait_for_workload("vision", "running", Duration::from_secs(30));
    let pid = pid_of(&status, "vision").expect("pid");
    wait_for(Duration::from_secs(10), || {
        (std::fs::read(&seen).ok()? == old).then_some(())
    });

    proxy.inject(Fault {
        method: Some("GET"),
        path: Some(format!("/blobs/{lying}")),
        kind: FaultKind::Corrupt { at: 12345 },
        times: u32::MAX,
        after_writes: 0,
    });
    publish(
        root,
        &bundle(2, vec![release("2", &new_digest)]).sign(&keys.secret),
    );
    agent.sync();
    let status = wait_for(Duration::from_secs(30), || {
        let s = agent.status();
        (s["generation"] == 2 && workload_state(&s, "vision").as_deref() == Some("blocked"))
            .then_some(s)
    });
    let reason = status["workloads"][0]["reason"].as_str().expect("reason");
    assert!(
        reason.contains(&lying),
        "the reason names the layer: {reason}"
    );
    assert!(
        proxy.log().iter().any(|r| r.contains(&lying)),
        "the blob went through the proxy: {:?}",
        proxy.log()
    );
    // A few reconciles later, the earlier release still runs, on its model.
    std::thread::sleep(Duration::from_secs(2));
    let status = agent.status();
    assert_eq!(pid_of(&status, "vision"), Some(pid), "{status}");
    assert!(alive(pid), "the earlier release was stopped");
    assert_eq!(std::fs::read(&seen).expect("seen"), old);
    let cache = state.join("cache");
    assert!(cache.join("oci").join(&old_digest[7..]).is_dir());
    assert!(!cache.join("oci").join(&new_digest[7..]).exists());
    assert_nothing_half_kept(&cache.join("partial"));
    assert_eq!(status["cache"]["artifacts"], 1, "{status}");
    let mut cursor = 0;
    let events = drain_telemetry(&agent, &mut cursor);
    assert!(
        events.iter().any(|e| e["kind"] == "artifact_rejected"),
        "{events:#?}"
    );

    // The proxy honest again: the new release replaces the old one.
    proxy.clear_faults();
    wait_for(Duration::from_secs(30), || {
        let s = agent.status();
        (workload_state(&s, "vision").as_deref() == Some("running")
            && pid_of(&s, "vision").is_some_and(|p| p != pid))
        .then_some(())
    });
    wait_for(Duration::from_secs(10), || (!alive(pid)).then_some(()));
    wait_for(Duration::from_secs(10), || {
        (std::fs::read(&seen).ok()? == new).then_some(())
    });
}

#[test]
fn a_container_image_without_a_container_engine_is_blocked_with_the_reason() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let mut w = workload("boxed", "true");
    w.image = "registry.example.com/boxed:1".into();
    publish(root, &bundle(1, vec![w]).sign(&keys.secret));
    let agent = AgentProc::start(
        &root.join("state"),
        &keys.public,
        &root.join("site.bundle.json").display().to_string(),
        &[],
    );
    let engines = ["podman", "docker"].map(|e| {
        Command::new(e)
            .arg("info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if engines.contains(&true) {
        return; // A machine with a working engine runs the container instead.
    }
    let status = agent.wait_for_workload("boxed", "blocked", Duration::from_secs(20));
    let reason = status["workloads"][0]["reason"].as_str().expect("reason");
    assert!(
        reason
            .starts_with("no container runtime for image `registry.example.com/boxed:1`: podman "),
        "{reason}"
    );
}

#[test]
fn an_idle_notebook_is_reclaimed_at_its_threshold_and_not_before() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    // One GPU, the notebook's process on it, 0% utilisation throughout.
    let samples = root.join("gpu.jsonl");
    let line = r#"[{"index":0,"name":"NVIDIA L4","memory_total":24000000000,"memory_used":2000000000,"utilization":0,"processes":[{"pid":1,"used_memory":2000000000,"workload":"notebook"}]}]"#;
    std::fs::write(&samples, format!("{line}\n")).expect("samples");
    let mut nb = workload("notebook", "sleep 1000");
    nb.kind = "notebook".into();
    nb.gpus_per_replica = 1;
    nb.reclaim = Some(ReclaimContract {
        policy: "idle_notebooks".into(),
        idle_after_ns: 3_000_000_000,
    });
    publish(root, &bundle(1, vec![nb]).sign(&keys.secret));
    let samples_arg = samples.display().to_string();
    let agent = AgentProc::start(
        &root.join("state"),
        &keys.public,
        &root.join("site.bundle.json").display().to_string(),
        &[
            "--gpu-samples",
            &samples_arg,
            "--gpu-interval",
            "0.2",
            "--gpu-record-interval",
            "1",
        ],
    );
    wait_for(Duration::from_secs(20), || {
        (workload_state(&agent.status(), "notebook").as_deref() == Some("running")).then_some(())
    });
    let running_since = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        workload_state(&agent.status(), "notebook").as_deref(),
        Some("running"),
        "reclaimed before its threshold"
    );
    let status = agent.wait_for_workload("notebook", "reclaimed", Duration::from_secs(10));
    assert!(
        running_since.elapsed() >= Duration::from_millis(2500),
        "reclaimed after {:?}",
        running_since.elapsed()
    );
    assert_eq!(status["gpus"]["devices"][0]["name"], "NVIDIA L4");
    let mut cursor = 0;
    let events = drain_telemetry(&agent, &mut cursor);
    let reclaim = events
        .iter()
        .find(|e| e["kind"] == "reclaim")
        .expect("a reclaim event");
    assert_eq!(reclaim["workload"], "notebook");
    assert!(events.iter().any(|e| e["kind"] == "gpu_sample"));
    // The agent's audit trail holds the bundle it accepted and the reclaim, chained.
    let log = root.join("state/audit.redb");
    let audit = |flag: &str| {
        let out = isolated::berth()
            .args(["audit", flag, "--log"])
            .arg(&log)
            .output()
            .expect("berth audit");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let out = audit("--jsonl");
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let actions: Vec<&str> = records
        .iter()
        .filter_map(|r| r["action"].as_str())
        .collect();
    assert_eq!(actions, ["bundle_accepted", "reclaimed"], "{records:#?}");
    assert_eq!(records[0]["actor"], "agent:site");
    assert!(
        records[0]["detail"]["signed_by"]
            .as_str()
            .is_some_and(|s| s.starts_with("ed25519:"))
    );
    assert_eq!(records[1]["detail"]["workload"], "notebook");
    assert_eq!(records[1]["detail"]["evidence"]["policy"], "idle_notebooks");
    audit("--verify");
}

#[test]
fn without_nvml_the_agent_says_so_and_runs() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    publish(root, &bundle(1, vec![]).sign(&keys.secret));
    // `--gpu-interval` without `--gpu-samples` keeps the NVML probe.
    let agent = AgentProc::start(
        &root.join("state"),
        &keys.public,
        &root.join("site.bundle.json").display().to_string(),
        &["--gpu-interval", "1"],
    );
    let status = agent.status();
    let unavailable = status["gpus"]["unavailable"].as_str().map(str::to_string);
    if Path::new("/dev/nvidiactl").exists() {
        return; // A machine with a driver: NVML may open.
    }
    let reason = unavailable.expect("a reason");
    assert!(reason.starts_with("no NVML: "), "{reason}");
    assert!(
        agent
            .stderr
            .lock()
            .expect("stderr")
            .contains("gpu: no NVML: ")
    );
}

/// A spec of one `exec:` workload on a `runtime = local` target of 1 CPU and 1 GiB.
fn local_spec(name: &str, command: &str, replicas: u32, memory: &str) -> String {
    format!(
        r#"workload {name} {{
  release  = "1"
  image    = "exec:{command}"
  kind     = service
  class    = development
  identity = service_account("t")
  replicas = {replicas}
  resources {{ cpu = 0.1  memory = {memory} }}
}}

target here {{
  class        = edge
  runtime      = local
  connectivity = connected
  cpu    = 1
  memory = 1GiB
}}
"#
    )
}

/// A plan that places nothing is refused (exit 1, nothing started), and one left short names
/// each short workload but still runs what fits.
#[test]
fn apply_refuses_a_plan_that_places_nothing_and_names_short_workloads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let spec = root.join("spec");
    std::fs::create_dir_all(&spec).expect("spec dir");
    let write_spec = |replicas: u32, memory: &str| {
        let text = local_spec("big", "sleep 100", replicas, memory);
        std::fs::write(spec.join("spec.berth"), text).expect("spec");
    };
    let apply = || {
        isolated::berth()
            .args(["apply", "--run-for", "0.2", "--state"])
            .arg(root.join("state"))
            .arg(&spec)
            .output()
            .expect("run")
    };

    write_spec(1, "64GiB");
    let out = apply();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: the plan places no replica; nothing is applied"),
        "{err}"
    );
    assert!(err.contains("help: `berth explain"), "{err}");
    assert!(!err.contains("running"), "{err}");

    // 3 × 400 MiB on a 1 GiB target: two fit, the third is named and the two run.
    write_spec(3, "400MiB");
    let out = apply();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: `big`: 1 of 3 replica(s) not placed"),
        "{err}"
    );
    assert!(err.contains("running 1 workload(s) here"), "{err}");
}

#[test]
fn apply_runs_local_targets_here_and_publishes_edge_bundles() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let spec = root.join("spec");
    std::fs::create_dir_all(&spec).expect("spec dir");
    let marker = root.join("local.ticks");
    let command = ticking(&marker).replace('\'', "");
    std::fs::write(
        spec.join("spec.berth"),
        local_spec("ticker", &command, 1, "16MiB"),
    )
    .expect("spec");
    let out = isolated::berth()
        .args(["apply", "--run-for", "2", "--state"])
        .arg(root.join("state"))
        .arg(&spec)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("target `here`: running 1 workload(s) here (generation 1"),
        "{err}"
    );
    assert!(err.contains("ticker running"), "{err}");
    assert!(lines(&marker) > 3, "the local workload did not run");
    let ticks = lines(&marker);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(lines(&marker), ticks, "the workload outlived `berth apply`");

    // Applied again unchanged: the same generation; changed: the next one.
    let apply_local = || {
        let out = isolated::berth()
            .args(["apply", "--run-for", "0.2", "--state"])
            .arg(root.join("state"))
            .arg(&spec)
            .output()
            .expect("run");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = apply_local();
    assert!(err.contains("(generation 1,"), "{err}");
    let text = std::fs::read_to_string(spec.join("spec.berth")).expect("spec");
    std::fs::write(
        spec.join("spec.berth"),
        text.replace("replicas = 1", "replicas = 2"),
    )
    .expect("spec");
    let err = apply_local();
    assert!(err.contains("(generation 2,"), "{err}");

    // Edge targets: signed bundles, generations counting up.
    let keys_dir = root.join("keys");
    std::fs::create_dir_all(&keys_dir).expect("keys dir");
    let prefix = keys_dir.join("cp");
    assert!(
        isolated::berth()
            .args(["keys", "generate"])
            .arg(&prefix)
            .status()
            .expect("keys")
            .success()
    );
    let store = root.join("bundles");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/edge-fleet");
    let publish_to = |store: &str| {
        let out = isolated::berth()
            .args(["apply", "--bundles", store, "--key"])
            .arg(prefix.with_extension("key"))
            .arg(&repo)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    for generation in [1, 2] {
        let err = publish_to(&store.display().to_string());
        assert!(
            err.contains(&format!(
                "target `rig_alpha`: bundle generation {generation} published"
            )),
            "{err}"
        );
    }
    // The same into an HTTP store, by PUT.
    let http_dir = root.join("http-store");
    std::fs::create_dir_all(&http_dir).expect("http store dir");
    let http_store = Store::start(&http_dir, None);
    let err = publish_to(&http_store.url(""));
    assert!(
        err.contains("target `rig_alpha`: bundle generation 1 published to http://"),
        "{err}"
    );
    assert_eq!(http_store.requests("PUT /rig_alpha.bundle.json").len(), 1);
    let trusted = keys::read_verifying(&prefix.with_extension("pub")).expect("pub");
    let put = std::fs::read(http_dir.join("rig_alpha.bundle.json")).expect("bundle put");
    berth_runtime::backends::edge::bundle::SignedBundle::verify(&put, &trusted)
        .expect("the PUT bundle verifies");
    let bytes = std::fs::read(store.join("rig_alpha.bundle.json")).expect("bundle");
    let (_, bundle) = berth_runtime::backends::edge::bundle::SignedBundle::verify(&bytes, &trusted)
        .expect("verifies");
    assert_eq!(bundle.generation, 2);
    assert_eq!(bundle.workloads[0].name, "leak_watch");
    assert!(
        bundle.workloads[0]
            .variant
            .as_ref()
            .is_some_and(|v| v.digest.is_some())
    );
}

/// The README's first command, `berth apply examples/quickstart`, run as a user would: the
/// web server answers at the URL it prints, the heartbeat writes to the log it names, and
/// Ctrl-C (SIGINT) stops both and exits cleanly.
#[test]
fn the_readme_quickstart_runs_here_and_ctrl_c_stops_it() {
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quickstart");
    let check = isolated::berth()
        .arg("check")
        .arg(&quickstart)
        .output()
        .expect("run");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // A fresh directory as the user's working directory (state goes to `.berth/local`).
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = isolated::berth()
        .arg("apply")
        .arg(&quickstart)
        .current_dir(dir.path())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("berth apply");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut lines_in = BufReader::new(child.stderr.take().expect("stderr"));
    let sink = stderr.clone();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        while lines_in.read_line(&mut line).unwrap_or(0) > 0 {
            sink.lock().expect("stderr").push_str(&line);
            line.clear();
        }
    });
    let text = wait_for(Duration::from_secs(30), || {
        let text = stderr.lock().expect("stderr").clone();
        text.contains("press Ctrl-C to stop").then_some(text)
    });
    assert!(
        text.contains("target `laptop`: running 2 workload(s) here"),
        "{text}"
    );
    assert!(text.contains("on http://127.0.0.1:8087"), "{text}");
    let logs = dir.path().join(".berth/local/laptop/logs");
    assert!(
        text.contains("logs: .berth/local/laptop/logs/WORKLOAD-REPLICA.log"),
        "{text}"
    );
    let pids: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            l.split_once("(pids ")
                .and_then(|(_, r)| r.split(')').next())
        })
        .filter_map(|p| p.parse().ok())
        .collect();
    assert_eq!(pids.len(), 2, "{text}");
    // The web server answers; the heartbeat writes its log.
    let page = wait_for(Duration::from_secs(20), || {
        TcpStream::connect("127.0.0.1:8087").ok().map(|mut s| {
            let _ = write!(s, "GET / HTTP/1.0\r\n\r\n");
            let mut page = String::new();
            let _ = s.read_to_string(&mut page);
            page
        })
    });
    assert!(page.starts_with("HTTP/1.0 200"), "{page}");
    wait_for(Duration::from_secs(20), || {
        std::fs::read_to_string(logs.join("heartbeat-0.log"))
            .ok()
            .filter(|t| t.contains("heartbeat from heartbeat on laptop"))
    });
    assert!(pids.iter().all(|p| alive(*p)));

    // Ctrl-C: both processes stopped, a clean exit.
    assert!(
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill")
            .success()
    );
    let status = child.wait().expect("wait");
    reader.join().expect("stderr reader");
    let text = stderr.lock().expect("stderr").clone();
    assert!(status.success(), "{text}");
    assert!(text.trim_end().ends_with("stopped"), "{text}");
    wait_for(Duration::from_secs(10), || {
        pids.iter().all(|p| !alive(*p)).then_some(())
    });
    assert!(
        TcpStream::connect("127.0.0.1:8087").is_err(),
        "the web server outlived Ctrl-C"
    );
}

#[test]
fn telemetry_beyond_the_budget_is_dropped_oldest_first_and_counted() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    // Exits at once: every restart records a start and an exit.
    publish(
        root,
        &bundle(1, vec![workload("flaky", "exit 3")]).sign(&keys.secret),
    );
    let agent = AgentProc::start(
        &root.join("state"),
        &keys.public,
        &root.join("site.bundle.json").display().to_string(),
        &["--max-events", "4"],
    );
    let status = wait_for(Duration::from_secs(20), || {
        let s = agent.status();
        (s["telemetry"]["dropped"].as_u64() > Some(1)).then_some(s)
    });
    assert!(status["telemetry"]["buffered"].as_u64() <= Some(4));
    let restarts = status["workloads"][0]["replicas"][0]["restarts"]
        .as_u64()
        .expect("restarts");
    assert!(restarts >= 1, "{status:#}");
    let mut cursor = 0;
    let events = drain_telemetry(&agent, &mut cursor);
    assert!(!events.is_empty() && events.len() <= 5, "{events:#?}");
    // The oldest went first: the first event kept is not the bundle's acceptance.
    assert_ne!(events[0]["kind"], "bundle_accepted");
    let (_, metrics) = agent.get("/metrics", Some(TOKEN));
    assert!(
        metrics.contains("berth_agent_telemetry_dropped_total "),
        "{metrics}"
    );
}

/// Figures for docs/performance.md (not a pass/fail test; run with
/// `cargo test -p berth-runtime --test agent -- --ignored --nocapture measure`):
/// artifact fetch with digest verification over loopback, a 100-workload bundle verified,
/// stored and reconciled, and the idle agent's resident memory.
#[test]
#[ignore]
fn measure_agent_figures() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let served = fixture.store_dir();
    let size = 1usize << 30;
    let (_, digest) = serve_model(&served, size);
    let store = Store::start(&served, None);
    let event_at = |events: &[Value], kind: &str| {
        events
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["at_ms"].as_u64().expect("at"))
            .collect::<Vec<_>>()
    };

    // 1. One 1 GiB artifact over HTTP on 127.0.0.1.
    let w = with_model(
        workload("big", "sleep 1000"),
        store.url("model.bin"),
        digest.clone(),
    );
    publish(&served, &bundle(1, vec![w]).sign(&keys.secret));
    let agent = AgentProc::start(
        &root.join("state1"),
        &keys.public,
        &store.url("site.bundle.json"),
        &[],
    );
    let cpu = |pid: u32| {
        // utime + stime, in clock ticks (100 a second on Linux).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let fields: Vec<&str> = stat.rsplit_once(") ").expect("stat").1.split(' ').collect();
        let ticks: u64 =
            fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        ticks as f64 / 100.0
    };
    let cpu_before = cpu(agent.child.id());
    wait_for(Duration::from_secs(120), || {
        (workload_state(&agent.status(), "big").as_deref() == Some("running")).then_some(())
    });
    let cpu_used = cpu(agent.child.id()) - cpu_before;
    let mut cursor = 0;
    let events = drain_telemetry(&agent, &mut cursor);
    let fetched = event_at(&events, "artifact_fetched")[0];
    let ms = fetched - event_at(&events, "bundle_accepted")[0];
    let body_started = store
        .bodies
        .lock()
        .expect("bodies")
        .iter()
        .find(|(path, _)| path.ends_with("model.bin"))
        .map(|(_, at)| *at)
        .expect("the model was served");
    let streaming_ms = fetched.saturating_sub(body_started).max(1);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "fetch+verify 1 GiB over loopback: {ms} ms from bundle accepted = {:.0} MB/s; \
         {streaming_ms} ms from the first byte sent = {:.0} MB/s; agent CPU {cpu_used:.2} s; \
         load average {}",
        size as f64 / 1e6 / (ms as f64 / 1e3),
        size as f64 / 1e6 / (streaming_ms as f64 / 1e3),
        load.split(' ').take(3).collect::<Vec<_>>().join(" ")
    );
    drop(agent);

    // 2. 100 workloads sharing one cached artifact (file://), process runtime.
    let small = root.join("small.bin");
    std::fs::write(&small, b"weights").expect("small");
    let small_digest = format!(
        "sha256:{}",
        berth_compiler::plan::hex(&Sha256::digest(b"weights"))
    );
    let workloads = (0..100)
        .map(|i| {
            with_model(
                workload(&format!("w{i:03}"), "sleep 1000"),
                format!("file://{}", small.display()),
                small_digest.clone(),
            )
        })
        .collect();
    publish(&served, &bundle(2, workloads).sign(&keys.secret));
    let agent = AgentProc::start(
        &root.join("state2"),
        &keys.public,
        &store.url("site.bundle.json"),
        &[],
    );
    wait_for(Duration::from_secs(60), || {
        let s = agent.status();
        (s["workloads"]
            .as_array()
            .is_some_and(|w| w.len() == 100 && w.iter().all(|w| w["state"] == "running")))
        .then_some(())
    });
    let mut cursor = 0;
    let events = drain_telemetry(&agent, &mut cursor);
    let accepted = event_at(&events, "bundle_accepted")[0];
    let last_start = *event_at(&events, "workload_started")
        .iter()
        .max()
        .expect("starts");
    println!(
        "100-workload bundle accepted → last of 100 processes started: {} ms",
        last_start - accepted
    );

    // 3. Idle resident memory (the 100-workload agent, settled).
    std::thread::sleep(Duration::from_secs(2));
    let rss =
        std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).expect("status");
    let rss = rss
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .unwrap_or_default()
        .to_string();
    println!("agent resident memory with 100 workloads: {rss}");
    drop(agent);
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).expect("dir");
    publish(&empty, &bundle(1, vec![]).sign(&keys.secret));
    let agent = AgentProc::start(
        &root.join("state3"),
        &keys.public,
        &empty.join("site.bundle.json").display().to_string(),
        &[],
    );
    std::thread::sleep(Duration::from_secs(3));
    let rss =
        std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).expect("status");
    println!(
        "idle agent resident memory: {}",
        rss.lines()
            .find(|l| l.starts_with("VmRSS"))
            .unwrap_or_default()
    );
}

/// A spec with one edge target `site` whose agent is at `agent`, and one workload there.
fn edge_spec(dir: &Path, agent: &str) {
    std::fs::create_dir_all(dir).expect("spec dir");
    std::fs::write(
        dir.join("spec.berth"),
        format!(
            r#"workload ticker {{
  release  = "1"
  image    = "exec:sleep 1000"
  kind     = service
  class    = production
  identity = service_account("t")
  replicas = 1
  resources {{ cpu = 0.1  memory = 16MiB }}
}}

target site {{
  class        = edge
  runtime      = edge {{ agent = "{agent}" }}
  connectivity = connected
  cpu    = 2
  memory = 2GiB
}}
"#
        ),
    )
    .expect("spec");
}

/// `berth apply SPEC --bundles STORE --key KEY`: the edge bundles published.
fn apply_edge_spec(spec: &Path, store: &Path, key: &Path) {
    let out = isolated::berth()
        .args(["apply", "--bundles"])
        .arg(store)
        .arg("--key")
        .arg(key)
        .arg(spec)
        .output()
        .expect("apply");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `berth status SPEC ARGS --output json`: (exit code, the JSON document, stdout and stderr
/// of the same call in human form).
fn berth_status(spec: &Path, args: &[&str], env_token: Option<&str>) -> (i32, Value, String) {
    let run = |json: bool| {
        let mut command = isolated::berth();
        command.env_remove("BERTH_AGENT_TOKEN");
        if let Some(token) = env_token {
            command.env("BERTH_AGENT_TOKEN", token);
        }
        if json {
            command.args(["--output", "json"]);
        }
        command
            .arg("status")
            .arg(spec)
            .args(args)
            .output()
            .expect("berth status")
    };
    let json = run(true);
    let human = run(false);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&human.stdout),
        String::from_utf8_lossy(&human.stderr)
    );
    assert_eq!(json.status.code(), human.status.code(), "{text}");
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&json.stdout),
            String::from_utf8_lossy(&json.stderr)
        )
    });
    assert!(
        !text.contains(TOKEN) && !doc.to_string().contains(TOKEN),
        "the token was printed: {text}"
    );
    (json.status.code().unwrap_or(-1), doc, text)
}

#[test]
fn berth_status_asks_edge_agents_and_reports_refusals_and_lost_agents() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let store = root.join("bundles");
    let state = root.join("state");
    let agent = AgentProc::start(
        &state,
        &keys.public,
        &store.join("site.bundle.json").display().to_string(),
        &[],
    );
    let spec = root.join("spec");
    edge_spec(&spec, &agent.url);
    apply_edge_spec(&spec, &store, &root.join("cp.key"));
    agent.sync();
    let start = Instant::now();
    wait_for(Duration::from_secs(20), || {
        let s = agent.status();
        assert!(start.elapsed() < Duration::from_secs(15), "{s:#}");
        (workload_state(&s, "ticker").as_deref() == Some("running")).then_some(())
    });
    let token_file = state.with_extension("token");
    let seen = root.join("seen");
    let seen_arg = seen.display().to_string();
    let token_arg = token_file.display().to_string();

    // Reachable: desired from the plan, running from the agent, generation, cache and GPUs.
    let (code, doc, text) = berth_status(
        &spec,
        &["--agent-token-file", &token_arg, "--agent-seen", &seen_arg],
        None,
    );
    assert_eq!(code, 0, "{text}");
    let site = &doc["edge"][0];
    assert_eq!(site["target"], "site");
    assert_eq!(site["state"], "reachable", "{doc:#}");
    assert_eq!(site["generation"], 1);
    assert!(
        site["bundle_plan_id"]
            .as_str()
            .is_some_and(|p| p.starts_with("sha256:"))
    );
    assert_eq!(
        site["workloads"],
        serde_json::json!([
            {"workload": "ticker", "desired": 1, "running": 1, "state": "running", "reason": null}
        ])
    );
    assert_eq!(site["cache"]["artifacts"], 0);
    assert_eq!(site["gpus"]["unavailable"], "GPU sampling is off");
    assert!(
        text.contains(&format!(
            "edge target `site` at {}: generation 1 (plan sha256:",
            agent.url
        )),
        "{text}"
    );
    assert!(
        text.contains("ticker               1/1 running  running"),
        "{text}"
    );
    assert!(text.contains("gpu: GPU sampling is off"), "{text}");
    // The token may come from the environment instead.
    let (code, doc, _) = berth_status(&spec, &["--agent-seen", &seen_arg], Some(TOKEN));
    assert_eq!(
        (code, &doc["edge"][0]["state"]),
        (0, &Value::from("reachable"))
    );

    // A wrong token: refused (401), reported as such, the command still answers.
    let wrong = root.join("wrong.token");
    std::fs::write(&wrong, "not-the-token\n").expect("wrong token");
    let wrong_arg = wrong.display().to_string();
    let (code, doc, text) = berth_status(
        &spec,
        &["--agent-token-file", &wrong_arg, "--agent-seen", &seen_arg],
        None,
    );
    assert_eq!(code, 1, "{text}");
    assert_eq!(doc["edge"][0]["state"], "unauthorized");
    assert!(
        text.contains("unauthorized: the agent refused the token (401 Unauthorized)"),
        "{text}"
    );
    // No token at all: not asked.
    let (code, doc, _) = berth_status(&spec, &["--agent-seen", &seen_arg], None);
    assert_eq!(
        (code, &doc["edge"][0]["state"]),
        (1, &Value::from("no_token"))
    );

    // The agent goes away: unreachable, with when it was last reached and what it ran.
    let last = doc["edge"][0]["last_reachable_ms"].as_u64().expect("seen");
    drop(agent);
    let (code, doc, text) = berth_status(
        &spec,
        &["--agent-token-file", &token_arg, "--agent-seen", &seen_arg],
        None,
    );
    assert_eq!(code, 1, "{text}");
    let site = &doc["edge"][0];
    assert_eq!(site["state"], "unreachable");
    assert!(
        site["error"]
            .as_str()
            .is_some_and(|e| e.contains("onnection refused")),
        "{site:#}"
    );
    assert_eq!(site["last_reachable_ms"], last);
    assert_eq!(site["generation"], 1);
    assert_eq!(site["workloads"][0]["desired"], 1);
    assert!(text.contains("unreachable: "), "{text}");
    assert!(text.contains(", generation 1)"), "{text}");
    assert!(text.contains("(last reached 20"), "{text}");
}

#[test]
fn the_agent_api_over_tls_is_trusted_only_with_its_ca() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let (ca, cert, key) = tls_files(root);
    let store = root.join("bundles");
    let state = root.join("state");
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let agent = AgentProc::start(
        &state,
        &keys.public,
        &store.join("site.bundle.json").display().to_string(),
        &["--tls-cert", &cert_arg, "--tls-key", &key_arg],
    );
    assert!(agent.url.starts_with("https://127.0.0.1:"), "{}", agent.url);
    let spec = root.join("spec");
    edge_spec(&spec, &agent.url);
    apply_edge_spec(&spec, &store, &root.join("cp.key"));
    let token = state.with_extension("token").display().to_string();
    let (ca_arg, seen) = (
        ca.display().to_string(),
        root.join("seen").display().to_string(),
    );
    let with_ca = [
        "--agent-token-file",
        token.as_str(),
        "--agent-ca",
        ca_arg.as_str(),
        "--agent-seen",
        seen.as_str(),
    ];
    // Connections stalled before their handshake (more than the agent holds) take no room
    // from an authorised client.
    let stalled_handshakes = stalled(&agent.url, 300, b"");
    // Trusting the CA: the agent answers over TLS (it pulls the bundle on its own interval).
    let doc = wait_for(Duration::from_secs(30), || {
        let (code, doc, _) = berth_status(&spec, &with_ca, None);
        (code == 0 && doc["edge"][0]["workloads"][0]["running"] == 1).then_some(doc)
    });
    assert_eq!(doc["edge"][0]["state"], "reachable");
    assert_eq!(doc["edge"][0]["generation"], 1);
    // Not trusting it: the certificate is refused, reported as unreachable.
    let (code, doc, text) = berth_status(
        &spec,
        &["--agent-token-file", &token, "--agent-seen", &seen],
        None,
    );
    assert_eq!(code, 1, "{text}");
    assert_eq!(doc["edge"][0]["state"], "unreachable");
    assert!(
        doc["edge"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("certificate")),
        "{doc:#}"
    );
    // Over TLS, a wrong token is still refused.
    let wrong = root.join("wrong.token");
    std::fs::write(&wrong, "nope").expect("token");
    let wrong = wrong.display().to_string();
    let (code, doc, _) = berth_status(
        &spec,
        &[
            "--agent-token-file",
            &wrong,
            "--agent-ca",
            &ca_arg,
            "--agent-seen",
            &seen,
        ],
        None,
    );
    assert_eq!(
        (code, &doc["edge"][0]["state"]),
        (1, &Value::from("unauthorized"))
    );
    drop(stalled_handshakes);
}

/// Live processes whose command line contains `needle`.
fn processes_running(needle: &str) -> Vec<u64> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .contains(needle)
            && alive(pid)
        {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn kill_9_mid_reconcile_leaves_no_orphan_and_no_double() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let served = fixture.store_dir();
    let (_, digest) = serve_model(&served, 6 << 20);
    // 2 MiB/s: the reconcile spends about three seconds on `slow`'s model, with five
    // workloads started before it and five after.
    let store = Store::start(&served, Some(2 << 20));
    // `exec`: one process per replica, whatever the shell.
    let needle = format!("sleep 7{}", std::process::id());
    let command = format!("exec {needle}");
    let mut workloads: Vec<BundleWorkload> = (0..5)
        .map(|i| workload(&format!("a{i}"), &command))
        .collect();
    workloads.push(with_model(
        workload("slow", "sleep 1000"),
        store.url("model.bin"),
        digest,
    ));
    workloads.extend((0..5).map(|i| workload(&format!("b{i}"), &command)));
    publish(&served, &bundle(1, workloads).sign(&keys.secret));
    let state = root.join("state");
    let mut agent = AgentProc::start(&state, &keys.public, &store.url("site.bundle.json"), &[]);
    let status = agent.wait_for_workload("a4", "running", Duration::from_secs(20));
    assert_eq!(workload_state(&status, "b0").as_deref(), Some("starting"));
    let before = processes_running(&needle);
    assert_eq!(before.len(), 5, "a0..a4 run before the download");
    agent.kill9();

    // Restarted: the five orphans are stopped, every workload runs once.
    let agent = AgentProc::start(&state, &keys.public, &store.url("site.bundle.json"), &[]);
    let status = wait_for(Duration::from_secs(30), || {
        let s = agent.status();
        s["workloads"]
            .as_array()
            .is_some_and(|w| w.len() == 11 && w.iter().all(|w| w["state"] == "running"))
            .then_some(s)
    });
    assert_eq!(status["generation"], 1);
    wait_for(Duration::from_secs(10), || {
        before.iter().all(|p| !alive(*p)).then_some(())
    });
    // (A replica's shell is briefly there too, until it `exec`s.)
    let start = Instant::now();
    let after = wait_for(Duration::from_secs(10), || {
        let after = processes_running(&needle);
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "not one process per workload: {after:?}"
        );
        (after.len() == 10).then_some(after)
    });
    assert!(after.iter().all(|p| !before.contains(p)));
}

// ------------------------------------------------------------------ hostile input (issue 17)

/// Opens `n` connections to the agent's `host:port` that send `partial` and then nothing.
fn stalled(url: &str, n: usize, partial: &[u8]) -> Vec<TcpStream> {
    let host = url
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(host).expect("connect");
            s.write_all(partial).expect("send the start");
            s
        })
        .collect()
}

/// Reads until the server closes `stream` (at most `limit`): what it sent, and how long it
/// took. Panics if it is still open after `limit`.
fn until_closed(stream: &mut TcpStream, limit: Duration) -> (String, Duration) {
    let started = Instant::now();
    stream.set_read_timeout(Some(limit)).expect("timeout");
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("still open after {limit:?}: {e}"),
    }
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

/// An agent running generation 1 of a one-workload bundle read from a file.
fn running_agent(fixture: &Fixture) -> (AgentProc, PathBuf) {
    let served = fixture.store_dir();
    publish(
        &served,
        &bundle(1, vec![workload("a", "sleep 1000")]).sign(&fixture.keys.secret),
    );
    let source = served.join("site.bundle.json");
    let agent = AgentProc::start(
        &fixture.root().join("state"),
        &fixture.keys.public,
        &source.display().to_string(),
        &[],
    );
    agent.wait_for_workload("a", "running", Duration::from_secs(20));
    (agent, served)
}

#[test]
fn slow_and_idle_connections_cannot_lock_out_an_authorised_client() {
    let fixture = Fixture::new();
    let (agent, _) = running_agent(&fixture);
    // More connections than the agent holds, all from this address: slow-loris requests that
    // never finish their headers, and connections that never send a byte.
    let loris = stalled(&agent.url, 300, b"GET /v1/status HTTP/1.1\r\nhost: x\r\n");
    let mut silent = stalled(&agent.url, 40, b"");
    for _ in 0..3 {
        assert_eq!(agent.status()["generation"], 1);
    }
    // An authorised body that stalls: refused when its time is up.
    let host = agent.url.trim_start_matches("http://").to_string();
    let mut slow_body = TcpStream::connect(&host).expect("connect");
    write!(
        slow_body,
        "POST /v1/telemetry/ack HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"thr"
    )
    .expect("send");
    // A connection that never sends its headers is closed once its time is up.
    let last = silent.last_mut().expect("a connection");
    let (_, waited) = until_closed(last, Duration::from_secs(30));
    assert!(waited >= Duration::from_secs(5), "closed after {waited:?}");
    let (answer, _) = until_closed(&mut slow_body, Duration::from_secs(30));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");

    // Too large a body is refused at once, from its declared length.
    let mut big = TcpStream::connect(&host).expect("connect");
    write!(
        big,
        "POST /v1/telemetry/ack HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-length: 1048576\r\nconnection: close\r\n\r\n"
    )
    .expect("send");
    let (answer, _) = until_closed(&mut big, Duration::from_secs(10));
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // A wrong token is refused, logged, and never quoted back.
    assert_eq!(agent.get("/v1/status", Some("guess-0451")).0, 401);

    let log = wait_for(Duration::from_secs(10), || {
        let log = agent.stderr.lock().expect("stderr").clone();
        log.contains("wrong bearer token").then_some(log)
    });
    for expected in [
        "closed to make room",
        "no complete request headers within 10 s",
        "the body did not arrive within 10 s",
        "the body is larger than 65536 bytes",
        "request refused: GET /v1/status from 127.0.0.1:",
    ] {
        assert!(log.contains(expected), "{expected}: {log}");
    }
    assert!(!log.contains("guess-0451") && !log.contains(TOKEN), "{log}");
    drop(loris);
}

#[test]
fn refusals_are_logged_malformed_is_not_unsigned_and_an_accepted_bundle_clears_them() {
    let fixture = Fixture::new();
    let (agent, served) = running_agent(&fixture);
    let secret = &fixture.keys.secret;
    let evil = || bundle(2, vec![workload("evil", "sleep 1000")]).sign(secret);
    let mut malformed = evil();
    malformed.signature = "ed25519:not-hex".into();
    let mut unsigned = evil();
    unsigned.signature = String::new();
    for (bad, why) in [
        (malformed, "the signature is malformed"),
        (unsigned, "the bundle is unsigned"),
    ] {
        publish(&served, &bad);
        agent.sync();
        let status = wait_for(Duration::from_secs(10), || {
            let s = agent.status();
            let rejection = s["source"]["last_rejection"].as_str().unwrap_or_default();
            rejection.starts_with(why).then_some(s)
        });
        assert!(status["source"]["last_rejection_ms"].as_u64().is_some());
        assert_eq!(status["generation"], 1);
    }
    // Larger than a bundle may be: refused without being read whole.
    let huge = vec![b' '; (16 << 20) + 1];
    std::fs::write(served.join("site.bundle.json"), huge).expect("write");
    agent.sync();
    wait_for(Duration::from_secs(10), || {
        let s = agent.status();
        s["source"]["last_rejection"]
            .as_str()
            .is_some_and(|r| r.contains("larger than 16777216 bytes"))
            .then_some(())
    });
    // A good bundle: accepted, and the refusal is history.
    publish(
        &served,
        &bundle(2, vec![workload("b", "sleep 1000")]).sign(secret),
    );
    agent.sync();
    let status = agent.wait_for_workload("b", "running", Duration::from_secs(20));
    assert_eq!(status["source"]["last_rejection"], Value::Null);
    assert_eq!(status["source"]["last_rejection_ms"], Value::Null);
    let log = agent.stderr.lock().expect("stderr").clone();
    for expected in [
        "bundle refused: the signature is malformed",
        "bundle refused: the bundle is unsigned",
        "bundle refused: the bundle is larger than 16777216 bytes",
        "generation 1 keeps running",
        "bundle accepted: generation 2",
    ] {
        assert!(log.contains(expected), "{expected}: {log}");
    }
}

#[test]
fn a_truncated_state_database_is_moved_aside_and_the_bundle_fetched_again() {
    let fixture = Fixture::new();
    let (mut agent, served) = running_agent(&fixture);
    agent.terminate();
    let state = fixture.root().join("state");
    let database = state.join("agent.redb");
    let bytes = std::fs::read(&database).expect("the database");
    let truncated = &bytes[..bytes.len() / 2];
    std::fs::write(&database, truncated).expect("truncate");

    let agent = AgentProc::start(
        &state,
        &fixture.keys.public,
        &served.join("site.bundle.json").display().to_string(),
        &[],
    );
    let status = agent.wait_for_workload("a", "running", Duration::from_secs(20));
    assert_eq!(status["generation"], 1);
    let aside: Vec<PathBuf> = std::fs::read_dir(&state)
        .expect("state dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.display().to_string().contains("agent.redb.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).expect("kept"), truncated);
    let log = agent.stderr.lock().expect("stderr").clone();
    assert!(log.contains("the state database is corrupt"), "{log}");
    assert!(
        !log.contains("panicked"),
        "the store's panic was shown: {log}"
    );
    assert!(
        log.contains(&format!("moved it aside to `{}`", aside[0].display())),
        "{log}"
    );
    let mut cursor = 0;
    let events = drain_telemetry(&agent, &mut cursor);
    assert!(
        events.iter().any(|e| e["kind"] == "state_recovered"),
        "{events:#?}"
    );
}

/// Losing the database to corruption must not let an older signed bundle back in: the
/// admission floor beside it remembers generation 2, so a replayed generation 1 is refused
/// and generation 2 itself accepted again.
#[test]
fn after_the_database_is_lost_an_older_bundle_is_still_refused() {
    let fixture = Fixture::new();
    let (mut agent, served) = running_agent(&fixture);
    let secret = &fixture.keys.secret;
    let old = bundle(1, vec![workload("a", "sleep 1000")]).sign(secret);
    let newer = bundle(2, vec![workload("b", "sleep 1000")]).sign(secret);
    publish(&served, &newer);
    agent.sync();
    agent.wait_for_workload("b", "running", Duration::from_secs(20));
    agent.terminate();
    let state = fixture.root().join("state");
    let database = state.join("agent.redb");
    let bytes = std::fs::read(&database).expect("the database");
    std::fs::write(&database, &bytes[..bytes.len() / 2]).expect("truncate");
    // Someone replays the older, validly signed bundle.
    publish(&served, &old);
    let agent = AgentProc::start(
        &state,
        &fixture.keys.public,
        &served.join("site.bundle.json").display().to_string(),
        &[],
    );
    let status = wait_for(Duration::from_secs(20), || {
        let s = agent.status();
        s["source"]["last_rejection"]
            .as_str()
            .is_some_and(|r| r.contains("generation 1 is not newer than generation 2"))
            .then_some(s)
    });
    assert_eq!(status["generation"], Value::Null, "{status:#}");
    publish(&served, &newer);
    agent.sync();
    let status = agent.wait_for_workload("b", "running", Duration::from_secs(20));
    assert_eq!(status["generation"], 2);
}

#[test]
fn an_artifact_larger_than_the_cache_budget_is_not_downloaded_past_it() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let served = fixture.store_dir();
    let (_, digest) = serve_model(&served, 3 << 20);
    let store = Store::start(&served, None);
    let w = with_model(workload("big", "sleep 100"), store.url("model.bin"), digest);
    publish(&served, &bundle(1, vec![w]).sign(&keys.secret));
    let state = root.join("state");
    let agent = AgentProc::start(
        &state,
        &keys.public,
        &store.url("site.bundle.json"),
        &["--cache-budget", "1000000"],
    );
    let status = agent.wait_for_workload("big", "blocked", Duration::from_secs(20));
    let reason = status["workloads"][0]["reason"].as_str().expect("reason");
    assert!(
        reason.contains("is larger than the cache budget of 1000000 bytes"),
        "{reason}"
    );
    // Nothing of it is kept: no partial download waits to be resumed.
    assert_nothing_half_kept(&state.join("cache").join("partial"));
}

/// `/metrics` of a running agent, parsed by the Prometheus project's own text-format parser
/// (`prometheus_client.parser`, the Python client; `.ci/run` installs it): the GPU families
/// under dcgm-exporter's names, units and labels, with the agent's target, plan and the
/// workload holding each GPU.
#[test]
fn gpu_metrics_use_dcgm_exporter_names_and_parse_as_prometheus_text() {
    let fixture = Fixture::new();
    let (root, keys) = (fixture.root(), &fixture.keys);
    let samples = root.join("gpu.jsonl");
    let line = r#"[{"index":0,"name":"NVIDIA L4","uuid":"GPU-5f1c1c52-8a2e-4f0e-9d6b-0b8f2a1e7c11","memory_total":24159191040,"memory_used":6442450944,"utilization":87,"power_mw":71500,"temperature_c":61,"sm_clock_mhz":2040,"processes":[{"pid":1,"used_memory":6442450944,"workload":"detector"}]},{"index":1,"name":"NVIDIA L4","memory_total":24159191040,"memory_used":0,"utilization":0}]"#;
    std::fs::write(&samples, format!("{line}\n")).expect("samples");
    publish(
        root,
        &bundle(1, vec![workload("detector", "sleep 1000")]).sign(&keys.secret),
    );
    let samples_arg = samples.display().to_string();
    let agent = AgentProc::start(
        &root.join("state"),
        &keys.public,
        &root.join("site.bundle.json").display().to_string(),
        &["--gpu-samples", &samples_arg, "--gpu-interval", "0.2"],
    );
    // Both devices sampled, and the bundle taken (its plan and workload label the series): on
    // a busy machine the first sample can come before the bundle.
    wait_for(Duration::from_secs(20), || {
        let s = agent.status();
        (s["gpus"]["devices"].as_array().map(Vec::len) == Some(2)
            && s["plan_id"]
                .as_str()
                .is_some_and(|p| p.starts_with("sha256:"))
            && workload_state(&s, "detector").as_deref() == Some("running"))
        .then_some(())
    });
    let (code, text) = agent.get("/metrics", Some(TOKEN));
    assert_eq!(code, 200);
    // The parser prints every sample as JSON: name, labels, value; it raises on bad text.
    let parse = "import json, sys\nfrom prometheus_client.parser import text_string_to_metric_families\n\
                 out = []\nfor f in text_string_to_metric_families(sys.stdin.read()):\n    \
                 for s in f.samples:\n        out.append({'family': f.name, 'type': f.type, \
                 'name': s.name, 'labels': s.labels, 'value': s.value})\nprint(json.dumps(out))\n";
    let mut python = Command::new("python3")
        .args(["-c", parse])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    python
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = python.wait_with_output().expect("parser");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("No module named 'prometheus_client'") {
        assert!(
            std::env::var_os("CI").is_none(),
            "prometheus_client is not installed (pip install prometheus-client)"
        );
        eprintln!("skipped: prometheus_client is not installed");
        return;
    }
    assert!(
        out.status.success(),
        "the Prometheus parser refused:\n{stderr}\n{text}"
    );
    let samples: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    let find = |name: &str, gpu: &str| {
        samples
            .iter()
            .find(|s| s["name"] == name && s["labels"]["gpu"] == gpu)
            .unwrap_or_else(|| panic!("no {name} for gpu {gpu}:\n{text}"))
            .clone()
    };
    let util = find("DCGM_FI_DEV_GPU_UTIL", "0");
    assert_eq!(util["type"], "gauge");
    assert_eq!(util["value"], 87.0);
    let labels = &util["labels"];
    assert_eq!(labels["UUID"], "GPU-5f1c1c52-8a2e-4f0e-9d6b-0b8f2a1e7c11");
    assert_eq!(labels["device"], "nvidia0");
    assert_eq!(labels["modelName"], "NVIDIA L4");
    assert_eq!(labels["target"], "site");
    assert!(
        labels["plan"]
            .as_str()
            .is_some_and(|p| p.starts_with("sha256:"))
    );
    assert_eq!(labels["workload"], "detector");
    assert!(labels["Hostname"].is_string());
    assert_eq!(find("DCGM_FI_DEV_FB_USED", "0")["value"], 6144.0);
    assert_eq!(find("DCGM_FI_DEV_FB_FREE", "0")["value"], 16896.0);
    assert_eq!(find("DCGM_FI_DEV_POWER_USAGE", "0")["value"], 71.5);
    assert_eq!(find("DCGM_FI_DEV_GPU_TEMP", "0")["value"], 61.0);
    assert_eq!(find("DCGM_FI_DEV_SM_CLOCK", "0")["value"], 2040.0);
    // The idle GPU: no workload, and no power figure it did not measure.
    assert_eq!(find("DCGM_FI_DEV_GPU_UTIL", "1")["labels"]["workload"], "");
    assert!(
        !samples
            .iter()
            .any(|s| s["name"] == "DCGM_FI_DEV_POWER_USAGE" && s["labels"]["gpu"] == "1")
    );
    assert_eq!(
        samples
            .iter()
            .find(|s| s["name"] == "berth_agent_workload_running")
            .map(|s| &s["labels"]["workload"]),
        Some(&Value::from("detector"))
    );
}
