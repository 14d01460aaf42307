//! End-to-end output of [`berth_compiler::check`]: every `data/check_output/*.berth` file is
//! checked on its own and its diagnostics snapshotted twice, as the terminal shows them (no
//! colour) and as `--output json` prints them. Adding a case is adding a file.

use berth_compiler::diagnostics::render::{render_terminal, to_json_document};
use berth_compiler::source::SourceMap;

fn check(name: &str, text: &str) -> (String, String) {
    let mut sources = SourceMap::new();
    sources.add(name, text);
    let out = berth_compiler::check(&sources);
    let terminal = render_terminal(&out.diagnostics, &sources, false);
    let json = serde_json::to_string_pretty(&to_json_document(&out.diagnostics, &sources, 0))
        .expect("JSON values serialise");
    (terminal, json)
}

#[test]
fn check_output() {
    insta::glob!("data/check_output/*.berth", |path| {
        let text = std::fs::read_to_string(path).expect("test input is UTF-8");
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (terminal, json) = check(&name, &text);
        insta::assert_snapshot!("terminal", terminal);
        insta::assert_snapshot!("json", json);
    });
}
