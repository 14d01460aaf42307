//! `berth fetch`, the program the staging Job and init container berth renders on Kubernetes
//! run, as a real process against a real OCI registry (Debian's `docker-registry` with TLS
//! and htpasswd): the artifact lands verified in `DIR/HEX/` with its marker, credentials come
//! from a mounted Secret's files and are never printed, `--check` holds until the marker names
//! the digest, and a wrong digest, or a layer whose bytes lie about their digest (a fault
//! proxy in front of the registry), stages nothing.

mod isolated;
mod registry;
mod test_tls;

use registry::fault_proxy::{Fault, FaultKind};
use registry::{PASSWORD, Registry, auth_for, good_auth};
use std::path::Path;

fn berth(args: &[&str]) -> (i32, String, String) {
    let out = isolated::berth().args(args).output().expect("run berth");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `berth fetch URI --digest D --into DIR --registry-secret-dir SECRET` and `extra`.
fn fetch(
    uri: &str,
    digest: &str,
    into: &str,
    secret: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let mut args = vec![
        "fetch",
        uri,
        "--digest",
        digest,
        "--into",
        into,
        "--registry-secret-dir",
        secret,
    ];
    args.extend_from_slice(extra);
    berth(&args)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A Kubernetes Secret of type `kubernetes.io/dockerconfigjson` plus `ca.crt`, as its volume
/// mount shows it: one file per key.
fn secret_dir(registry: &Registry, dir: &Path) -> String {
    std::fs::create_dir_all(dir).expect("dir");
    std::fs::write(dir.join(".dockerconfigjson"), good_auth(registry)).expect("auth");
    std::fs::copy(&registry.ca, dir.join("ca.crt")).expect("ca");
    dir.display().to_string()
}

#[test]
fn an_artifact_is_staged_verified_with_its_marker_and_checked() {
    let rt = rt();
    let registry = Registry::start();
    let weights: Vec<u8> = (0..(2u32 << 20)).map(|i| (i % 251) as u8).collect();
    let digest = registry.push(
        &rt,
        "models/detector",
        "3.2.0",
        &[
            ("model.onnx", weights.clone()),
            ("labels.txt", b"ok\ndefect\n".to_vec()),
        ],
    );
    let work = tempfile::tempdir().expect("temp dir");
    let secret = secret_dir(&registry, &work.path().join("secret"));
    let into = work.path().join("models");
    let into_arg = into.display().to_string();
    let uri = format!("oci://{}/models/detector:3.2.0", registry.host());

    // The init container's check, before anything is staged: it fails, naming the digest.
    let (code, _, err) = berth(&["fetch", "--check", "--digest", &digest, "--into", &into_arg]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("no artifact of digest `{digest}`")),
        "{err}"
    );

    // The Job's fetch: verified into DIR/HEX with the marker; the JSON names what happened.
    let (code, out, err) = fetch(&uri, &digest, &into_arg, &secret, &["--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let hex = digest.strip_prefix("sha256:").expect("digest");
    let staged = into.join(hex);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["fetched"], true);
    assert_eq!(doc["path"], staged.display().to_string());
    assert_eq!(doc["bytes"], weights.len() as u64 + 10);
    assert_eq!(
        std::fs::read(staged.join("model.onnx")).expect("model"),
        weights
    );
    assert_eq!(
        std::fs::read_to_string(staged.join(".berth-digest")).expect("marker"),
        format!("{digest}\n")
    );
    assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD));

    // A second run (the Job retried, or a re-apply) fetches nothing.
    let (code, _, err) = fetch(&uri, &digest, &into_arg, &secret, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("already staged"), "{err}");

    // The init container's check passes now, and fails for another digest.
    let (code, _, err) = berth(&["fetch", "--check", "--digest", &digest, "--into", &into_arg]);
    assert_eq!(code, 0, "{err}");
    let other = format!("sha256:{}", "a".repeat(64));
    let (code, _, err) = berth(&[
        "fetch", "--check", "--digest", &other, "--into", &into_arg, "--wait", "0.3",
    ]);
    assert_eq!(code, 1, "{err}");
}

