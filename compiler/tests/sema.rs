//! Semantics, driven by data: every `data/sema/err/*.berth` file is a mistake class whose
//! diagnostics are snapshotted (code, position, message, labels, help); every
//! `data/sema/ok/*.berth` file and every `examples/*/` directory checks clean and has a
//! snapshot of its IR. A first line `// errors: N` asserts the number of errors.

mod neutral;

use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::ir::Ir;
use berth_compiler::sema::{self, analyze, ir_to_json};
use berth_compiler::source::SourceMap;
use berth_compiler::syntax::{Parsed, parse_file};
use neutral::render;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Parses and analyses `files` (name, text) as one spec.
fn check(files: &[(String, String)]) -> (SourceMap, Vec<Parsed>, Option<Ir>, Vec<Diagnostic>) {
    let mut map = SourceMap::new();
    for (name, text) in files {
        map.add(name.clone(), text.clone());
    }
    let parsed: Vec<Parsed> = map
        .files()
        .iter()
        .map(|f| parse_file(f.id, &f.text))
        .collect();
    let (ir, diags) = analyze(&map, &parsed);
    (map, parsed, ir, diags)
}

fn read(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    (name, text)
}

fn parse_errors(map: &SourceMap, parsed: &[Parsed]) -> String {
    let all: Vec<Diagnostic> = parsed.iter().flat_map(|p| p.diagnostics.clone()).collect();
    render(map, &all)
}

#[test]
fn broken_specs_report_their_mistakes() {
    insta::glob!("data/sema/err/*.berth", |path| {
        let file = read(path);
        let expected_count: Option<usize> = file
            .1
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// errors: "))
            .and_then(|n| n.trim().parse().ok());
        let (map, parsed, ir, diags) = check(&[file]);
        let parse = parse_errors(&map, &parsed);
        assert!(
            parse.is_empty(),
            "{} does not parse:\n{parse}",
            path.display()
        );
        assert!(ir.is_none(), "{} produced an IR", path.display());
        let errors = diags.iter().filter(|d| d.is_error()).count();
        assert!(errors > 0, "{} reported nothing", path.display());
        if let Some(n) = expected_count {
            assert_eq!(errors, n, "{}:\n{}", path.display(), render(&map, &diags));
        }
        insta::assert_snapshot!(render(&map, &diags));
    });
}

#[test]
fn valid_specs_lower_to_ir() {
    insta::glob!("data/sema/ok/*.berth", |path| {
        let (map, parsed, ir, diags) = check(&[read(path)]);
        let parse = parse_errors(&map, &parsed);
        assert!(
            parse.is_empty(),
            "{} does not parse:\n{parse}",
            path.display()
        );
        assert!(
            diags.is_empty(),
            "{}:\n{}",
            path.display(),
            render(&map, &diags)
        );
        let ir = ir.unwrap_or_default();
        insta::assert_snapshot!(ir_to_json(&ir));
    });
}

fn example_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn spec_files(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "berth"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.iter().map(|p| read(p)).collect()
}

#[test]
fn every_example_checks_clean_and_has_an_ir_snapshot() {
    let dirs = example_dirs();
    assert!(!dirs.is_empty(), "no examples found");
    let mut failures = String::new();
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (map, parsed, ir, diags) = check(&spec_files(&dir));
        let parse = parse_errors(&map, &parsed);
        if !parse.is_empty() || !diags.is_empty() {
            let _ = writeln!(failures, "example {name}:\n{parse}{}", render(&map, &diags));
            continue;
        }
        let ir = ir.unwrap_or_default();
        insta::assert_snapshot!(format!("example_{name}"), ir_to_json(&ir));
    }
    assert!(failures.is_empty(), "{failures}");
}

#[test]
fn analysis_is_deterministic() {
    for dir in example_dirs() {
        let files = spec_files(&dir);
        let (_, _, a, da) = check(&files);
        let (_, _, b, db) = check(&files);
        assert_eq!(a.map(|i| ir_to_json(&i)), b.map(|i| ir_to_json(&i)));
        assert_eq!(da, db);
    }
}

#[test]
fn the_standard_library_checks_clean() {
    let cat = sema::catalogue();
    let msgs: Vec<&str> = cat.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert!(msgs.is_empty(), "{msgs:?}");
    assert!(!cat.services.is_empty());
    for s in &cat.services {
        assert!(!s.doc.is_empty(), "service {} has no doc", s.name);
    }
}

