//! Lexing and parsing any UTF-8: see `berth_compiler::testing::fuzz::parse`.
//!
//! ```text
//! cargo +nightly fuzz run parse fuzz/corpus/parse
//! ```

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| berth_compiler::testing::fuzz::parse(data));
