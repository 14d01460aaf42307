//! The fleet analysis, driven by data: every `data/analysis/*.berth` file is one spec checked
//! as `berth check` checks it; its first line `// warnings: W0701 W0706` (or `none`) lists the
//! codes it reports, in order, and its diagnostics are snapshotted. Every `W07xx` code has a
//! documentation example `data/analysis/doc/W07xx.berth` reporting it and nothing else, and
//! every code of the registry has its section in `docs/diagnostics.md`.

mod neutral;

use berth_compiler::diagnostics::{Code, Diagnostic};
use berth_compiler::driver;
use berth_compiler::source::SourceMap;
use std::path::{Path, PathBuf};

fn data(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/analysis")
        .join(dir)
}

/// `berth check` on one file named `name`.
fn check(name: &str, text: &str) -> (SourceMap, Vec<Diagnostic>) {
    let mut map = SourceMap::new();
    map.add(name.to_string(), text.to_string());
    let out = driver::check(&map);
    (map, out.diagnostics)
}

fn read(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (name, std::fs::read_to_string(path).unwrap_or_default())
}

#[test]
fn fleet_findings_match_their_files() {
    insta::glob!("data/analysis/*.berth", |path| {
        let (name, text) = read(path);
        let expected: Vec<&str> = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// warnings: "))
            .map(|codes| codes.split_whitespace().filter(|c| *c != "none").collect())
            .unwrap_or_else(|| panic!("{name}: no `// warnings:` line"));
        let (map, diags) = check(&name, &text);
        let rendered = neutral::render(&map, &diags);
        assert!(
            diags.iter().all(|d| !d.is_error()),
            "{name} has errors:\n{rendered}"
        );
        let codes: Vec<&str> = diags.iter().map(|d| d.code.as_str()).collect();
        assert_eq!(codes, expected, "{name}:\n{rendered}");
        insta::assert_snapshot!(rendered);
    });
}

/// The documentation examples of the fleet analysis report their code and nothing else.
#[test]
fn documented_examples_report_their_code() {
    for code in Code::ALL.iter().filter(|c| c.as_str().starts_with("W07")) {
        let c = code.as_str();
        let path = data("doc").join(format!("{c}.berth"));
        assert!(path.exists(), "no documentation example for {c}");
        let (map, diags) = check("example.berth", &read(&path).1);
        assert!(!diags.is_empty(), "{c} example reports nothing");
        for d in &diags {
            assert_eq!(
                d.code,
                *code,
                "{c} example:\n{}",
                neutral::render(&map, &diags)
            );
            assert!(!d.is_error(), "{c} is a warning");
        }
    }
}

/// Each `W07xx` section of `docs/diagnostics.md` shows its example file and the very output
/// the example gives.
#[test]
fn the_docs_show_what_the_examples_report() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/diagnostics.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    for code in Code::ALL.iter().filter(|c| c.as_str().starts_with("W07")) {
        let c = code.as_str();
        let section = doc
            .split(&format!("\n## {c}: "))
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .unwrap_or_else(|| panic!("no section for {c}"));
        let block = |fence: &str| {
            section
                .split(fence)
                .nth(1)
                .and_then(|b| b.split("\n```").next())
                .unwrap_or_else(|| panic!("{c}: no {fence} block"))
                .to_string()
        };
        let example = read(&data("doc").join(format!("{c}.berth"))).1;
        assert_eq!(block("```berth\n"), example.trim_end(), "{c}: the example");
        let (map, diags) = check("example.berth", &example);
        assert_eq!(
            block("```text\n"),
            neutral::documented(&map, &diags).trim_end(),
            "{c}: the output"
        );
    }
}

/// Prints the fleet analysis's documentation examples in the neutral form of
/// `docs/diagnostics.md` (`cargo test --test analysis print_documented_examples -- --ignored
/// --nocapture`).
#[test]
#[ignore]
fn print_documented_examples() {
    for code in Code::ALL.iter().filter(|c| c.as_str().starts_with("W07")) {
        let path = data("doc").join(format!("{}.berth", code.as_str()));
        let (map, diags) = check("example.berth", &read(&path).1);
        println!("@@ {}", code.as_str());
        print!("{}", neutral::documented(&map, &diags));
    }
}

/// `docs/diagnostics.md` has a section `## CODE: title` for every code, in registry order.
#[test]
fn every_code_has_its_section_in_the_docs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/diagnostics.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let headings: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter(|h| {
            let b = h.as_bytes();
            b.len() > 5 && (b[0] == b'E' || b[0] == b'W') && b[1..5].iter().all(u8::is_ascii_digit)
        })
        .collect();
    let expected: Vec<String> = Code::ALL
        .iter()
        .map(|c| format!("{}: {}", c.as_str(), c.title()))
        .collect();
    assert_eq!(headings, expected, "docs/diagnostics.md");
}

/// The curated examples are free of fleet warnings.
#[test]
fn examples_have_no_fleet_warnings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no examples");
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "berth"))
            .collect();
        files.sort();
        let mut map = SourceMap::new();
        for f in &files {
            let (name, text) = read(f);
            map.add(name, text);
        }
        let diags = driver::check(&map).diagnostics;
        assert!(
            diags.is_empty(),
            "{}:\n{}",
            dir.display(),
            neutral::render(&map, &diags)
        );
    }
}

/// The same spec gives the same findings, in the same order, every time (the per-workload
/// findings run in parallel).
#[test]
fn findings_are_deterministic() {
    for path in std::fs::read_dir(data("")).into_iter().flatten().flatten() {
        let path = path.path();
        if path.extension().is_none_or(|x| x != "berth") {
            continue;
        }
        let (name, text) = read(&path);
        let first = check(&name, &text).1;
        for _ in 0..3 {
            assert_eq!(check(&name, &text).1, first, "{name}");
        }
    }
}
