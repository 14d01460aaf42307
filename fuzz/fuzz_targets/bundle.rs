//! Bundle admission on any bytes: see `berth_runtime::testing::fuzz::bundle`.
//!
//! ```text
//! cargo +nightly fuzz run bundle fuzz/corpus/bundle
//! ```

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| berth_runtime::testing::fuzz::bundle(data));
