//! `oci://` artifacts in the agent's model cache, against a real OCI registry: Debian's
//! `docker-registry` (the CNCF distribution registry) started on loopback with TLS and
//! htpasswd auth, artifacts pushed to it with the ORAS project's `oci-client`, pulled by the
//! agent's cache (`berth_runtime::agent::cache`) as a running agent does.

use berth_runtime::agent::cache::{Cache, FetchError};
use berth_runtime::agent::oci::Registries;
use berth_runtime::agent::state::State;
use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::Digest;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const USER: &str = "berth-bot";
const PASSWORD: &str = "registry-password-do-not-print";

struct Registry {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
    ca: PathBuf,
}

impl Registry {
    /// Starts Debian's `docker-registry` (`.ci/run` installs it) with TLS and htpasswd auth.
    fn start() -> Registry {
        let binary = Path::new("/usr/bin/docker-registry");
        assert!(
            binary.exists(),
            "these tests need Debian's `docker-registry` (apt-get install docker-registry)"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .expect("params")
            .signed_by(&key, &ca)
            .expect("cert");
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("ca.pem"), ca.pem()).expect("write");
        std::fs::write(path("cert.pem"), cert.pem()).expect("write");
        std::fs::write(path("key.pem"), key.serialize_pem()).expect("write");
        let hash = bcrypt::hash(PASSWORD, 5).expect("bcrypt");
        std::fs::write(path("htpasswd"), format!("{USER}:{hash}\n")).expect("write");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        std::fs::write(
            path("config.yml"),
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {data}\n\
                 http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {cert}\n    key: {key}\n\
                 auth:\n  htpasswd:\n    realm: berth-test\n    path: {htpasswd}\n",
                data = path("data").display(),
                cert = path("cert.pem").display(),
                key = path("key.pem").display(),
                htpasswd = path("htpasswd").display(),
            ),
        )
        .expect("write config");
        let mut registry = Registry {
            ca: path("ca.pem"),
            dir,
            port,
            child: None,
        };
        registry.run();
        registry
    }

    fn run(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("registry.log")).expect("log");
        let child = Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "the registry never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn client(&self) -> Client {
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        Client::new(ClientConfig {
            protocol: ClientProtocol::Https,
            extra_root_certificates: vec![Certificate {
                encoding: CertificateEncoding::Pem,
                data: std::fs::read(&self.ca).expect("ca"),
            }],
            ..ClientConfig::default()
        })
    }

    /// Pushes `files` (name, bytes) as one artifact at `repo:tag`; its manifest digest.
    fn push(
        &self,
        rt: &tokio::runtime::Runtime,
        repo: &str,
        tag: &str,
        files: &[(&str, Vec<u8>)],
    ) -> String {
        let client = self.client();
        let reference: Reference = format!("{}/{repo}:{tag}", self.host())
            .parse()
            .expect("ref");
        let auth = RegistryAuth::Basic(USER.into(), PASSWORD.into());
        let layers: Vec<ImageLayer> = files
            .iter()
            .map(|(name, data)| {
                ImageLayer::new(
                    data.clone(),
                    "application/vnd.berth.model.layer.v1".to_string(),
                    Some(BTreeMap::from([(
                        "org.opencontainers.image.title".to_string(),
                        name.to_string(),
                    )])),
                )
            })
            .collect();
        let config = Config::new(
            b"{}".to_vec(),
            "application/vnd.oci.empty.v1+json".to_string(),
            None,
        );
        rt.block_on(async {
            client
                .push(&reference, &layers, config, &auth, None)
                .await
                .expect("push");
            let (bytes, _) = client
                .pull_manifest_raw(
                    &reference,
                    &auth,
                    &["application/vnd.oci.image.manifest.v1+json"],
                )
                .await
                .expect("manifest");
            format!(
                "sha256:{}",
                berth_compiler::plan::hex(&sha2::Sha256::digest(&bytes))
            )
        })
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Agentish {
    dir: tempfile::TempDir,
    state: State,
    cache: Cache,
}

/// The agent's cache with `auth` (Docker `config.json` text, or none).
fn cache(registry: &Registry, auth: Option<&str>) -> Agentish {
    let dir = tempfile::tempdir().expect("temp dir");
    let auth_file = auth.map(|text| {
        let path = dir.path().join("registry-auth.json");
        std::fs::write(&path, text).expect("write");
        path
    });
    let registries = Registries::new(
        Some(&std::fs::read(&registry.ca).expect("ca")),
        auth_file.as_deref(),
    )
    .expect("registries");
    let state = State::open(&dir.path().join("state"), 1000).expect("state");
    let cache = Cache::new(dir.path().join("cache"), 1 << 30, reqwest::Client::new())
        .with_registries(registries);
    Agentish { dir, state, cache }
}

fn good_auth(registry: &Registry) -> String {
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    format!(
        r#"{{"auths":{{"{}":{{"auth":"{token}"}}}}}}"#,
        registry.host()
    )
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn weights(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn a_multi_layer_artifact_is_pulled_by_its_digest_verified_and_cached() {
    let rt = rt();
    let registry = Registry::start();
    let model = weights(1, 3 << 20);
    let tokenizer = b"{\"vocab\": 32000}".to_vec();
    let digest = registry.push(
        &rt,
        "models/llm",
        "4.2.0",
        &[
            ("model.safetensors", model.clone()),
            ("tokenizer.json", tokenizer.clone()),
        ],
    );
    let a = cache(&registry, Some(&good_auth(&registry)));
    let uri = format!("oci://{}/models/llm:4.2.0", registry.host());
    let (dir, fetched) = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
        .expect("pulled");
    assert!(fetched);
    assert_eq!(
        std::fs::read(dir.join("model.safetensors")).expect("model"),
        model
    );
    assert_eq!(
        std::fs::read(dir.join("tokenizer.json")).expect("tokenizer"),
        tokenizer
    );
    let (again, fetched) = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
        .expect("cached");
    assert_eq!((again, fetched), (dir, false), "never fetched twice");
    assert_eq!(a.cache.usage(&a.state).1, 1);
}

#[test]
fn the_pinned_digest_wins_over_the_tag_and_a_contradiction_is_refused() {
    let rt = rt();
    let registry = Registry::start();
    let old = registry.push(&rt, "models/det", "1", &[("w.bin", weights(2, 1000))]);
    // The tag moves to new content; the bundle still pins the old manifest.
    let new = registry.push(&rt, "models/det", "1", &[("w.bin", weights(3, 1000))]);
    assert_ne!(old, new);
    let a = cache(&registry, Some(&good_auth(&registry)));
    let uri = format!("oci://{}/models/det:1", registry.host());
    let (dir, _) = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(&old)))
        .expect("pulled by digest");
    assert_eq!(
        std::fs::read(dir.join("w.bin")).expect("w"),
        weights(2, 1000)
    );
    let contradiction = format!("oci://{}/models/det@{new}", registry.host());
    let err = rt
        .block_on(a.cache.ensure(&a.state, &contradiction, Some(&old)))
        .expect_err("refused");
    assert!(matches!(err, FetchError::Refused { .. }), "{err}");
    let missing = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    let err = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(missing)))
        .expect_err("no such manifest");
    assert!(matches!(err, FetchError::Fetch { .. }), "{err}");
    assert!(!a.dir.path().join("cache/oci").join(&missing[7..]).exists());
}

