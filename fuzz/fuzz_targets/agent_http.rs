//! The agent's HTTP API on any bytes: see `berth_runtime::testing::fuzz::agent_http`.
//!
//! ```text
//! cargo +nightly fuzz run agent_http fuzz/corpus/agent_http
//! ```

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| berth_runtime::testing::fuzz::agent_http(data));
