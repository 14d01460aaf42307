//! Error recovery: independent mistakes give one diagnostic each, no more, no fewer.
//!
//! Each mutation below breaks the language example (`data/parse/ok/language_example.berth`)
//! in one place. Applied alone, a mutation must yield exactly one diagnostic, with the given
//! code, at the given line and column. Applied all together, they must yield exactly one
//! diagnostic each.

use berth_compiler::source::{FileId, SourceFile};
use berth_compiler::syntax::parse_file;

struct Mutation {
    /// Text to find (its first occurrence) and what replaces it.
    find: &'static str,
    replace: &'static str,
    code: &'static str,
    /// Where the diagnostic's primary span starts, in the mutated text: the line of `find`'s
    /// first occurrence, and a column counted on that line after the replacement.
    line_col: (u32, u32),
}

const MUTATIONS: &[Mutation] = &[
    Mutation {
        find: "const plant_images = \"plant",
        replace: "const plant_images \"plant",
        code: "E0101",
        line_col: (5, 20),
    },
    Mutation {
        find: "    gpu_memory = 12GiB",
        replace: "    gpu_memory =",
        code: "E0106",
        line_col: (11, 16),
    },
    Mutation {
        find: "  kind     = service",
        replace: "  kind     : service",
        code: "E0101",
        line_col: (27, 12),
    },
    Mutation {
        find: "  max_latency    = 20ms",
        replace: "  max_latency    = 20$",
        code: "E0001",
        line_col: (37, 24),
    },
    Mutation {
        find: "environments = [factory, datacenter, cloud]",
        replace: "environments = [factory datacenter, cloud]",
        code: "E0101",
        line_col: (42, 27),
    },
    Mutation {
        find: "  telemetry { buffer = 24h }\n}",
        replace: "  telemetry { buffer = 24h }\n",
        code: "E0102",
        line_col: (46, 1),
    },
    Mutation {
        find: "  memory = 256GiB",
        replace: "  memory = 256GiB 256GiB",
        code: "E0101",
        line_col: (53, 19),
    },
    Mutation {
        find: "  cpu = 16  memory = 64GiB",
        replace: "  cpu = 16 ) memory = 64GiB",
        code: "E0101",
        line_col: (68, 12),
    },
    Mutation {
        find: "    when workload.data",
        replace: "    if workload.data",
        code: "E0101",
        line_col: (89, 5),
    },
    Mutation {
        find: "quota team(\"research\") { gpu <= 8 }",
        replace: "quota team(\"research\") { gpu <= }",
        code: "E0101",
        line_col: (93, 35),
    },
    Mutation {
        find: "weekdays 08:00..18:00",
        replace: "weekdays 08:00 18:00",
        code: "E0101",
        line_col: (94, 32),
    },
    Mutation {
        find: "approval when cost_per_day > 500",
        replace: "approval when 1 < cost_per_day > 500",
        code: "E0107",
        line_col: (96, 17),
    },
    Mutation {
        find: "when gpu_idle > 30m",
        replace: "when gpu_idle > > 30m",
        code: "E0101",
        line_col: (97, 41),
    },
    Mutation {
        find: "placement vision_inspect {",
        replace: "placement {",
        code: "E0105",
        line_col: (100, 10),
    },
];

fn example() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/parse/ok/language_example.berth");
    std::fs::read_to_string(path).expect("the language example is readable")
}

fn apply(text: &str, m: &Mutation) -> String {
    assert!(
        text.contains(m.find),
        "mutation target `{}` not found",
        m.find
    );
    text.replacen(m.find, m.replace, 1)
}

/// (code, line, column) of every diagnostic.
fn diagnose(text: &str) -> Vec<(String, u32, u32)> {
    let parsed = parse_file(FileId(0), text);
    let file = SourceFile::new(FileId(0), "t.berth", text);
    parsed
        .diagnostics
        .iter()
        .map(|d| {
            let lc = file.line_col(d.primary.span.start);
            (d.code.as_str().to_string(), lc.line, lc.column)
        })
        .collect()
}

#[test]
fn the_example_is_clean() {
    assert_eq!(diagnose(&example()), vec![]);
}

#[test]
fn each_mistake_alone_gives_one_diagnostic() {
    let base = example();
    for m in MUTATIONS {
        let got = diagnose(&apply(&base, m));
        assert_eq!(
            got,
            vec![(m.code.to_string(), m.line_col.0, m.line_col.1)],
            "mutation `{}` -> `{}`",
            m.find,
            m.replace
        );
    }
}

#[test]
fn all_mistakes_together_give_one_diagnostic_each() {
    let mut text = example();
    for m in MUTATIONS {
        text = apply(&text, m);
    }
    let got = diagnose(&text);
    let mut codes: Vec<&str> = got.iter().map(|(c, _, _)| c.as_str()).collect();
    let mut want: Vec<&str> = MUTATIONS.iter().map(|m| m.code).collect();
    codes.sort_unstable();
    want.sort_unstable();
    assert_eq!(codes, want, "diagnostics: {got:?}");
}

#[test]
fn five_independent_mistakes_give_five_diagnostics() {
    let text = "\
model m {
  version = \"1\"
  variant fp16 {
    format = onnx
    gpu_memory =
  }
}

workload w {
  replicas: 2
  kind = service
  environments = [factory cloud]
}

target t {
  class = factory
  cpu = 64 )
}

placement {
  targets = [t]
}
";
    let got = diagnose(text);
    let want: Vec<(String, u32, u32)> = [
        ("E0106", 5, 16),
        ("E0101", 10, 11),
        ("E0101", 12, 27),
        ("E0101", 17, 12),
        ("E0105", 20, 10),
    ]
    .iter()
    .map(|&(c, l, col)| (c.to_string(), l, col))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn errors_at_lexer_holes_are_not_repeated() {
    // Each bad token is reported once, by the lexer; the parser stays silent about it.
    let text = "workload w {\n  a = $\n  b = 16gib\n  c = \"open\n  d = [1, 1__0, 3]\n}\n";
    let codes: Vec<String> = diagnose(text).into_iter().map(|(c, _, _)| c).collect();
    assert_eq!(codes, vec!["E0001", "E0006", "E0002", "E0005"]);
}
