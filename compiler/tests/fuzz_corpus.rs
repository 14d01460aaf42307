//! Replays the kept fuzz corpora (`fuzz/corpus/<target>/`) through the properties the fuzz
//! targets check (`berth_compiler::testing::fuzz`), on stable, in every test run: an input
//! that once crashed a target is a file there and stays a regression test. The runtime's
//! targets are replayed by `tests/fuzz_corpus.rs`.

use std::path::{Path, PathBuf};

use berth_compiler::testing::fuzz;

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
    replay("parse", fuzz::parse);
}

#[test]
fn spec_roundtrip() {
    replay("spec_roundtrip", fuzz::spec_roundtrip);
}

#[test]
fn format() {
    replay("format", fuzz::format);
}

#[test]
fn check() {
    replay("check", fuzz::check);
}

#[test]
fn plan_json() {
    replay("plan_json", fuzz::plan_json);
}
