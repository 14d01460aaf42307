//! Fuzzes bundle admission: any bytes, read as a published bundle the way the agent reads one
//! (`SignedBundle::verify` with the trusted key, then `admissible`), must be refused or
//! accepted without a panic; accepted only when the signature verifies over the exact payload;
//! and every artifact digest of an accepted bundle names a file inside the model cache.
//!
//! The trusted key is fixed (the seed `[7; 32]`), so that seeds signed with it exercise the
//! accepting paths:
//!
//! ```text
//! cargo +nightly fuzz run bundle fuzz/corpus/bundle fuzz/seeds/bundle
//! ```

#![no_main]

use berth_runtime::agent::cache::Cache;
use berth_runtime::backends::edge::bundle::{self, SignedBundle};
use ed25519_dalek::{Signature, SigningKey};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let trusted = SigningKey::from_bytes(&[7; 32]).verifying_key();
    let Ok((signed, offered)) = SignedBundle::verify(data, &trusted) else {
        return;
    };
    // Accepted: the signature must verify, independently, over the payload as published.
    let hex = signed
        .signature
        .strip_prefix("ed25519:")
        .expect("an accepted bundle is ed25519-signed");
    let raw: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    let signature = Signature::from_slice(&raw).expect("64 bytes");
    trusted
        .verify_strict(signed.payload.as_bytes(), &signature)
        .expect("accepted without a valid signature");
    let _ = bundle::admissible(&offered, None, Some("site"));
    // Artifact digests: a cached file is always `sha256/` + 64 lowercase hex digits.
    let dir = Path::new("/nonexistent/cache");
    let cache = Cache::new(dir.to_path_buf(), 0, reqwest::Client::new());
    for w in &offered.workloads {
        let Some(digest) = w.variant.as_ref().and_then(|v| v.digest.as_deref()) else {
            continue;
        };
        if let Some(path) = cache.path_of(digest) {
            let name = path
                .strip_prefix(dir.join("sha256"))
                .expect("inside the cache");
            let name = name.to_str().expect("UTF-8");
            assert!(
                name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                "{digest} -> {name}"
            );
        }
    }
});
