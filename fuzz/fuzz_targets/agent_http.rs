//! Fuzzes the agent's HTTP API: any bytes, sent as one connection to the API exactly as the
//! agent serves it (hyper's HTTP/1.1 server with the agent's limits, then its router), must be
//! answered or closed without a panic, and no answer may carry the token.
//!
//! Run from the repository root:
//!
//! ```text
//! cargo +nightly fuzz run agent_http fuzz/corpus/agent_http fuzz/seeds/agent_http
//! ```

#![no_main]

use berth_runtime::agent::{Agent, Config, api};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

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

fuzz_target!(|data: &[u8]| {
    let world = world();
    let response = world
        .runtime
        .block_on(api::respond_to_bytes(world.router.clone(), data));
    let text = String::from_utf8_lossy(&response);
    assert!(!text.contains(TOKEN), "the token was echoed");
});