/// Vendor datasheet memory of every catalogue accelerator, written here independently of
/// `stdlib/gpu.berth`: a typo in the catalogue fails this test.
#[test]
fn accelerator_memory_matches_vendor_datasheets() {
    const GB: u64 = 1_000_000_000;
    let table: &[(&str, &str, &str, u64)] = &[
        ("H200", "nvidia", "hopper", 141 * GB),
        ("H100", "nvidia", "hopper", 80 * GB),
        ("H100NVL", "nvidia", "hopper", 94 * GB),
        ("A100_80GB", "nvidia", "ampere", 80 * GB),
        ("A100_40GB", "nvidia", "ampere", 40 * GB),
        ("L40S", "nvidia", "ada", 48 * GB),
        ("L4", "nvidia", "ada", 24 * GB),
        ("A10", "nvidia", "ampere", 24 * GB),
        ("T4", "nvidia", "turing", 16 * GB),
        ("JetsonAGXOrin64", "nvidia", "orin", 64 * GB),
        ("JetsonAGXOrin32", "nvidia", "orin", 32 * GB),
        ("JetsonOrinNano", "nvidia", "orin", 8 * GB),
        ("MI300X", "amd", "cdna3", 192 * GB),
        ("Gaudi3", "intel", "gaudi", 128 * GB),
    ];
    let cat = sema::catalogue();
    for (name, vendor, family, memory) in table {
        let acc = cat.accelerators.iter().find(|a| a.name == *name);
        let Some(acc) = acc else {
            panic!("accelerator {name} is missing from std.gpu");
        };
        assert_eq!(acc.memory, *memory, "{name} memory");
        assert_eq!(acc.vendor, *vendor, "{name} vendor");
        assert_eq!(acc.family, *family, "{name} family");
    }
    for acc in &cat.accelerators {
        assert!(
            table.iter().any(|(n, ..)| *n == acc.name),
            "{} is in std.gpu but not in this test's table",
            acc.name
        );
    }
}

/// MIG profiles from NVIDIA's MIG User Guide: (profile, memory in GB, instances per device).
#[test]
fn mig_profiles_match_the_mig_user_guide() {
    let h100 = [
        ("1g.10gb", 10, 7),
        ("1g.20gb", 20, 4),
        ("2g.20gb", 20, 3),
        ("3g.40gb", 40, 2),
        ("4g.40gb", 40, 1),
        ("7g.80gb", 80, 1),
    ];
    let a100_40 = [
        ("1g.5gb", 5, 7),
        ("1g.10gb", 10, 4),
        ("2g.10gb", 10, 3),
        ("3g.20gb", 20, 2),
        ("4g.20gb", 20, 1),
        ("7g.40gb", 40, 1),
    ];
    let h200 = [
        ("1g.18gb", 18, 7),
        ("1g.35gb", 35, 4),
        ("2g.35gb", 35, 3),
        ("3g.71gb", 71, 2),
        ("4g.71gb", 71, 1),
        ("7g.141gb", 141, 1),
    ];
    let cat = sema::catalogue();
    for (name, table) in [
        ("H100", &h100[..]),
        ("A100_80GB", &h100[..]),
        ("A100_40GB", &a100_40[..]),
        ("H200", &h200[..]),
    ] {
        let acc = cat.accelerators.iter().find(|a| a.name == name);
        let Some(acc) = acc else {
            panic!("{name} missing")
        };
        let got: Vec<(&str, u64, u32)> = acc
            .mig_profiles
            .iter()
            .map(|p| (p.name.as_str(), p.memory / 1_000_000_000, p.instances))
            .collect();
        assert_eq!(got, table.to_vec(), "{name}");
    }
    for name in [
        "L40S",
        "L4",
        "A10",
        "T4",
        "JetsonOrinNano",
        "MI300X",
        "Gaudi3",
    ] {
        let acc = cat.accelerators.iter().find(|a| a.name == name);
        assert!(
            acc.is_some_and(|a| a.mig_profiles.is_empty()),
            "{name} has no MIG"
        );
    }
}

/// The examples of `docs/diagnostics.md` for semantic codes: `data/sema/doc/EXXXX.berth`
/// reports that code and nothing else, and every semantic code has one.
#[test]
fn documented_examples_report_their_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sema/doc");
    for code in berth_compiler::diagnostics::Code::ALL {
        let c = code.as_str();
        if !(c.starts_with("E02") || c.starts_with("E03") || c.starts_with("E04")) {
            continue;
        }
        // Reported when a what-if file is applied, not by semantics: `tests/what_if.rs`.
        if *code == berth_compiler::diagnostics::Code::InvalidWhatIf {
            continue;
        }
        let path = dir.join(format!("{c}.berth"));
        assert!(path.exists(), "no documentation example for {c}");
        let (map, parsed, _, diags) = check(&[("example.berth".into(), read(&path).1)]);
        let parse = parse_errors(&map, &parsed);
        assert!(parse.is_empty(), "{c} example does not parse:\n{parse}");
        assert!(!diags.is_empty(), "{c} example reports nothing");
        for d in &diags {
            assert_eq!(d.code, *code, "{c} example:\n{}", render(&map, &diags));
        }
    }
}

/// Prints the documentation examples in the neutral form of `docs/diagnostics.md`
/// (`cargo test --test sema print_documented_examples -- --ignored --nocapture`).
#[test]
#[ignore]
fn print_documented_examples() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sema/doc");
    for code in berth_compiler::diagnostics::Code::ALL {
        let path = dir.join(format!("{}.berth", code.as_str()));
        if !path.exists() {
            continue;
        }
        let (map, _, _, diags) = check(&[("example.berth".into(), read(&path).1)]);
        println!("@@ {}", code.as_str());
        print!("{}", neutral::documented(&map, &diags));
    }
}

