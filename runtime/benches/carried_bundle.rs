//! Carried bundles (issue 20): `berth bundle export`'s work and `berth agent --import`'s for a
//! bundle whose model is one 1 GiB file.
//!
//! ```text
//! cargo bench -p berth-runtime --bench carried_bundle              # 1024 MiB, in TMPDIR
//! TMPDIR=/dev/shm cargo bench -p berth-runtime --bench carried_bundle -- 256
//! ```
//!
//! Export: the signed bundle and the artifact (a `file://` model, fetched through the agent's
//! cache as the agent would, hashed while it streams) written as an OCI image layout,
//! `index.json` last. Import: an agent (`Agent::import_carried`, what `--import` runs) reads
//! the layout, verifies the signature and the admission rules, copies the model into its
//! cache hashing every byte, and accepts the bundle. Both are fsynced. Prints wall time,
//! throughput and this process's CPU time for each.

mod support;

use berth_compiler::plan::{ArtifactStaging, StagingSource, VariantBinding};
use berth_runtime::agent::oci::Registries;
use berth_runtime::agent::{Agent, Config, Feed};
use berth_runtime::backends::edge::bundle::{
    BUNDLE_FORMAT, Bundle, BundleWorkload, TelemetryContract, keys,
};
use berth_runtime::backends::edge::export;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::time::{Duration, Instant};

fn report(what: &str, bytes: u64, wall: Duration, cpu: Duration) {
    let mb = bytes as f64 / 1e6;
    println!(
        "{what}: {:.2} s = {:.0} MB/s, CPU {:.2} s",
        wall.as_secs_f64(),
        mb / wall.as_secs_f64(),
        cpu.as_secs_f64()
    );
}

fn main() {
    let mib: u64 = support::number_arg(1024);
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    println!("{mib} MiB model in {}", root.display());
    // The model: pseudo-random bytes (not compressible, nothing to shortcut).
    let model = root.join("model.bin");
    let mut hasher = Sha256::new();
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&model).expect("model"));
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut chunk = vec![0u8; 1 << 20];
        for _ in 0..mib {
            for b in chunk.chunks_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                b.copy_from_slice(&state.to_le_bytes()[..b.len()]);
            }
            hasher.update(&chunk);
            out.write_all(&chunk).expect("write");
        }
        out.into_inner().expect("flush").sync_all().expect("sync");
    }
    let digest = format!("sha256:{}", berth_compiler::plan::hex(&hasher.finalize()));
    let bytes = mib << 20;
    let key = keys::generate().expect("randomness");
    let bundle = Bundle {
        format: BUNDLE_FORMAT.into(),
        target: "rig".into(),
        generation: 1,
        plan_id: "sha256:bench".into(),
        workloads: vec![BundleWorkload {
            name: "model".into(),
            release: "1".into(),
            image: "exec:true".into(),
            kind: "service".into(),
            class: "production".into(),
            replicas: 1,
            gpus_per_replica: 0,
            pool: None,
            accelerator: None,
            variant: Some(VariantBinding {
                model: "m".into(),
                version: "1".into(),
                variant: "v".into(),
                artifact: format!("file://{}", model.display()),
                digest: Some(digest),
                staging: ArtifactStaging {
                    from: StagingSource::Source,
                    pull: vec![format!("file://{}", model.display())],
                    bytes: None,
                },
            }),
            data: vec![],
            telemetry: TelemetryContract::Live,
            reclaim: None,
        }],
    };
    let signed = bundle.sign(&key);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let carry = root.join("carry");
    let registries = Registries::new(None, None).expect("registries");
    let (wall, cpu0) = (Instant::now(), support::cpu());
    let exported = rt
        .block_on(export::export(
            &carry,
            &signed,
            &bundle,
            reqwest::Client::new(),
            registries,
        ))
        .expect("export");
    report("export", bytes, wall.elapsed(), support::cpu() - cpu0);
    assert_eq!(exported.artifacts.len(), 1);

    let mut config = Config::minimal(root.join("state"));
    config.cache_budget = bytes * 2;
    config.feed = Feed::Pull {
        source: None,
        import: Some(carry),
        trust: Box::new(key.verifying_key()),
        interval: Duration::from_secs(3600),
    };
    let agent = Agent::open(config).expect("agent");
    let (wall, cpu0) = (Instant::now(), support::cpu());
    rt.block_on(agent.import_carried());
    report("import", bytes, wall.elapsed(), support::cpu() - cpu0);
    let status = rt.block_on(agent.status());
    assert_eq!(status["generation"], 1, "{status}");
    assert_eq!(status["cache"]["bytes"], bytes, "{status}");
}