#[test]
fn wrong_or_missing_credentials_are_refused_and_never_printed() {
    let rt = rt();
    let registry = Registry::start();
    let digest = registry.push(&rt, "models/x", "1", &[("w.bin", weights(4, 100))]);
    let uri = format!("oci://{}/models/x:1", registry.host());
    for auth in [
        None,
        Some(format!(
            r#"{{"auths":{{"{}":{{"username":"{USER}","password":"wrong-password-do-not-print"}}}}}}"#,
            registry.host()
        )),
    ] {
        let a = cache(&registry, auth.as_deref());
        let err = rt
            .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
            .expect_err("refused");
        let text = err.to_string();
        assert!(matches!(err, FetchError::Fetch { .. }), "{text}");
        assert!(
            text.to_ascii_lowercase().contains("not authorized"),
            "{text}"
        );
        assert!(!text.contains("do-not-print"), "{text}");
    }
}

#[test]
fn a_pull_resumes_after_a_cut_and_a_stopped_registry_leaves_nothing_half_done() {
    let rt = rt();
    let mut registry = Registry::start();
    let model = weights(5, 2 << 20);
    let digest = registry.push(&rt, "models/big", "1", &[("model.bin", model.clone())]);
    let layer = berth_compiler::plan::hex(&sha2::Sha256::digest(&model));
    let a = cache(&registry, Some(&good_auth(&registry)));
    let uri = format!("oci://{}/models/big:1", registry.host());

    registry.stop();
    let err = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
        .expect_err("registry down");
    assert!(matches!(err, FetchError::Fetch { .. }), "{err}");
    assert!(!a.dir.path().join("cache/oci").join(&digest[7..]).exists());

    // What a cut pull leaves: the first megabyte of the layer in its part file. The next
    // pull asks the registry for the rest (a Range request) and checks the whole.
    let work = a
        .dir
        .path()
        .join("cache/partial")
        .join(format!("{}.oci", &digest[7..]));
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::write(work.join(format!(".{layer}.part")), &model[..1 << 20]).expect("write");
    registry.run();
    let (dir, fetched) = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
        .expect("resumed");
    assert!(fetched);
    assert_eq!(std::fs::read(dir.join("model.bin")).expect("model"), model);

    // A part file that does not hash to the layer's digest is refused and thrown away.
    let b = cache(&registry, Some(&good_auth(&registry)));
    let work = b
        .dir
        .path()
        .join("cache/partial")
        .join(format!("{}.oci", &digest[7..]));
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::write(work.join(format!(".{layer}.part")), vec![0u8; 1 << 20]).expect("write");
    let err = rt
        .block_on(b.cache.ensure(&b.state, &uri, Some(&digest)))
        .expect_err("corrupt part");
    assert!(matches!(err, FetchError::Mismatch { .. }), "{err}");
    assert!(!b.dir.path().join("cache/oci").join(&digest[7..]).exists());
    let (dir, _) = rt
        .block_on(b.cache.ensure(&b.state, &uri, Some(&digest)))
        .expect("fetched afresh");
    assert_eq!(std::fs::read(dir.join("model.bin")).expect("model"), model);
}

