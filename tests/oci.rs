//! `oci://` artifacts in the agent's model cache, against a real OCI registry: Debian's
//! `docker-registry` (the CNCF distribution registry) started on loopback with TLS and
//! htpasswd auth, artifacts pushed to it with the ORAS project's `oci-client`, pulled by the
//! agent's cache (`berth_runtime::agent::cache`) as a running agent does; a fault proxy in
//! front of it serves what the registry never would (a blob whose bytes lie).

mod registry;
mod test_tls;

use berth_runtime::agent::cache::{Cache, FetchError};
use berth_runtime::agent::oci::Registries;
use berth_runtime::agent::state::State;
use registry::fault_proxy::{Fault, FaultKind};
use registry::{Registry, USER, auth_for, good_auth};
use sha2::Digest;
use std::time::Instant;

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

/// A manifest whose layer digest lies: the registry serves the true manifest, but a fault
/// proxy in front of it flips one byte of the second layer's blob as it streams (same
/// length, other bytes). The pull is refused naming the layer's digest, the cache holds
/// nothing (not even the first layer, which did verify, nor a part file a later pull could
/// resume from), and a later honest pull, through the same proxy with the fault gone and
/// through the registry itself, gets the whole artifact.
#[test]
fn a_layer_whose_bytes_lie_about_its_digest_is_refused_and_nothing_is_cached() {
    let rt = rt();
    let registry = Registry::start();
    let proxy = registry.proxy();
    let (first, second) = (weights(6, 1 << 20), weights(7, 2 << 20));
    let digest = registry.push(
        &rt,
        "models/liar",
        "1",
        &[("a.bin", first.clone()), ("b.bin", second.clone())],
    );
    let lying = format!(
        "sha256:{}",
        berth_compiler::plan::hex(&sha2::Sha256::digest(&second))
    );
    proxy.inject(Fault {
        method: Some("GET"),
        path: Some(format!("/blobs/{lying}")),
        kind: FaultKind::Corrupt { at: 1 << 20 },
        times: u32::MAX,
        after_writes: 0,
    });
    let a = cache(&registry, Some(&auth_for(&proxy.host())));
    let uri = format!("oci://{}/models/liar:1", proxy.host());
    let err = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
        .expect_err("a lying layer is refused");
    let text = err.to_string();
    match &err {
        FetchError::Mismatch {
            uri: named,
            expected,
            actual,
        } => {
            assert_eq!(expected, &lying, "{text}");
            assert_ne!(actual, &lying, "{text}");
            assert!(named.contains("layer `b.bin`"), "{text}");
        }
        other => panic!("not a mismatch: {other}"),
    }
    assert!(text.contains(&lying), "the error names the digest: {text}");
    assert!(
        proxy.log().iter().any(|r| r.contains(&lying)),
        "the blob went through the proxy: {:?}",
        proxy.log()
    );
    let cache_dir = a.dir.path().join("cache");
    let entries = |kind: &str| -> Vec<String> {
        std::fs::read_dir(cache_dir.join(kind))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(entries("oci"), Vec::<String>::new(), "nothing cached");
    assert_eq!(
        entries("partial"),
        Vec::<String>::new(),
        "nothing half kept"
    );
    assert_eq!(a.cache.usage(&a.state), (0, 0));
    assert!(!a.cache.holds(&uri, &digest));

    // Asked again while the proxy still lies: refused again, never served from what the
    // first attempt left.
    let err = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
        .expect_err("still refused");
    assert!(matches!(err, FetchError::Mismatch { .. }), "{err}");

    // The honest path: the same cache through the proxy without the fault, and another
    // straight from the registry.
    proxy.clear_faults();
    let (dir, fetched) = rt
        .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
        .expect("an honest pull");
    assert!(fetched);
    assert_eq!(std::fs::read(dir.join("a.bin")).expect("a"), first);
    assert_eq!(std::fs::read(dir.join("b.bin")).expect("b"), second);
    let b = cache(&registry, Some(&good_auth(&registry)));
    let direct = format!("oci://{}/models/liar:1", registry.host());
    let (dir, _) = rt
        .block_on(b.cache.ensure(&b.state, &direct, Some(&digest)))
        .expect("straight from the registry");
    assert_eq!(std::fs::read(dir.join("b.bin")).expect("b"), second);
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
    let (size, digest) = registry.push_bench(&rt);
    for run in 1..=3 {
        let a = cache(&registry, Some(&good_auth(&registry)));
        let uri = format!("oci://{}/models/bench:1", registry.host());
        let started = Instant::now();
        let (dir, fetched) = rt
            .block_on(a.cache.ensure(&a.state, &uri, Some(&digest)))
            .expect("pulled");
        let elapsed = started.elapsed();
        assert!(fetched);
        registry::bench_run(run, &dir.join("model.bin"), size, elapsed);
    }
}

/// The agent's cache trusting and holding credentials for every registry of `registries`.
fn cache_for(registries: &[&Registry]) -> Agentish {
    use base64::Engine;
    let dir = tempfile::tempdir().expect("temp dir");
    let token =
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{}", registry::PASSWORD));
    let auths: Vec<String> = registries
        .iter()
        .map(|r| format!(r#""{}":{{"auth":"{token}"}}"#, r.host()))
        .collect();
    let auth_file = dir.path().join("registry-auth.json");
    std::fs::write(
        &auth_file,
        format!(r#"{{"auths":{{{}}}}}"#, auths.join(",")),
    )
    .expect("write");
    let mut roots = Vec::new();
    for r in registries {
        roots.extend(std::fs::read(&r.ca).expect("ca"));
    }
    let oci = Registries::new(Some(&roots), Some(&auth_file)).expect("registries");
    let state = State::open(&dir.path().join("state"), 1000).expect("state");
    let cache =
        Cache::new(dir.path().join("cache"), 1 << 30, reqwest::Client::new()).with_registries(oci);
    Agentish { dir, state, cache }
}

/// A target's registry mirror, as the plan lists it in `staging.pull`: the mirror's copy is
/// tried first, the source after it; a mirror that lacks the artifact or is down is passed
/// over, and with the mirror alone (a disconnected site) nothing else is tried.
#[test]
fn a_mirror_is_tried_before_the_source_and_passed_over_when_it_cannot_serve() {
    let rt = rt();
    let mut origin = Registry::start();
    let mut mirror = Registry::start();
    let layers = [("w.bin", weights(7, 1 << 20))];
    let digest = origin.push(&rt, "vision/det", "3", &layers);
    let artifact = format!("oci://{}/vision/det:3", origin.host());
    let mirrored = berth_compiler::plan::mirror_reference(
        &format!("oci://{}/plant", mirror.host()),
        &artifact,
    )
    .expect("an oci artifact has a mirror form");
    assert_eq!(
        mirrored,
        format!("oci://{}/plant/vision/det:3", mirror.host())
    );
    let sources = [mirrored.clone(), artifact.clone()];

    // The mirror does not hold it yet: the source serves it.
    let a = cache_for(&[&origin, &mirror]);
    let (dir, fetched) = rt
        .block_on(
            a.cache
                .ensure_from(&a.state, &sources, &artifact, Some(&digest)),
        )
        .expect("pulled from the source");
    assert!(fetched);
    assert_eq!(std::fs::read(dir.join("w.bin")).expect("w"), layers[0].1);

    // The plant's mirror is filled (same manifest, same digest) and the source goes down:
    // the mirror serves it.
    let copied = mirror.push(&rt, "plant/vision/det", "3", &layers);
    assert_eq!(copied, digest, "a mirror holds the same manifest");
    origin.stop();
    let b = cache_for(&[&origin, &mirror]);
    let (dir, fetched) = rt
        .block_on(
            b.cache
                .ensure_from(&b.state, &sources, &artifact, Some(&digest)),
        )
        .expect("pulled from the mirror with the source down");
    assert!(fetched);
    assert_eq!(std::fs::read(dir.join("w.bin")).expect("w"), layers[0].1);

    // A disconnected site lists the mirror alone: with it down too, nothing is fetched and
    // nothing half-done is kept as the artifact.
    mirror.stop();
    let c = cache_for(&[&origin, &mirror]);
    let err = rt
        .block_on(c.cache.ensure_from(
            &c.state,
            std::slice::from_ref(&mirrored),
            &artifact,
            Some(&digest),
        ))
        .expect_err("no source can serve it");
    assert!(matches!(err, FetchError::Fetch { .. }), "{err}");
    assert!(!c.dir.path().join("cache/oci").join(&digest[7..]).exists());

    // The mirror back: served again, by digest.
    mirror.run();
    let (dir, _) = rt
        .block_on(c.cache.ensure_from(
            &c.state,
            std::slice::from_ref(&mirrored),
            &artifact,
            Some(&digest),
        ))
        .expect("pulled from the mirror");
    assert_eq!(std::fs::read(dir.join("w.bin")).expect("w"), layers[0].1);
}

/// The bytes an example's `oci://` artifact holds: small, deterministic, one per URI, so the
/// manifest the test registry stores has the digest the example pins.
fn example_weights(uri: &str) -> Vec<u8> {
    format!("berth example model weights: {uri}\n")
        .repeat(64)
        .into_bytes()
}

/// Every `oci://` artifact the examples name is pullable from a real registry by the digest
/// the example pins (the registry standing in as the examples' mirror of
/// `models.example.com`), verified by the agent's cache. A digest that does not match is
/// printed, to be copied into the example.
#[test]
fn the_examples_oci_artifacts_are_pullable_by_their_digests() {
    use berth_runtime::files::{self, FsReader};
    let rt = rt();
    let registry = Registry::start();
    let mirror = format!("oci://{}/examples", registry.host());
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut names: Vec<std::path::PathBuf> = std::fs::read_dir(&examples)
        .expect("examples")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    let mut wrong = Vec::new();
    let mut pulled = 0;
    for dir in names {
        let loaded = files::load(std::slice::from_ref(&dir), &FsReader).expect("load example");
        let sources = files::relative_sources(&dir, &loaded);
        let ir = berth_compiler::driver::compile(&sources)
            .ir
            .expect("the example compiles");
        for model in &ir.models {
            for v in &model.variants {
                let (Some(pinned), true) = (&v.digest, v.artifact.starts_with("oci://")) else {
                    continue;
                };
                let at = berth_compiler::plan::mirror_reference(&mirror, &v.artifact)
                    .expect("mirror form");
                let (repo, tag) = at
                    .strip_prefix(&format!("oci://{}/", registry.host()))
                    .and_then(|r| r.rsplit_once(':'))
                    .expect("repo:tag");
                let file = [("model.bin", example_weights(&v.artifact))];
                let digest = registry.push(&rt, repo, tag, &file);
                if &digest != pinned {
                    wrong.push(format!("{}: {} is {digest}", dir.display(), v.artifact));
                    continue;
                }
                let a = cache(&registry, Some(&good_auth(&registry)));
                let (path, _) = rt
                    .block_on(a.cache.ensure_from(
                        &a.state,
                        std::slice::from_ref(&at),
                        &v.artifact,
                        Some(pinned),
                    ))
                    .expect("pulled and verified");
                assert_eq!(
                    std::fs::read(path.join("model.bin")).expect("model"),
                    file[0].1
                );
                pulled += 1;
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "digests to pin in the examples:\n{}",
        wrong.join("\n")
    );
    assert!(pulled >= 9, "only {pulled} artifacts pulled");
}
