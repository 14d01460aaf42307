//! A saved plan as `berth verify` reads and verifies it: see
//! `berth_compiler::testing::fuzz::plan_json`.
//!
//! ```text
//! cargo +nightly fuzz run plan_json fuzz/corpus/plan_json
//! ```

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| berth_compiler::testing::fuzz::plan_json(data));
