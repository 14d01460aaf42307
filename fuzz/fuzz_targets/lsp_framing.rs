//! The language server's framing reader on any bytes: see `berth_runtime::testing::fuzz::lsp_framing`.
//!
//! ```text
//! cargo +nightly fuzz run lsp_framing fuzz/corpus/lsp_framing -- -malloc_limit_mb=256
//! ```

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| berth_runtime::testing::fuzz::lsp_framing(data));
