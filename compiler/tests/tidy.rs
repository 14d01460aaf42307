//! Tidy: the architecture's invariants (ARCHITECTURE.md, "Invariants") checked by reading
//! the sources, so that a change breaking a layer fails here with the rule's name and the
//! place, instead of surviving review.
//!
//! Lines are read with their comments removed (text after `//`), so documentation may name
//! what the code must not use. The rules are substring checks, deliberately simple: a false
//! alarm is fixed by rewording, a real one by moving the code to the layer it belongs to.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One rule: its name (what a failure says), which files it covers, and the forbidden
/// spellings, each with what it stands for.
struct Rule {
    name: &'static str,
    why: &'static str,
    /// Files covered, by their path relative to the repository root (`/` separators).
    applies: fn(&str) -> bool,
    forbidden: &'static [&'static str],
}

const RULES: &[Rule] = &[
    Rule {
        name: "compiler-never-imports-the-runtime",
        why: "the compiler is a library the runtime depends on, never the reverse",
        applies: in_compiler,
        forbidden: &["berth_runtime", "berth-runtime"],
    },
    Rule {
        name: "compiler-does-no-io",
        why: "files arrive as strings in a SourceMap; the runtime reads them",
        applies: in_compiler,
        forbidden: &[
            "std::fs",
            "fs::read",
            "fs::write",
            "File::open",
            "File::create",
            "OpenOptions",
            "std::net",
            "std::process",
        ],
    },
    Rule {
        name: "compiler-reads-no-environment",
        why: "a compilation depends on its sources and its arguments alone",
        applies: in_compiler,
        forbidden: &["std::env", "env::var", "env::args"],
    },
    Rule {
        name: "compiler-never-reads-the-clock",
        why: "the plan instant is an argument (`--at`, or now read by the runtime)",
        applies: in_compiler,
        forbidden: &[
            "std::time",
            "SystemTime",
            "UNIX_EPOCH",
            "Instant::now",
            "Timestamp::now",
            "Zoned::now",
            "jiff::now",
            "::now()",
        ],
    },
    Rule {
        name: "compiler-has-no-async",
        why: "the compiler is synchronous; its only threads are rayon's",
        applies: in_compiler,
        forbidden: &["async fn", "async move", ".await", "tokio", "futures::"],
    },
    Rule {
        name: "verifier-never-imports-placement",
        why: "a bug in the solver must not hide by being reused in its check",
        applies: in_verifier,
        forbidden: &["crate::placement", "placement::", "super::placement"],
    },
    Rule {
        name: "runtime-uses-the-compiler-surface",
        why: "the runtime goes through driver, ide, plan, ir, diagnostics and source; the \
              stages are the compiler's business",
        applies: in_runtime,
        forbidden: &[
            "berth_compiler::syntax",
            "berth_compiler::sema",
            "berth_compiler::placement",
            "berth_compiler::verify",
            "berth_compiler::testing::specs",
        ],
    },
    Rule {
        name: "only-documented-modules-write-to-the-terminal",
        why: "output goes through report::Ui; ARCHITECTURE.md names the exceptions",
        applies: writes_to_terminal_unexpectedly,
        forbidden: &[
            "println!",
            "eprintln!",
            "print!(",
            "eprint!(",
            "stdout()",
            "stderr()",
        ],
    },
];

/// The modules allowed to touch the process's streams (ARCHITECTURE.md): the binary's entry
/// hands them to `report::Ui`; `report` asks whether stderr is a terminal; the language
/// server speaks its protocol on stdout and logs on stderr; the Kubernetes apply draws
/// progress bars on a terminal's stderr; `berth top` takes over a terminal for its view.
const TERMINAL_WRITERS: &[&str] = &[
    "runtime/src/cli.rs",
    "runtime/src/report.rs",
    "runtime/src/lsp/",
    "runtime/src/backends/k8s/apply.rs",
    "runtime/src/commands/top_view.rs",
];

fn in_compiler(path: &str) -> bool {
    path.starts_with("compiler/src/")
}

fn in_runtime(path: &str) -> bool {
    path.starts_with("runtime/src/")
}

fn in_verifier(path: &str) -> bool {
    path.starts_with("compiler/src/verify/")
}

fn writes_to_terminal_unexpectedly(path: &str) -> bool {
    (path.starts_with("compiler/src/") || path.starts_with("runtime/src/"))
        && !TERMINAL_WRITERS.iter().any(|w| path.starts_with(w))
}

/// Every breach of `rules` in `text` (the file at `path`), as `rule: path:line: found
/// "spelling" (why)`.
fn breaches(rules: &[Rule], path: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for rule in rules.iter().filter(|r| (r.applies)(path)) {
        for (n, line) in text.lines().enumerate() {
            let code = line.split_once("//").map_or(line, |(code, _)| code);
            for spelling in rule.forbidden {
                if code.contains(spelling) {
                    found.push(format!(
                        "{}: {path}:{}: found `{spelling}` ({})",
                        rule.name,
                        n + 1,
                        rule.why
                    ));
                }
            }
        }
    }
    found
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the compiler crate lies in the repository")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted, relative to the repository root.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_layers_hold() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["compiler/src", "runtime/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 50,
        "the sources were not found under {root:?}"
    );
    let mut report = String::new();
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .expect("under the root")
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let text = std::fs::read_to_string(file).expect("UTF-8 source");
        for breach in breaches(RULES, &rel, &text) {
            let _ = writeln!(report, "{breach}");
        }
    }
    assert!(report.is_empty(), "architecture rules broken:\n{report}");
}

