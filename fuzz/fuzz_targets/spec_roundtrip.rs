//! The whole compiler on generated specs: see `berth_compiler::testing::fuzz::spec_roundtrip`.
//!
//! ```text
//! cargo +nightly fuzz run spec_roundtrip fuzz/corpus/spec_roundtrip
//! ```

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| berth_compiler::testing::fuzz::spec_roundtrip(data));