/// Imports are per file, names are shared by all files, and duplicates across files are
/// found with both spans.
#[test]
fn files_share_one_namespace_but_not_their_imports() {
    let a = (
        "a.berth".to_string(),
        "use std.gpu.L4\nconst gpu = L4\ntarget lyon {\n  class = factory  runtime = local  connectivity = connected  cpu = 8  memory = 16GiB\n  pool p { accelerator = gpu  count = 1 }\n}\n".to_string(),
    );
    let b = (
        "b.berth".to_string(),
        "target paris {\n  class = factory  runtime = local  connectivity = connected  cpu = 8  memory = 16GiB\n  pool p { accelerator = L4  count = 1 }\n}\nconst lyon = 1\n".to_string(),
    );
    let (map, _, ir, diags) = check(&[a, b]);
    assert!(ir.is_none());
    insta::assert_snapshot!(render(&map, &diags), @r"
    error[E0201] b.berth:3:26: unknown name `L4`
      primary `L4`: expected an accelerator
      help: `L4` is in `std.gpu`: add `use std.gpu.L4` to this file
    error[E0202] b.berth:5:7: `lyon` is defined more than once
      primary `lyon`: defined again here
      label a.berth:3:8 `lyon`: first defined here
      help: names are shared by every file of the spec: rename one of them
    ");
}

/// Removing any one line of any example never makes analysis panic, and every error it
/// reports points into the spec's own files.
#[test]
fn broken_examples_never_panic() {
    for dir in example_dirs() {
        let files = spec_files(&dir);
        for (f, (_, text)) in files.iter().enumerate() {
            let lines: Vec<&str> = text.lines().collect();
            for skip in 0..lines.len() {
                let mut broken = files.clone();
                let kept: Vec<&str> = lines
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != skip)
                    .map(|(_, l)| *l)
                    .collect();
                broken[f].1 = kept.join("\n");
                let (map, _, _, diags) = check(&broken);
                for d in &diags {
                    assert!(map.get(d.primary.span.file).is_some(), "{d:?}");
                }
            }
        }
    }
}

/// The span table has the documented keys.
#[test]
fn span_table_keys_follow_the_documented_paths() {
    let dir = example_dirs()
        .into_iter()
        .find(|d| d.ends_with("three-plants"));
    let Some(dir) = dir else {
        panic!("three-plants example missing")
    };
    let (map, _, ir, _) = check(&spec_files(&dir));
    let Some(ir) = ir else {
        panic!("three-plants does not check")
    };
    let w = &ir.spans.workloads[0];
    for key in [
        "replicas",
        "resources.gpu",
        "data.line_images.max_latency",
        "services.object_store",
        "connectivity",
        "class",
        "environments",
        "placement.spread",
    ] {
        assert!(
            w.fields.contains_key(key),
            "workload span key {key}: {:?}",
            w.fields.keys()
        );
    }
    let t = &ir.spans.targets[0];
    for key in [
        "pool.l4.accelerator",
        "data.line_images",
        "services.object_store",
        "connectivity",
    ] {
        assert!(
            t.fields.contains_key(key),
            "target span key {key}: {:?}",
            t.fields.keys()
        );
    }
    let file = map.get(w.field("resources.gpu").file);
    assert_eq!(
        file.map(|f| f.slice(w.field("resources.gpu"))),
        Some("gpu = 1")
    );
    assert_eq!(ir.spans.denies.len(), ir.policy.denies.len());
    assert_eq!(ir.spans.windows.len(), ir.policy.windows.len());
}

/// The IR semantics produces is what the placement engine and the verifier consume: every
/// example plans, and its plan verifies. For the three plants, the README's intended
/// decisions hold.
#[test]
fn examples_plan_and_verify() {
    let at: jiff::Timestamp = "2026-03-04T10:00:00Z".parse().unwrap_or_default();
    let mut summary = String::new();
    for dir in example_dirs() {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (map, _, ir, diags) = check(&spec_files(&dir));
        let Some(ir) = ir else {
            panic!("{name}:\n{}", render(&map, &diags))
        };
        let plan = berth_compiler::placement::plan(&ir, &map, at, "sha256:test", "test");
        let verdict = berth_compiler::verify::verify(&ir, &plan, at);
        assert!(verdict.is_ok(), "{name}: {:?}", verdict.err());
        for w in &plan.workloads {
            let places: Vec<String> = w
                .placements
                .iter()
                .map(|p| {
                    let variant = p
                        .variant
                        .as_ref()
                        .map(|v| v.variant.clone())
                        .unwrap_or_default();
                    format!("{}×{}:{}", p.replicas, p.target, variant)
                })
                .collect();
            let _ = writeln!(
                summary,
                "{name}/{}: {:?} {}",
                w.workload,
                w.status,
                places.join(" ")
            );
        }
    }
    insta::assert_snapshot!(summary);
}

/// `docs/schema.md` is generated from the schema tables.
#[test]
fn schema_reference_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema.md");
    let want = sema::schema::reference_markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let _ = std::fs::write(&path, &want);
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/schema.md is out of date: regenerate it with `UPDATE_DOCS=1 cargo test -p berth-compiler --test sema`"
    );
}
