//! End-to-end tests of the `berth` binary: real processes in temporary directories, checking
//! exit codes (0 clean, 1 errors, 2 usage or environment), where output goes and its shape.

mod isolated;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// A clean source: names, types and all.
const CLEAN: &str = "const replicas = 2\n";
/// A source with one lexical error: `$` starts no token (E0001), on line 2, column 16.
const LEX_ERROR: &str = "const size = 1\nconst web = 20 $\n";

/// Runs `berth ARGS` in `dir`, with no `NO_COLOR` inherited and stdout/stderr piped.
fn berth(dir: &Path, args: &[&str]) -> Output {
    berth_with(dir, args, |_| {})
}

fn berth_with(dir: &Path, args: &[&str], configure: impl FnOnce(&mut Command)) -> Output {
    let mut command = isolated::berth();
    command.args(args).current_dir(dir).env_remove("NO_COLOR");
    configure(&mut command);
    command.output().expect("the berth binary runs")
}

fn code(output: &Output) -> i32 {
    output
        .status
        .code()
        .expect("berth exits normally, not by a signal")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

fn temp_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, bytes) in files {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create dirs");
        }
        fs::write(path, bytes).expect("write file");
    }
    dir
}

#[test]
fn clean_file_exits_zero() {
    let dir = temp_with(&[("web.berth", CLEAN.as_bytes())]);
    let out = berth(dir.path(), &["check", "web.berth"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    assert_eq!(stderr(&out), "no errors in 1 file\n");
}

#[test]
fn lexical_errors_exit_one_with_code_and_location() {
    let dir = temp_with(&[("web.berth", LEX_ERROR.as_bytes())]);
    let out = berth(dir.path(), &["check", "web.berth"]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(
        err.contains("[E0001] Error: unexpected character `$`"),
        "{err}"
    );
    assert!(err.contains("web.berth:2:16"), "{err}");
    assert!(err.ends_with("1 error in 1 file\n"), "{err}");
    assert!(stdout(&out).is_empty(), "human diagnostics go to stderr");
}

#[test]
fn json_output_is_one_document_with_positions() {
    let dir = temp_with(&[
        ("a.berth", CLEAN.as_bytes()),
        ("web.berth", LEX_ERROR.as_bytes()),
    ]);
    let out = berth(dir.path(), &["--output", "json", "check", "."]);
    assert_eq!(code(&out), 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("stdout is JSON");
    assert_eq!(doc["files"], 2);
    assert_eq!(doc["errors"], 1);
    assert_eq!(doc["warnings"], 0);
    let diag = &doc["diagnostics"][0];
    assert_eq!(diag["code"], "E0001");
    assert_eq!(diag["severity"], "error");
    assert!(
        diag["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("web.berth"))
    );
    assert_eq!(diag["start"]["line"], 2);
    assert_eq!(diag["start"]["column"], 16);
    assert_eq!(diag["start"]["offset"], 30);
    assert_eq!(diag["labels"][0]["line"], 2);
    assert!(stderr(&out).is_empty(), "JSON mode prints no human text");
}

/// A valid spec whose one workload no target can run: the fleet analysis warns (W0701).
const UNPLACEABLE: &str = "workload web {\n  release = \"1\"  image = \"web:1\"  class = production  identity = service_account(\"web\")\n  resources { cpu = 16  memory = 8GiB }\n}\n\ntarget shop { class = branch  runtime = local  connectivity = connected  cpu = 4  memory = 16GiB }\n";

#[test]
fn fleet_warnings_are_reported_and_exit_zero() {
    let dir = temp_with(&[("web.berth", UNPLACEABLE.as_bytes())]);
    let out = berth(dir.path(), &["check", "web.berth"]);
    assert_eq!(code(&out), 0, "warnings alone do not fail a check");
    let err = stderr(&out);
    assert!(
        err.contains("[W0701] Warning: workload `web` can run on no target"),
        "{err}"
    );
    assert!(
        err.contains("`shop` comes closest: needs 16 CPUs per replica; the target has 4"),
        "{err}"
    );
    assert!(err.ends_with("1 warning in 1 file\n"), "{err}");

    let out = berth(dir.path(), &["--output", "json", "check", "web.berth"]);
    assert_eq!(code(&out), 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("stdout is JSON");
    assert_eq!(doc["errors"], 0);
    assert_eq!(doc["warnings"], 1);
    assert_eq!(doc["diagnostics"][0]["code"], "W0701");
    assert_eq!(doc["diagnostics"][0]["severity"], "warning");
    assert_eq!(doc["diagnostics"][0]["start"]["line"], 1);
}

#[test]
fn global_options_may_follow_the_subcommand() {
    let dir = temp_with(&[("web.berth", CLEAN.as_bytes())]);
    let out = berth(dir.path(), &["check", "web.berth", "--output", "json"]);
    assert_eq!(code(&out), 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("stdout is JSON");
    assert_eq!(doc["files"], 1);
}

#[test]
fn missing_path_exits_two_and_names_it() {
    let dir = temp_with(&[]);
    let out = berth(dir.path(), &["check", "nowhere.berth"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("error: `nowhere.berth` does not exist"),
        "{err}"
    );
    assert!(err.contains("help: "), "{err}");
}

#[test]
fn non_utf8_file_exits_two_with_offset() {
    let dir = temp_with(&[("bad.berth", b"workload web {\n  image = \"\xff\"\n}\n")]);
    let out = berth(dir.path(), &["check", "bad.berth"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("`bad.berth` is not valid UTF-8: invalid byte at offset 26 (line 2)"),
        "{err}"
    );
}

#[test]
fn oversized_file_exits_two_without_reading_it() {
    let dir = temp_with(&[]);
    let path = dir.path().join("huge.berth");
    let file = fs::File::create(&path).expect("create");
    // Sparse: costs no disk, and berth refuses it from its size alone.
    let limit = berth_compiler::driver::MAX_FILE_BYTES as u64;
    file.set_len(limit + 1).expect("set length");
    let out = berth(dir.path(), &["check", "huge.berth"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("`huge.berth` is larger than the 16 MiB limit"),
        "{err}"
    );
    assert!(err.contains("split the specification"), "{err}");
}

#[test]
fn directories_are_searched_for_berth_files_only() {
    let dir = temp_with(&[
        ("specs/a.berth", CLEAN.as_bytes()),
        ("specs/nested/deeper/b.berth", LEX_ERROR.as_bytes()),
        ("specs/notes.txt", b"not berth $"),
        ("specs/.git/c.berth", LEX_ERROR.as_bytes()),
        ("specs/.cache/d.berth", LEX_ERROR.as_bytes()),
    ]);
    let out = berth(dir.path(), &["--output", "json", "check", "specs"]);
    assert_eq!(code(&out), 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("stdout is JSON");
    assert_eq!(doc["files"], 2);
    assert_eq!(doc["errors"], 1);
    let file = doc["diagnostics"][0]["file"].as_str().expect("a file name");
    assert!(
        Path::new(file).ends_with("specs/nested/deeper/b.berth"),
        "{file}"
    );
}

#[test]
fn directory_without_sources_exits_two() {
    let dir = temp_with(&[("specs/readme.txt", b"hello")]);
    let out = berth(dir.path(), &["check", "specs"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("no `.berth` files found in `specs`"));
}

#[test]
fn output_is_deterministic_whatever_the_argument_order() {
    let dir = temp_with(&[
        ("a.berth", LEX_ERROR.as_bytes()),
        ("b.berth", LEX_ERROR.as_bytes()),
    ]);
    let one = berth(
        dir.path(),
        &["--output", "json", "check", "a.berth", "b.berth"],
    );
    let two = berth(
        dir.path(),
        &["--output", "json", "check", "b.berth", "a.berth"],
    );
    assert_eq!(stdout(&one), stdout(&two));
}

#[test]
fn a_file_named_twice_is_checked_once() {
    let dir = temp_with(&[("a.berth", LEX_ERROR.as_bytes())]);
    let out = berth(
        dir.path(),
        &["--output", "json", "check", "a.berth", ".", "./a.berth"],
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("stdout is JSON");
    assert_eq!(doc["files"], 1);
    assert_eq!(doc["errors"], 1);
}

#[test]
fn no_colour_when_piped_or_no_color_is_set() {
    let dir = temp_with(&[("web.berth", LEX_ERROR.as_bytes())]);
    // stderr is a pipe here, so `auto` means no colour.
    let piped = berth(dir.path(), &["check", "web.berth"]);
    assert!(!stderr(&piped).contains('\x1b'));
    let no_color = berth_with(
        dir.path(),
        &["--color", "auto", "check", "web.berth"],
        |c| {
            c.env("NO_COLOR", "1");
        },
    );
    assert!(!stderr(&no_color).contains('\x1b'));
    // And the check above can fail: forced colour does produce escapes.
    let forced = berth(dir.path(), &["--color", "always", "check", "web.berth"]);
    assert!(stderr(&forced).contains("\x1b["));
}

#[test]
fn usage_errors_exit_two_and_help_exits_zero() {
    let dir = temp_with(&[]);
    for args in [
        &[][..],
        &["check"],
        &["frobnicate"],
        &["check", "--output", "xml", "x.berth"],
        &["--color", "sometimes", "check", "x.berth"],
    ] {
        let out = berth(dir.path(), args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty(), "{args:?} explains itself");
    }
    let help = berth(dir.path(), &["--help"]);
    assert_eq!(code(&help), 0);
    assert!(stdout(&help).contains("Usage: berth"));
    let version = berth(dir.path(), &["--version"]);
    assert_eq!(code(&version), 0);
    assert!(stdout(&version).starts_with("berth "));
}

#[test]
fn fmt_never_touches_a_file_with_errors() {
    let dir = temp_with(&[("web.berth", LEX_ERROR.as_bytes())]);
    for args in [&["fmt", "web.berth"][..], &["fmt", "--check", "web.berth"]] {
        let out = berth(dir.path(), args);
        // 1 (errors shown) with a formatter, 2 (no formatter in this build) without.
        assert_ne!(code(&out), 0, "{args:?}");
        let text = fs::read(dir.path().join("web.berth")).expect("read");
        assert_eq!(text, LEX_ERROR.as_bytes());
    }
}

#[test]
fn fmt_rewrites_and_check_lists_changed_files() {
    const MESSY: &str = "workload   web   {\n     replicas   =   2\n}\n";
    let dir = temp_with(&[("web.berth", MESSY.as_bytes())]);
    let check = berth(dir.path(), &["fmt", "--check", "web.berth"]);
    assert_eq!(code(&check), 1, "{}", stderr(&check));
    assert_eq!(stdout(&check), "web.berth\n");
    assert_eq!(
        fs::read_to_string(dir.path().join("web.berth")).expect("read"),
        MESSY
    );

    let write = berth(dir.path(), &["fmt", "web.berth"]);
    assert_eq!(code(&write), 0, "{}", stderr(&write));
    let formatted = fs::read_to_string(dir.path().join("web.berth")).expect("read");
    assert_ne!(formatted, MESSY);

    let again = berth(dir.path(), &["fmt", "--check", "web.berth"]);
    assert_eq!(
        code(&again),
        0,
        "formatting is idempotent: {}",
        stdout(&again)
    );
    assert!(stdout(&again).is_empty());
}

/// The examples are in canonical style, so that they show it and stay readable after any
/// `berth fmt` run (`berth fmt examples/` puts them back).
#[test]
fn examples_are_formatted() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = berth(&root, &["fmt", "--check", "examples/"]);
    assert_eq!(
        code(&out),
        0,
        "run `berth fmt examples/`; not canonical:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn each_directory_is_its_own_spec() {
    let dir = temp_with(&[
        ("one/a.berth", CLEAN.as_bytes()),
        ("two/b.berth", CLEAN.as_bytes()),
    ]);
    let out = berth(dir.path(), &["check", "."]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let same = temp_with(&[("a.berth", CLEAN.as_bytes()), ("b.berth", CLEAN.as_bytes())]);
    let out = berth(same.path(), &["check", "."]);
    assert_eq!(code(&out), 1, "one directory is one namespace");
    assert!(stderr(&out).contains("E0202"), "{}", stderr(&out));
}

#[test]
fn emit_ir_prints_the_ir_of_one_spec() {
    let dir = temp_with(&[("a.berth", CLEAN.as_bytes())]);
    let out = berth(dir.path(), &["check", "--emit", "ir", "."]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let ir: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("stdout is JSON");
    assert!(ir["workloads"].is_array(), "{ir}");
    let two = temp_with(&[
        ("one/a.berth", CLEAN.as_bytes()),
        ("two/b.berth", CLEAN.as_bytes()),
    ]);
    let out = berth(two.path(), &["check", "--emit", "ir", "."]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("takes one spec"), "{}", stderr(&out));
}

/// Hostile input (issue 17): one line of 50,000 tokens with 25,000 syntax errors.
/// `check`, `fmt` and `plan` show 100 diagnostics per file and count the rest, each with a
/// window of the line rather than the whole line (the line used to be printed under every
/// diagnostic: gigabytes of stderr); `--error-limit 0` shows them all, still windowed.
#[test]
fn many_errors_on_one_long_line_are_limited_and_windowed() {
    let line = "const = ".repeat(25_000);
    let dir = temp_with(&[("spec/tokens.berth", format!("{line}\n").as_bytes())]);
    for args in [
        &["check", "spec"][..],
        &["fmt", "--check", "spec"],
        &["plan", "spec"],
    ] {
        let out = berth(dir.path(), args);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{args:?}: {}", &err[..err.len().min(2_000)]);
        assert_eq!(err.matches("Error:").count(), 100, "{args:?}");
        assert!(
            err.contains(" more errors in `spec/tokens.berth`\n"),
            "{args:?}"
        );
        assert!(err.contains("`--error-limit 0` shows all"), "{args:?}");
        assert!(err.len() < 100 * 1_000, "{args:?}: {} bytes", err.len());
    }
    let out = berth(dir.path(), &["--error-limit", "0", "check", "spec"]);
    let err = stderr(&out);
    let reports = err.matches("Error:").count();
    assert!(reports > 1_000, "{reports}");
    assert!(
        err.ends_with(&format!("\n{reports} errors in 1 file\n")),
        "{reports}"
    );
    assert!(!err.contains("more errors in"));
    assert!(
        err.len() < reports * 1_000,
        "{} bytes for {reports}",
        err.len()
    );

    let out = berth(dir.path(), &["--output", "json", "check", "spec"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    let shown = doc["diagnostics"].as_array().map_or(0, Vec::len);
    assert_eq!(shown, 100);
    let omitted = &doc["omitted"][0];
    assert_eq!(omitted["file"], "spec/tokens.berth");
    assert_eq!(
        omitted["errors"].as_u64(),
        doc["errors"].as_u64().map(|e| e - 100)
    );
}

/// The formatter on a 150,000-element list (which `check` accepts) and on 50,000
/// consecutive constants: it used to overflow its stack on the first (SIGABRT) and take a
/// minute on the second.
#[test]
fn fmt_formats_a_long_list_and_many_constants() {
    let list = format!("const l = [{}]\n", vec!["1"; 150_000].join(", "));
    let consts: String = (0..50_000).map(|i| format!("const c{i} = {i}\n")).collect();
    let dir = temp_with(&[
        ("list/l.berth", list.as_bytes()),
        ("consts/c.berth", consts.as_bytes()),
    ]);
    let out = berth(dir.path(), &["fmt", "--check", "list"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stdout(&out).contains("l.berth"), "{}", stdout(&out));
    let out = berth(dir.path(), &["fmt", "--check", "consts"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = berth(dir.path(), &["fmt", "list"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let formatted = fs::read_to_string(dir.path().join("list/l.berth")).expect("read back");
    assert_eq!(formatted.lines().count(), 150_002);
}

/// `--output sarif`: one SARIF 2.1.0 log on stdout, valid against the OASIS schema
/// (`tests/data/sarif/sarif-2.1.0-rtm.5.json`, as published in schemastore and shipped by
/// `@microsoft/jest-sarif`), with each diagnostic's code, level and primary span where
/// `--output json` puts it (columns in UTF-16 code units, 1-based), labels as related
/// locations; the summary stays on stderr.
#[test]
fn sarif_output_is_a_valid_log_with_the_exact_locations() {
    let warning = fs::read("../compiler/tests/data/analysis/dead_entitlement_two_rules.berth")
        .expect("fixture");
    let dir = temp_with(&[
        (
            "broken/web.berth",
            "const s = \"🚀🚀\" $\nconst web = 20 $\n".as_bytes(),
        ),
        ("warned/spec.berth", &warning),
    ]);
    let sarif_run = berth(
        dir.path(),
        &["--output", "sarif", "check", "broken", "warned"],
    );
    assert_eq!(code(&sarif_run), 1, "{}", stderr(&sarif_run));
    assert!(
        stderr(&sarif_run).contains("error"),
        "the summary on stderr"
    );
    let log: serde_json::Value = serde_json::from_str(&stdout(&sarif_run)).expect("one JSON log");
    let mut schema: serde_json::Value = serde_json::from_slice(
        &fs::read("../tests/data/sarif/sarif-2.1.0-rtm.5.json").expect("schema"),
    )
    .expect("schema JSON");
    // The `language` pattern of this schema revision is not a valid regular expression (an
    // unbalanced `]`; berth writes no `language`): its corrected form, wherever it is.
    let fixed = ["run", "toolComponent"]
        .iter()
        .filter(|def| {
            let pattern = &mut schema["definitions"][**def]["properties"]["language"]["pattern"];
            let broken = *pattern == "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
            if broken {
                *pattern = serde_json::json!("^[a-zA-Z]{2}(-[a-zA-Z]{2})?$");
            }
            broken
        })
        .count();
    assert_eq!(
        fixed, 2,
        "the schema file changed: look again at the patterns"
    );
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let problems: Vec<String> = validator.iter_errors(&log).map(|e| e.to_string()).collect();
    assert!(problems.is_empty(), "{problems:#?}");

    let json_run = berth(
        dir.path(),
        &["--output", "json", "check", "broken", "warned"],
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json_run)).expect("json");
    let diagnostics = doc["diagnostics"].as_array().expect("diagnostics");
    let run = &log["runs"][0];
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), diagnostics.len());
    assert!(diagnostics.iter().any(|d| d["severity"] == "warning"));
    assert_eq!(run["columnKind"], "utf16CodeUnits");
    for (result, diag) in results.iter().zip(diagnostics) {
        assert_eq!(result["ruleId"], diag["code"]);
        assert_eq!(result["level"], diag["severity"]);
        let rule =
            &run["tool"]["driver"]["rules"][result["ruleIndex"].as_u64().expect("index") as usize];
        assert_eq!(rule["id"], diag["code"]);
        assert_eq!(rule["shortDescription"]["text"], diag["title"]);
        let region = &result["locations"][0]["physicalLocation"]["region"];
        assert_eq!(region["startLine"], diag["start"]["line"]);
        assert_eq!(
            region["startColumn"].as_u64(),
            diag["start"]["utf16_column"].as_u64().map(|c| c + 1)
        );
        assert_eq!(
            result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            diag["file"]
        );
        let labels = diag["labels"].as_array().expect("labels").len() - 1;
        let related = result["relatedLocations"].as_array().map_or(0, Vec::len);
        assert_eq!(related, labels);
    }
    // The `$` after two rockets: the 16th character, the 18th UTF-16 code unit.
    let rocket = results
        .iter()
        .find(|r| r["locations"][0]["physicalLocation"]["region"]["startLine"] == 1)
        .expect("the first line's error");
    assert_eq!(
        rocket["locations"][0]["physicalLocation"]["region"]["startColumn"],
        18
    );
}

/// Markdown is for the plan reports, SARIF for diagnostics: elsewhere a usage error.
#[test]
fn report_formats_are_refused_where_they_mean_nothing() {
    let dir = temp_with(&[("web.berth", CLEAN.as_bytes())]);
    let out = berth(dir.path(), &["--output", "markdown", "check", "web.berth"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("`berth check` cannot print `--output markdown`"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("`berth plan` and `berth plan-diff`"));
    let out = berth(
        dir.path(),
        &["--output", "sarif", "fmt", "--check", "web.berth"],
    );
    assert_eq!(code(&out), 2);
    assert!(stdout(&out).is_empty());
}

/// `berth reclaim`'s usage and environment problems, before any cluster is reached: a
/// `--dcgm` that is not `CONTEXT=URL`, a cluster with reclaim rules and no exporter (exit 2,
/// with a hint), `--rounds` without `--watch`; a plan with no rule on a Kubernetes target
/// has nothing to do (exit 0).
#[test]
fn reclaim_refuses_without_an_exporter_and_has_nothing_to_do_without_rules() {
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/reclaim");
    let lab = lab.to_str().expect("UTF-8 path");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = berth(dir.path(), &["reclaim", lab, "--dcgm", "lab-gpu"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("`--dcgm lab-gpu` is not `CONTEXT=URL`"),
        "{}",
        stderr(&out)
    );
    let out = berth(dir.path(), &["reclaim", lab]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("no DCGM exporter for cluster `lab-gpu`"),
        "{err}"
    );
    assert!(err.contains("help: "), "{err}");
    assert!(stdout(&out).is_empty());
    let out = berth(dir.path(), &["reclaim", lab, "--rounds", "2"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quickstart");
    let out = berth(
        dir.path(),
        &[
            "--output",
            "json",
            "reclaim",
            quickstart.to_str().expect("UTF-8 path"),
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    assert_eq!(doc["reclaimed"], serde_json::json!([]));
}
