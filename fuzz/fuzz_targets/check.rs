//! `berth check` and `berth plan` through the driver on any UTF-8: see `berth_compiler::testing::fuzz::check`.
//!
//! ```text
//! cargo +nightly fuzz run check fuzz/corpus/check
//! ```

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| berth_compiler::testing::fuzz::check(data));
