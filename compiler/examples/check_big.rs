//! Times `berth check` — [`driver::check_spec`]: parsing (files in parallel), names, types,
//! policy conditions, semantic checks, lowering to the IR and the fleet analysis — and the
//! same without the fleet analysis ([`driver::compile`]), on the generated spec of the
//! front-end benchmark ([`specs::spec_files`](berth_compiler::testing::specs::spec_files)), split over a realistic number of files.
//!
//! `cargo run --release -p berth-compiler --example check_big [LINES [FILES [RUNS]]] [--mistakes]
//! [--write DIR]`
//! (defaults: 100,000 lines in 100 files, best of 10). Prints the parse stage alone, the
//! whole check, the CPU time beside the wall time, and the peak resident memory. With
//! `--mistakes`, the spec has thousands of semantic errors
//! ([`specs::spec_files_with_mistakes`](berth_compiler::testing::specs::spec_files_with_mistakes)): the time to report them.

use berth_compiler::driver;
use berth_compiler::source::SourceMap;
use berth_compiler::testing::specs as testgen;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../benches/support/mod.rs"]
mod support;

fn main() {
    let args = support::numeric_args();
    let lines = args.first().copied().unwrap_or(100_000);
    let files = args.get(1).copied().unwrap_or(100).max(1);
    let runs = args.get(2).copied().unwrap_or(10).max(1);

    let texts = if std::env::args().any(|a| a == "--mistakes") {
        testgen::spec_files_with_mistakes(lines, files)
    } else {
        testgen::spec_files(lines, files)
    };
    // `--write DIR`: the spec's files written to DIR too, for timing `berth check DIR`.
    let write_to = std::env::args()
        .skip_while(|a| a != "--write")
        .nth(1)
        .map(std::path::PathBuf::from);
    let mut map = SourceMap::new();
    for (i, text) in texts.into_iter().enumerate() {
        let name = format!("part_{i:04}.berth");
        if let Some(dir) = &write_to
            && let Err(e) =
                std::fs::create_dir_all(dir).and_then(|()| std::fs::write(dir.join(&name), &text))
        {
            eprintln!("cannot write {}: {e}", dir.display());
            std::process::exit(2);
        }
        map.add(format!("spec/{name}"), text);
    }
    let total_lines: usize = map.files().iter().map(|f| f.line_count()).sum();
    let bytes: usize = map.files().iter().map(|f| f.text.len()).sum();
    let ids = driver::all_files(&map);
    let compiled = driver::check_spec(&map, &ids);
    let workloads = compiled.ir.as_ref().map_or(0, |ir| ir.workloads.len());
    println!(
        "{total_lines} lines, {bytes} bytes in {files} file(s): {} diagnostics, {workloads} workloads",
        compiled.diagnostics.len()
    );
    // The generated spec is meant to be valid (unless `--mistakes`): say what is wrong with it.
    let mut by_code = std::collections::BTreeMap::new();
    for d in &compiled.diagnostics {
        by_code.entry(d.code.as_str()).or_insert((0, &d.message)).0 += 1;
    }
    for (code, (count, first)) in by_code {
        println!("  {count} × {code}, first: {first}");
    }
    drop(compiled);

    let (parse, parse_cpu) = timed(runs, || driver::parse(&map, &ids));
    let (compile, compile_cpu) = timed(runs, || driver::compile(&map));
    let (check, check_cpu) = timed(runs, || driver::check_spec(&map, &ids));
    println!("parse: {parse:.1?} wall (best of {runs}), {parse_cpu:.1?} CPU per run");
    println!(
        "compile (no fleet analysis): {compile:.1?} wall (best of {runs}), {compile_cpu:.1?} CPU per run"
    );
    println!("check: {check:.1?} wall (best of {runs}), {check_cpu:.1?} CPU per run");
    println!("peak memory (VmHWM): {}", support::peak_rss());
}

/// The best wall time of `runs` runs of `f`, and the mean CPU time per run. Freeing the
/// result is left out of the wall time (as in the criterion benchmark: the tree and the IR
/// are what the next stage works on), not out of the CPU time.
fn timed<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let cpu = support::cpu_time();
    let times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let out = black_box(f());
            let elapsed = t.elapsed();
            drop(out);
            elapsed
        })
        .collect();
    (
        support::best(&times),
        (support::cpu_time() - cpu) / runs as u32,
    )
}