/// A digest the registry has no manifest for is an error of the environment (exit 2: the
/// artifact may not be pushed yet); bytes that do not match the digest are refused (exit 1).
/// Either way nothing is staged and the check keeps failing.
#[test]
fn a_wrong_digest_stages_nothing() {
    let rt = rt();
    let registry = Registry::start();
    registry.push(
        &rt,
        "models/detector",
        "3.2.0",
        &[("model.onnx", vec![7; 4096])],
    );
    let work = tempfile::tempdir().expect("temp dir");
    let secret = secret_dir(&registry, &work.path().join("secret"));
    let into = work.path().join("models");
    let into_arg = into.display().to_string();
    let wrong = format!("sha256:{}", "b".repeat(64));
    let uri = format!("oci://{}/models/detector:3.2.0", registry.host());
    let (code, _, err) = fetch(&uri, &wrong, &into_arg, &secret, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("manifest unknown"), "{err}");
    let file = work.path().join("weights.bin");
    std::fs::write(&file, b"not the pinned weights").expect("write");
    let (code, _, err) = berth(&[
        "fetch",
        &file.display().to_string(),
        "--digest",
        &wrong,
        "--into",
        &into_arg,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing was staged"), "{err}");
    assert!(!into.join(&wrong[7..]).exists());
    let (code, _, _) = berth(&["fetch", "--check", "--digest", &wrong, "--into", &into_arg]);
    assert_eq!(code, 1);
}

/// The registry serves the true manifest, but a fault proxy in front of it flips a byte of
/// the model's layer as it streams: `berth fetch` exits 1 naming the layer's digest, and
/// `--into` holds no `HEX/` directory, no marker and nothing half assembled; the check keeps
/// failing. Through the registry itself the same fetch stages it.
#[test]
fn a_layer_whose_bytes_lie_through_a_proxy_stages_nothing() {
    let rt = rt();
    let registry = Registry::start();
    let proxy = registry.proxy();
    let weights: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 239) as u8).collect();
    let digest = registry.push(
        &rt,
        "models/detector",
        "4.0.0",
        &[
            ("labels.txt", b"ok\ndefect\n".to_vec()),
            ("model.onnx", weights.clone()),
        ],
    );
    let layer = format!(
        "sha256:{}",
        berth_compiler::plan::hex(&<sha2::Sha256 as sha2::Digest>::digest(&weights))
    );
    proxy.inject(Fault {
        method: Some("GET"),
        path: Some(format!("/blobs/{layer}")),
        kind: FaultKind::Corrupt { at: 4096 },
        times: u32::MAX,
        after_writes: 0,
    });
    let work = tempfile::tempdir().expect("temp dir");
    let secret = work.path().join("secret");
    std::fs::create_dir_all(&secret).expect("dir");
    std::fs::write(secret.join(".dockerconfigjson"), auth_for(&proxy.host())).expect("auth");
    std::fs::copy(&registry.ca, secret.join("ca.crt")).expect("ca");
    let secret = secret.display().to_string();
    let into = work.path().join("models");
    let into_arg = into.display().to_string();
    let uri = format!("oci://{}/models/detector:4.0.0", proxy.host());
    let (code, _, err) = fetch(&uri, &digest, &into_arg, &secret, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&layer),
        "the error names the layer's digest: {err}"
    );
    assert!(err.contains("nothing was staged"), "{err}");
    assert!(
        proxy.log().iter().any(|r| r.contains(&layer)),
        "the blob went through the proxy: {:?}",
        proxy.log()
    );
    let hex = &digest[7..];
    assert!(!into.join(hex).exists(), "no staged directory");
    let mut left = Vec::new();
    let mut stack = vec![into.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == ".berth-digest" || name.contains(hex) || name.ends_with(".part") {
                left.push(path.display().to_string());
            }
        }
    }
    assert_eq!(left, Vec::<String>::new(), "no marker, no partial artifact");
    let (code, _, _) = berth(&["fetch", "--check", "--digest", &digest, "--into", &into_arg]);
    assert_eq!(code, 1);

    // The honest path: the registry itself.
    let direct = work.path().join("direct");
    let direct_secret = secret_dir(&registry, &direct);
    let uri = format!("oci://{}/models/detector:4.0.0", registry.host());
    let (code, _, err) = fetch(&uri, &digest, &into_arg, &direct_secret, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(into.join(hex).join("model.onnx")).expect("model"),
        weights
    );
}

#[test]
fn without_the_secret_the_registry_refuses_and_a_bad_digest_is_a_usage_error() {
    let rt = rt();
    let registry = Registry::start();
    let digest = registry.push(
        &rt,
        "models/detector",
        "3.2.0",
        &[("model.onnx", vec![1; 64])],
    );
    let work = tempfile::tempdir().expect("temp dir");
    let ca_only = work.path().join("ca-only");
    std::fs::create_dir_all(&ca_only).expect("dir");
    std::fs::copy(&registry.ca, ca_only.join("ca.crt")).expect("ca");
    let into = work.path().join("models").display().to_string();
    let uri = format!("oci://{}/models/detector:3.2.0", registry.host());
    let (code, _, err) = fetch(&uri, &digest, &into, &ca_only.display().to_string(), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.to_lowercase().contains("not authorized"), "{err}");
    assert!(err.contains("a rerun resumes"), "{err}");
    let (code, _, err) = berth(&["fetch", &uri, "--digest", "sha256:12", "--into", &into]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is not `sha256:` and 64 lowercase hex digits"),
        "{err}"
    );
}

/// Pull throughput through the command line: `berth fetch oci://…` as a process against the
/// loopback registry (TLS, htpasswd), the manifest by digest, the layer streamed, SHA-256
/// verified while it streams, renamed into `DIR/HEX/` with its marker. With TMPDIR on tmpfs
/// the registry's storage and the staging directory are both in memory; the time includes
/// the process's start.
/// `TMPDIR=/dev/shm cargo test --release -p berth-runtime --test fetch bench_ -- --ignored --nocapture`
#[test]
#[ignore = "benchmark: run explicitly"]
fn bench_fetch_throughput() {
    let rt = rt();
    let registry = Registry::start();
    let (size, digest) = registry.push_bench(&rt);
    drop(rt);
    let work = tempfile::tempdir().expect("temp dir");
    let secret = secret_dir(&registry, &work.path().join("secret"));
    let uri = format!("oci://{}/models/bench:1", registry.host());
    for run in 1..=3 {
        let into = work.path().join(format!("models-{run}"));
        let started = std::time::Instant::now();
        let (code, _, err) = fetch(&uri, &digest, &into.display().to_string(), &secret, &[]);
        let elapsed = started.elapsed();
        assert_eq!(code, 0, "{err}");
        let model = into.join(&digest[7..]).join("model.bin");
        registry::bench_run(run, &model, size, elapsed);
        std::fs::remove_dir_all(&into).expect("clean");
    }
}
