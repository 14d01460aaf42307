//! Replays the kept corpus of every fuzz target (`fuzz/corpus/<target>/`) through the
//! property the target checks (`berth_compiler::testing::fuzz`,
//! `berth_runtime::testing::fuzz`), on stable, in every test run: an input that once crashed
//! a target is a file there and stays a regression test.

use std::path::{Path, PathBuf};

use berth_compiler::testing::fuzz as compiler;
use berth_runtime::testing::fuzz as runtime;

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
}

fn replay(target: &str, property: fn(&[u8])) {
    for file in corpus(target) {
        let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        // The file's name says which input broke, should one do.
        eprintln!("{}", file.display());
        property(&data);
    }
}

#[test]
fn parse() {
    replay("parse", compiler::parse);
}

#[test]
fn format() {
    replay("format", compiler::format);
}

#[test]
fn check() {
    replay("check", compiler::check);
}

#[test]
fn spec_roundtrip() {
    replay("spec_roundtrip", compiler::spec_roundtrip);
}

#[test]
fn plan_json() {
    replay("plan_json", compiler::plan_json);
}

#[test]
fn lsp_framing() {
    replay("lsp_framing", runtime::lsp_framing);
}

#[test]
fn agent_http() {
    replay("agent_http", runtime::agent_http);
}

#[test]
fn bundle() {
    replay("bundle", runtime::bundle);
}
