//! Front-end throughput on a generated 100,000-line specification: lexing alone, then lexing
//! and parsing (without and with freeing the tree), then `berth check` without its fleet
//! analysis — parsing, names, types, policy conditions, semantic checks and lowering to the IR
//! ([`driver::compile`]) — on the same spec split over 100 files, as a spec directory is
//! (`examples/check_big.rs` times the whole check, fleet analysis included). Goals: lex+parse
//! at 50 MB/s or more; check in under 400 ms (docs/performance.md).
//!
//! Run with `cargo bench -p berth-compiler --bench frontend`; `examples/check_big.rs` gives
//! the same check figure with CPU time and peak memory.

use berth_compiler::driver;
use berth_compiler::source::{FileId, SourceMap};
use berth_compiler::syntax::{lex, parse_file};
use berth_compiler::testing::specs as testgen;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn frontend(c: &mut Criterion) {
    let text = testgen::spec(100_000);
    let parsed = parse_file(FileId(0), &text);
    assert!(
        parsed.diagnostics.is_empty(),
        "the generated spec must be valid: {:?}",
        parsed.diagnostics.first()
    );

    let mut group = c.benchmark_group("frontend_100k_lines");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(20);
    group.bench_function("lex", |b| b.iter(|| lex(FileId(0), black_box(&text))));
    // The tree is what the next stage works on: freeing it is not part of parsing, so its
    // drop is kept out of the measurement (`lex_parse_drop` includes it).
    group.bench_function("lex_parse", |b| {
        b.iter_with_large_drop(|| parse_file(FileId(0), black_box(&text)))
    });
    group.bench_function("lex_parse_drop", |b| {
        b.iter(|| parse_file(FileId(0), black_box(&text)))
    });
    group.finish();

    let mut spec = SourceMap::new();
    for (i, text) in testgen::spec_files(100_000, 100).into_iter().enumerate() {
        spec.add(format!("spec/part_{i:04}.berth"), text);
    }
    let compiled = driver::compile(&spec);
    assert!(
        compiled.ir.is_some() && compiled.diagnostics.is_empty(),
        "the generated spec must check clean: {:?}",
        compiled.diagnostics.first()
    );
    let bytes: usize = spec.files().iter().map(|f| f.text.len()).sum();
    let mut group = c.benchmark_group("check_100k_lines_100_files");
    group.throughput(Throughput::Bytes(bytes as u64));
    // About 100 ms a check: criterion's fewest samples keep the run to a few seconds.
    group.sample_size(10);
    group.bench_function("check", |b| {
        b.iter_with_large_drop(|| driver::compile(black_box(&spec)))
    });
    group.finish();
}

criterion_group!(benches, frontend);
criterion_main!(benches);
