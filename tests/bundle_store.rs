//! Publishing edge bundles is a compare-and-swap on the store: several real `berth apply`
//! processes publishing the same targets at once into a directory each get a generation of
//! their own (an advisory lock around read, write and rename); against a real WebDAV server,
//! Apache httpd with mod_dav, the first bundle is created with `If-None-Match: *` and a
//! publisher overtaken between its read and its write is refused (412 on its `If-Match`),
//! reads again and publishes the next generation.

mod isolated;
mod webdav;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const RUNS: u64 = 5;

fn key(dir: &Path) -> PathBuf {
    let prefix = dir.join("cp");
    let status = isolated::berth()
        .args(["keys", "generate"])
        .arg(&prefix)
        .status()
        .expect("keys");
    assert!(status.success());
    prefix.with_extension("key")
}

/// Runs `RUNS` publishers at once into `store`; the generations each target got, per run.
fn race(store: &str, key: &Path) -> BTreeMap<String, Vec<u64>> {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/edge-fleet");
    let children: Vec<_> = (0..RUNS)
        .map(|_| {
            isolated::berth()
                .args(["apply", "--bundles", store, "--key"])
                .arg(key)
                .arg(&spec)
                .env("NO_COLOR", "1")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run berth")
        })
        .collect();
    let mut generations: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        for line in err.lines() {
            // target `rig_alpha`: bundle generation 3 published to …
            let Some(rest) = line.strip_prefix("target `") else {
                continue;
            };
            let Some((target, rest)) = rest.split_once("`: bundle generation ") else {
                continue;
            };
            let generation: u64 = rest
                .split_whitespace()
                .next()
                .and_then(|g| g.parse().ok())
                .expect("generation");
            generations
                .entry(target.to_string())
                .or_default()
                .push(generation);
        }
    }
    assert!(!generations.is_empty(), "nothing published");
    generations
}

fn published_generation(bytes: &[u8]) -> u64 {
    let signed: serde_json::Value = serde_json::from_slice(bytes).expect("signed bundle");
    let payload: serde_json::Value =
        serde_json::from_str(signed["payload"].as_str().expect("payload")).expect("bundle");
    payload["generation"].as_u64().expect("generation")
}

fn assert_each_run_got_its_own(generations: &BTreeMap<String, Vec<u64>>) {
    for (target, got) in generations {
        let distinct: BTreeSet<u64> = got.iter().copied().collect();
        assert_eq!(
            distinct,
            (1..=RUNS).collect(),
            "`{target}`: two runs published the same generation, or one was lost: {got:?}"
        );
    }
}

#[test]
fn racing_publishers_into_a_directory_never_share_a_generation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = key(dir.path());
    let store = dir.path().join("bundles");
    let generations = race(&store.display().to_string(), &key);
    assert_each_run_got_its_own(&generations);
    for target in generations.keys() {
        let bytes = std::fs::read(store.join(format!("{target}.bundle.json"))).expect("bundle");
        assert_eq!(published_generation(&bytes), RUNS);
    }
}

/// Against a real WebDAV server: the first bundle is created with `If-None-Match: *`; a
/// publisher whose read is overtaken by another's write (interposed between its GET and its
/// PUT) has its `If-Match` PUT refused with 412 by the server, reads again and publishes the
/// generation after the other's. (Apache checks the precondition and writes without a lock
/// between: simultaneous PUTs can both pass there, so racing processes are tested on the
/// directory store; docs/agent.md says which stores compare and swap atomically.)
#[test]
fn a_publisher_overtaken_on_webdav_reads_again_and_publishes_the_next_generation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = key(dir.path());
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/edge-fleet");
    let apply = |store: &str| {
        let out = isolated::berth()
            .args(["apply", "--bundles", store, "--key"])
            .arg(&key)
            .arg(&spec)
            .env("NO_COLOR", "1")
            .output()
            .expect("run berth");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    let server = webdav::WebDav::start();
    let err = apply(&server.url());
    assert!(
        err.contains("target `rig_alpha`: bundle generation 1 published"),
        "{err}"
    );
    // Another publisher's genuine generation 2, made elsewhere.
    let elsewhere = dir.path().join("elsewhere");
    apply(&elsewhere.display().to_string());
    apply(&elsewhere.display().to_string());
    let other = std::fs::read(elsewhere.join("rig_alpha.bundle.json")).expect("bundle");
    assert_eq!(published_generation(&other), 2);

    let proxy = webdav::Interposer::start(&server, "/rig_alpha.bundle.json", other);
    let err = apply(&proxy.url());
    assert!(
        err.contains("target `rig_alpha`: bundle generation 3 published"),
        "{err}"
    );
    let bytes = std::fs::read(server.file("rig_alpha.bundle.json")).expect("bundle");
    assert_eq!(published_generation(&bytes), 3);
    let log = server.access_log();
    let puts: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("PUT /rig_alpha.bundle.json"))
        .collect();
    assert!(puts[0].ends_with(" 201"), "created first: {puts:?}");
    assert!(
        puts.iter().any(|l| l.ends_with(" 412")),
        "the overtaken PUT was refused by the server: {puts:?}"
    );
    assert!(puts.last().is_some_and(|l| l.ends_with(" 204")), "{puts:?}");
}