/// A module's path (`commands::plan`) from its file (`commands/plan.rs`, `commands/mod.rs`).
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    parts
}

/// The modules of `modules` that `text` (the source of `me`) names through `crate::` or
/// `super::` paths, outside its tests: each path resolved to the longest module it starts
/// with.
fn imports(me: &[String], text: &str, modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let mut found = BTreeSet::new();
    let longest = |path: Vec<String>| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| modules.contains(p))
    };
    for line in code.lines() {
        let line = line.split_once("//").map_or(line, |(code, _)| code);
        for (i, _) in line.match_indices("crate::") {
            let path = path_at(&line[i + "crate::".len()..]);
            if let Some(m) = longest(path) {
                found.insert(m);
            }
        }
        for (i, _) in line.match_indices("super::") {
            if line[..i].ends_with("super::") {
                continue;
            }
            let mut rest = &line[i..];
            // A module's file is `x.rs` or `x/mod.rs`: either way `super` is its parent.
            let mut base = me.to_vec();
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            base.extend(path_at(rest));
            if let Some(m) = longest(base) {
                found.insert(m);
            }
        }
    }
    found.remove(me);
    found
}

/// The `a::b::c` at the start of `text`: lowercase segments, up to the first that is not
/// one whole (a type, a call, a brace ends the path).
fn path_at(text: &str) -> Vec<String> {
    let mut path = Vec::new();
    for seg in text.split("::") {
        let name: String = seg
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        let whole = name.len() == seg.len();
        if !name.is_empty() {
            path.push(name);
        }
        if !whole {
            break;
        }
    }
    path
}

/// A cycle among `graph`'s modules, if there is one (a depth-first search).
fn a_cycle(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    fn visit(
        node: &Vec<String>,
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        done: &mut BTreeSet<Vec<String>>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let root = root();
    for dir in ["compiler/src", "runtime/src"] {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        let sources: Vec<(Vec<String>, String)> = files
            .iter()
            .map(|f| {
                let rel = f
                    .strip_prefix(root.join(dir))
                    .expect("under the crate")
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                let text = std::fs::read_to_string(f).expect("UTF-8 source");
                (module_of(&rel), text)
            })
            .collect();
        let modules: BTreeSet<Vec<String>> = sources.iter().map(|(m, _)| m.clone()).collect();
        // The runtime's files form no cycle; the compiler's stages (its top-level modules)
        // form none, though files within one stage may lean on each other.
        let room = |m: &Vec<String>| -> Vec<String> {
            if dir == "compiler/src" {
                m.iter().take(1).cloned().collect()
            } else {
                m.clone()
            }
        };
        let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (m, text) in &sources {
            let from = room(m);
            let to: BTreeSet<Vec<String>> = imports(m, text, &modules)
                .iter()
                .map(room)
                .filter(|t| *t != from)
                .collect();
            graph.entry(from).or_default().extend(to);
        }
        if let Some(cycle) = a_cycle(&graph) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            panic!(
                "no-import-cycles: {dir}: {} (move what both need to a module of its own)",
                names.join(" → ")
            );
        }
    }
}

#[test]
fn the_compiler_manifest_does_not_name_the_runtime() {
    let manifest =
        std::fs::read_to_string(root().join("compiler/Cargo.toml")).expect("compiler manifest");
    assert!(
        !manifest.contains("berth-runtime"),
        "compiler-never-imports-the-runtime: compiler/Cargo.toml depends on berth-runtime"
    );
}

#[test]
fn a_breach_names_its_rule_and_place() {
    let text = "use crate::ir::Ir;\n// std::fs in a comment is fine\nlet t = std::fs::read(p);\n";
    let found = breaches(RULES, "compiler/src/ir/mod.rs", text);
    assert_eq!(
        found,
        [
            "compiler-does-no-io: compiler/src/ir/mod.rs:3: found `std::fs` (files arrive as \
             strings in a SourceMap; the runtime reads them)",
            "compiler-does-no-io: compiler/src/ir/mod.rs:3: found `fs::read` (files arrive as \
             strings in a SourceMap; the runtime reads them)",
        ]
    );
    let verifier = breaches(
        RULES,
        "compiler/src/verify/checks/policy.rs",
        "use crate::placement::policy;\n",
    );
    assert_eq!(verifier.len(), 2, "{verifier:?}");
    assert!(verifier[0].starts_with("verifier-never-imports-placement: "));
    let printing = "fn f() { println!(\"hi\"); }\n";
    assert_eq!(breaches(RULES, "runtime/src/lsp/mod.rs", printing), [""; 0]);
    assert!(
        breaches(RULES, "runtime/src/commands/plan.rs", printing)[0]
            .starts_with("only-documented-modules-write-to-the-terminal: ")
    );
}

#[test]
fn a_cycle_is_found_and_named() {
    let modules: BTreeSet<Vec<String>> = [vec!["a".to_owned()], vec!["b".to_owned()]].into();
    let a = vec!["a".to_owned()];
    let b = vec!["b".to_owned()];
    let graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = [
        (a.clone(), imports(&a, "use crate::b::Thing;\n", &modules)),
        (
            b.clone(),
            imports(&b, "fn f() { super::a::g() }\n", &modules),
        ),
    ]
    .into();
    assert_eq!(a_cycle(&graph), Some(vec![a.clone(), b.clone(), a.clone()]));
    let one_way: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = [
        (a.clone(), imports(&a, "use crate::b;\n", &modules)),
        (b, BTreeSet::new()),
    ]
    .into();
    assert_eq!(a_cycle(&one_way), None);
}
