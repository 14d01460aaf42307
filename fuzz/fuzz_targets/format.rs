//! The formatter on any UTF-8: see `berth_compiler::testing::fuzz::format`.
//!
//! ```text
//! cargo +nightly fuzz run format fuzz/corpus/format
//! ```

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| berth_compiler::testing::fuzz::format(data));
