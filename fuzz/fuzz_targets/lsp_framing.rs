//! Fuzzes the language server's framing reader (`berth lsp`'s stdin): any bytes must be read
//! without panicking or allocating what a `Content-Length` declares before it arrives, every
//! message found must be whole, and every answer to a bad one must be a JSON-RPC error
//! (`-32700` or `-32600`) with an `id` that is `null`, a number or a string.
//!
//! Run from the repository root (`-malloc_limit_mb` catches an allocation of a declared
//! length):
//!
//! ```text
//! cargo +nightly fuzz run lsp_framing fuzz/corpus/lsp_framing fuzz/seeds/lsp_framing -- -malloc_limit_mb=256
//! ```

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (messages, replies) = berth_runtime::lsp::read_frames(data);
    // A message takes at least `Content-Length:2\n\n{}` of the input.
    assert!(messages.len() <= data.len() / 20 + 1);
    for r in &replies {
        let code = r["error"]["code"].as_i64();
        assert!(matches!(code, Some(-32700 | -32600)), "{r}");
        assert!(r["id"].is_null() || r["id"].is_i64() || r["id"].is_string(), "{r}");
        assert!(r["error"]["message"].is_string(), "{r}");
    }
});
