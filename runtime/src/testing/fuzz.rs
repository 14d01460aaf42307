//! The properties the runtime's fuzz targets check, one function per target, so that the
//! same check runs under libFuzzer (`fuzz/fuzz_targets/`, nightly) and over the kept corpus
//! in the ordinary test suite (`tests/fuzz_corpus.rs`, stable): an input that once crashed a
//! target is a file in `fuzz/corpus/<target>/` and stays a regression test.

use crate::agent::cache::Cache;
use crate::agent::{Agent, Config, api};
use crate::backends::edge::bundle::{self, SignedBundle};
use ed25519_dalek::{Signature, SigningKey};
use std::path::Path;
use std::sync::OnceLock;

/// The language server's framing reader (`berth lsp`'s stdin): any bytes must be read
/// without panicking or allocating what a `Content-Length` declares before it arrives, every
/// message found must be whole, and every answer to a bad one must be a JSON-RPC error
/// (`-32700` or `-32600`) with an `id` that is `null`, a number or a string.
pub fn lsp_framing(data: &[u8]) {
    let (messages, replies) = crate::lsp::read_frames(data);
    // A message takes at least `Content-Length:2\n\n{}` of the input.
    assert!(messages.len() <= data.len() / 20 + 1);
    for r in &replies {
        let code = r["error"]["code"].as_i64();
        assert!(matches!(code, Some(-32700 | -32600)), "{r}");
        assert!(
            r["id"].is_null() || r["id"].is_i64() || r["id"].is_string(),
            "{r}"
        );
        assert!(r["error"]["message"].is_string(), "{r}");
    }
}

/// The agent's HTTP API: any bytes, sent as one connection to the API exactly as the
/// agent serves it (hyper's HTTP/1.1 server with the agent's limits, then its router), must be
/// answered or closed without a panic, and no answer may carry the token.
pub fn agent_http(data: &[u8]) {
    let world = world();
    let response = world
        .runtime
        .block_on(api::respond_to_bytes(world.router.clone(), data));
    let text = String::from_utf8_lossy(&response);
    assert!(!text.contains(TOKEN), "the token was echoed");
}

const TOKEN: &str = "fuzz-token-0b7e";

struct World {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    _state: tempfile::TempDir,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let state = tempfile::tempdir().expect("temp dir");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let agent = Agent::open(Config::minimal(state.path().to_path_buf())).expect("agent");
        let router = api::router(agent, TOKEN.to_string());
        World {
            runtime,
            router,
            _state: state,
        }
    })
}

/// Bundle admission: any bytes, read as a published bundle the way the agent reads one
/// (`SignedBundle::verify` with the trusted key, then `admissible`), must be refused or
/// accepted without a panic; accepted only when the signature verifies over the exact payload;
/// and every artifact digest of an accepted bundle names a file inside the model cache.
///
/// The trusted key is fixed (the seed `[7; 32]`), so that seeds signed with it exercise the
/// accepting paths.
pub fn bundle(data: &[u8]) {
    let trusted = SigningKey::from_bytes(&[7; 32]).verifying_key();
    let Ok((signed, offered)) = SignedBundle::verify(data, &trusted) else {
        return;
    };
    // Accepted: the signature must verify, independently, over the payload as published.
    let hex = signed
        .signature
        .strip_prefix("ed25519:")
        .expect("an accepted bundle is ed25519-signed");
    let raw: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    let signature = Signature::from_slice(&raw).expect("64 bytes");
    trusted
        .verify_strict(signed.payload.as_bytes(), &signature)
        .expect("accepted without a valid signature");
    let _ = bundle::admissible(&offered, None, Some("site"));
    // Artifact digests: a cached file is always `sha256/` + 64 lowercase hex digits.
    let dir = Path::new("/nonexistent/cache");
    let cache = Cache::new(dir.to_path_buf(), 0, reqwest::Client::new());
    for w in &offered.workloads {
        let Some(digest) = w.variant.as_ref().and_then(|v| v.digest.as_deref()) else {
            continue;
        };
        if let Some(path) = cache.path_of(digest) {
            let name = path
                .strip_prefix(dir.join("sha256"))
                .expect("inside the cache");
            let name = name.to_str().expect("UTF-8");
            assert!(
                name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                "{digest} -> {name}"
            );
        }
    }
}