/// Pull throughput from the loopback registry with digest verification, end to end through
/// the cache (manifest, blob streamed, hashed, written, renamed). With TMPDIR on tmpfs the
/// registry's storage and the cache are both in memory.
/// `TMPDIR=/dev/shm cargo test --release -p berth-runtime --test oci bench_ -- --ignored --nocapture`
#[test]
#[ignore = "benchmark: run explicitly"]
fn bench_pull_throughput() {
    let rt = rt();
    let registry = Registry::start();
    let size: usize = std::env::var("BERTH_BENCH_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 30);
    let model = weights(9, size);
    let digest = registry.push(&rt, "models/bench", "1", &[("model.bin", model)]);
    for run in 1..=3 {
        let a = cache(&registry, Some(&good_auth(&registry)));
        let uri = format!("oci://{}/models/bench:1", registry.host());
        let started = Instant::now();
        let (dir, fetched) = rt
            .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
            .expect("pulled");
        let elapsed = started.elapsed();
        assert!(fetched);
        assert_eq!(
            std::fs::metadata(dir.join("model.bin"))
                .expect("model")
                .len(),
            size as u64
        );
        eprintln!(
            "run {run}: {size} bytes in {elapsed:?}: {:.0} MB/s",
            size as f64 / elapsed.as_secs_f64() / 1e6
        );
    }
}
