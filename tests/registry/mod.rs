//! A real OCI registry for the tests: Debian's `docker-registry` (the CNCF distribution
//! registry) on loopback with TLS and htpasswd auth, and pushes with the ORAS project's
//! `oci-client`; a fault proxy (`tests/fault_proxy`) in front of it, for what the real
//! registry never does on its own (a blob whose bytes lie about their digest).

#![allow(dead_code)]

#[path = "../fault_proxy/mod.rs"]
pub mod fault_proxy;

use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::Digest;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const USER: &str = "berth-bot";
pub const PASSWORD: &str = "registry-password-do-not-print";

pub struct Registry {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
    pub ca: PathBuf,
}

impl Registry {
    /// Starts Debian's `docker-registry` (`.ci/run` installs it) with TLS and htpasswd auth.
    pub fn start() -> Registry {
        let binary = Path::new("/usr/bin/docker-registry");
        assert!(
            binary.exists(),
            "these tests need Debian's `docker-registry` (apt-get install docker-registry)"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let (ca, cert, key) = super::test_tls::tls_files(dir.path());
        let path = |name: &str| dir.path().join(name);
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
                cert = cert.display(),
                key = key.display(),
                htpasswd = path("htpasswd").display(),
            ),
        )
        .expect("write config");
        let mut registry = Registry {
            ca,
            dir,
            port,
            child: None,
        };
        registry.run();
        registry
    }

    pub fn run(&mut self) {
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

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A fault proxy in front of the registry on a new loopback port, serving TLS with the
    /// registry's own certificate (so the registry's CA is trusted for both). It forwards
    /// everything (credentials included) until a fault is injected.
    pub fn proxy(&self) -> fault_proxy::FaultProxy {
        static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
        let rt = RT.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime")
        });
        fault_proxy::FaultProxy::forward_to(
            rt,
            format!("https://{}", self.host()),
            &std::fs::read(&self.ca).expect("ca"),
            &self.dir.path().join("cert.pem"),
            &self.dir.path().join("key.pem"),
        )
    }

    pub fn client(&self) -> Client {
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
    pub fn push(
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

impl Registry {
    /// The artifact of the pull benchmarks: one `model.bin` layer of `BERTH_BENCH_BYTES`
    /// (1 GiB unless set) at `models/bench:1`; its size and manifest digest.
    pub fn push_bench(&self, rt: &tokio::runtime::Runtime) -> (usize, String) {
        let size: usize = std::env::var("BERTH_BENCH_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1 << 30);
        let model: Vec<u8> = (0..size)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(9))
            .collect();
        (
            size,
            self.push(rt, "models/bench", "1", &[("model.bin", model)]),
        )
    }
}

/// One run of a pull benchmark: `model` (the pulled `model.bin`) has the `size` pushed; the
/// rate printed.
pub fn bench_run(run: u32, model: &Path, size: usize, elapsed: Duration) {
    assert_eq!(std::fs::metadata(model).expect("model").len(), size as u64);
    eprintln!(
        "run {run}: {size} bytes in {elapsed:?}: {:.0} MB/s",
        size as f64 / elapsed.as_secs_f64() / 1e6
    );
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Docker `config.json` credentials for `registry`.
pub fn good_auth(registry: &Registry) -> String {
    auth_for(&registry.host())
}

/// Docker `config.json` credentials for the registry as `host` (`HOST:PORT`) serves it:
/// itself, or a proxy in front of it.
pub fn auth_for(host: &str) -> String {
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    format!(r#"{{"auths":{{"{host}":{{"auth":"{token}"}}}}}}"#)
}
