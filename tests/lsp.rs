//! End-to-end tests of `berth lsp`: a scripted client speaks JSON-RPC to the real binary
//! over its stdin and stdout, as an editor does.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);

struct Client {
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    next_id: i64,
    /// Notifications received while waiting for something else, oldest first.
    pending: Vec<Value>,
}

impl Client {
    /// Starts `berth lsp`: the binary cargo built for this test, or the one `BERTH_BIN`
    /// names (the benchmark measures a release build that way).
    fn start(env: &[(&str, &str)]) -> Client {
        let binary =
            std::env::var_os("BERTH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_berth").into());
        let mut child = Command::new(binary)
            .arg("lsp")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start berth lsp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, incoming) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(msg) = read_message(&mut reader) {
                if tx.send(msg).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            child,
            stdin,
            incoming,
            next_id: 1,
            pending: Vec::new(),
        };
        let caps = json!({"textDocument": {"publishDiagnostics": {"relatedInformation": true}}});
        let init = client.request(
            "initialize",
            json!({"processId": null, "rootUri": null, "capabilities": caps}),
        );
        assert_eq!(
            init["result"]["capabilities"]["positionEncoding"], "utf-16",
            "{init}"
        );
        client.notify("initialized", json!({}));
        client
    }

    fn send(&mut self, msg: &Value) {
        let body = msg.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.stdin.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its response (the whole message).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let msg = self.receive();
            if msg["id"] == json!(id) && msg.get("method").is_none() {
                return msg;
            }
            self.pending.push(msg);
        }
    }

    fn receive(&mut self) -> Value {
        match self.incoming.recv_timeout(TIMEOUT) {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => panic!("no message from the server in {TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed its output"),
        }
    }

    /// The next diagnostics published for `uri` (earlier ones for it are skipped).
    fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let matches = |m: &Value| {
                m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
            };
            if let Some(i) = self.pending.iter().position(matches) {
                let msg = self.pending.remove(i);
                // A newer publication for the same file supersedes this one.
                if !self.pending.iter().any(matches) {
                    return msg["params"]["diagnostics"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                }
                continue;
            }
            assert!(Instant::now() < deadline, "no diagnostics for {uri}");
            let msg = self.receive();
            self.pending.push(msg);
        }
    }

    fn shutdown(mut self) {
        let r = self.request("shutdown", Value::Null);
        assert!(r.get("error").is_none(), "{r}");
        self.notify("exit", Value::Null);
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "{status}");
    }
}

fn read_message(r: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(n) = line.strip_prefix("Content-Length: ") {
            length = n.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    r.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A spec directory with the two files below, on disk.
fn spec_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let targets = dir.path().join("targets.berth");
    let workloads = dir.path().join("workloads.berth");
    std::fs::write(&targets, TARGETS).expect("write");
    std::fs::write(&workloads, WORKLOADS).expect("write");
    (dir, targets, workloads)
}

const TARGETS: &str = "use std.gpu.{H100}\n\n/// The main cluster.\ntarget hpc {\n  class        = datacenter\n  runtime      = kubernetes { context = \"c\"  namespace = \"ml\" }\n  region       = \"eu\"\n  connectivity = connected\n  cpu    = 64\n  memory = 512GiB\n  pool h100 {\n    accelerator = H100\n    count       = 4\n  }\n  services = {}\n  cost     = { gpu_hour: 2.40 }\n}\n";

const WORKLOADS: &str = "use std.gpu.H100\n\n/// Scores payments (für Zahlungen).\nworkload scoring {\n  release  = \"1\"\n  image    = \"r/i:1\"\n  kind     = service\n  class    = production\n  identity = service_account(\"s\")\n  team     = \"risk\"\n  replicas = 1\n  resources { cpu = 2  memory = 8GiB  gpu = 1 }\n  accelerators = [H100]\n  connectivity = connected\n  environments = [datacenter]\n}\n\nplacement scoring {\n  targets = [hpc]\n}\n";

fn open(client: &mut Client, path: &Path, text: &str) {
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri(path), "languageId": "berth", "version": 1, "text": text}}),
    );
}

fn change(client: &mut Client, path: &Path, version: i32, changes: Value) {
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(path), "version": version}, "contentChanges": changes}),
    );
}

fn position(path: &Path, line: u32, character: u32) -> Value {
    json!({"textDocument": {"uri": uri(path)}, "position": {"line": line, "character": character}})
}

#[test]
fn diagnostics_are_published_in_utf16_and_cleared_after_a_fix() {
    let (_dir, targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    // `é` and `𝄞` before the mistake: 2 UTF-16 units for `𝄞`, 1 for `é`.
    let broken = WORKLOADS.replace("  team     = \"risk\"", "  team     = \"é𝄞\" replica = 2");
    open(&mut client, &workloads, &broken);
    let diags = client.diagnostics(&uri(&workloads));
    let unknown = diags
        .iter()
        .find(|d| d["code"] == "E0301")
        .unwrap_or_else(|| panic!("an unknown-field diagnostic in {diags:#?}"));
    // `  team     = "é𝄞" ` is 20 UTF-16 units (21 chars less the surrogate pair counted twice).
    let line = broken
        .lines()
        .position(|l| l.contains("replica ="))
        .expect("line") as u64;
    assert_eq!(
        unknown["range"]["start"],
        json!({"line": line, "character": 19})
    );
    assert_eq!(
        unknown["range"]["end"],
        json!({"line": line, "character": 26})
    );
    assert!(
        unknown["message"]
            .as_str()
            .expect("message")
            .contains("did you mean `replicas`")
    );
    assert_eq!(client.diagnostics(&uri(&targets)), Vec::<Value>::new());

    // Fix it with an incremental edit over exactly the typo.
    let fix = json!([{"range": {"start": {"line": line, "character": 19}, "end": {"line": line, "character": 30}}, "text": ""}]);
    change(&mut client, &workloads, 2, fix);
    let diags = client.diagnostics(&uri(&workloads));
    assert_eq!(diags, Vec::<Value>::new());
    client.shutdown();
}

#[test]
fn a_change_in_one_file_updates_diagnostics_of_another() {
    let (_dir, targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(&mut client, &targets, TARGETS);
    assert_eq!(client.diagnostics(&uri(&workloads)), Vec::<Value>::new());
    // The opened file is published after the others.
    assert_eq!(client.diagnostics(&uri(&targets)), Vec::<Value>::new());
    client.pending.clear();
    // An edit that changes no diagnostics republishes only the edited file; the answer to
    // a request sent behind it comes after every publication of the edit.
    let commented = format!("// edited\n{TARGETS}");
    change(&mut client, &targets, 2, json!([{"text": commented}]));
    client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri(&targets)}}),
    );
    let published: Vec<&str> = client
        .pending
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics")
        .map(|m| m["params"]["uri"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(published, vec![uri(&targets).as_str()]);
    client.pending.clear();
    // Renaming the target breaks the placement in workloads.berth.
    let renamed = TARGETS.replace("target hpc", "target hpc2");
    change(&mut client, &targets, 3, json!([{"text": renamed}]));
    let diags = client.diagnostics(&uri(&workloads));
    assert!(diags.iter().any(|d| d["code"] == "E0201"), "{diags:#?}");
    change(&mut client, &targets, 4, json!([{"text": TARGETS}]));
    assert_eq!(client.diagnostics(&uri(&workloads)), Vec::<Value>::new());
    client.shutdown();
}

/// The fleet analysis weighs the whole spec: shrinking the one target in `targets.berth`
/// makes the workload in `workloads.berth` unplaceable, and a warning (severity 2) appears
/// there, pointing into the other file; restoring the target clears it.
#[test]
fn fleet_warnings_follow_edits_of_another_file() {
    let (_dir, targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(&mut client, &targets, TARGETS);
    assert_eq!(client.diagnostics(&uri(&workloads)), Vec::<Value>::new());
    client.pending.clear();
    let small = TARGETS.replace("memory = 512GiB", "memory = 4GiB");
    change(&mut client, &targets, 2, json!([{"text": small}]));
    let diags = client.diagnostics(&uri(&workloads));
    let warning = diags
        .iter()
        .find(|d| d["code"] == "W0701")
        .unwrap_or_else(|| panic!("a W0701 warning in {diags:#?}"));
    assert_eq!(warning["severity"], 2, "{warning:#}");
    assert!(
        warning["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("workload `scoring` can run on no target")),
        "{warning:#}"
    );
    let related = warning["relatedInformation"].as_array().expect("related");
    assert!(
        related.iter().any(|r| r["location"]["uri"] == uri(&targets)
            && r["message"]
                .as_str()
                .is_some_and(|m| m.contains("`hpc` comes closest: needs 8GiB of memory"))),
        "{related:#?}"
    );
    change(&mut client, &targets, 3, json!([{"text": TARGETS}]));
    assert_eq!(client.diagnostics(&uri(&workloads)), Vec::<Value>::new());
    client.shutdown();
}

/// A what-if file of the spec directory (`NAME.what-if.berth`) is checked against the spec
/// as it is typed: its own mistakes are published on it, and a spec file's mistake the change
/// alone causes is published on it too, at its start, linking to the place.
#[test]
fn what_if_files_are_checked_against_their_spec() {
    let (dir, _targets, workloads) = spec_dir();
    let workloads_path = workloads.clone();
    let with_fallback = WORKLOADS.replace(
        "  targets = [hpc]\n",
        "  targets = [hpc]\n  fallback = [hpc]\n",
    );
    assert_ne!(with_fallback, WORKLOADS);
    let what_if = dir.path().join("hpc-down.what-if.berth");
    let mut client = Client::start(&[]);
    open(&mut client, &what_if, "target hpc2 { offline = true }\n");
    let diags = client.diagnostics(&uri(&what_if));
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0]["code"], "E0414");
    assert!(
        diags[0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("the base spec has no target `hpc2` to take offline")),
        "{diags:#?}"
    );
    // The spec's own files are not touched by the what-if file.
    assert_eq!(client.diagnostics(&uri(&workloads)), Vec::<Value>::new());
    // Taking `hpc` offline empties `placement scoring { targets = [hpc] }`: no mistake. A
    // replica count that is not a number is one, in the what-if file.
    change(
        &mut client,
        &what_if,
        2,
        json!([{"text": "target hpc { offline = true }\nworkload scoring { replicas = \"two\" }\n"}]),
    );
    let diags = client.diagnostics(&uri(&what_if));
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0]["code"], "E0304");
    assert_eq!(
        diags[0]["range"]["start"],
        json!({"line": 1, "character": 30})
    );
    // With `targets = [other]`, the spec's own `fallback = [hpc]` is no longer among the
    // targets: a mistake of `workloads.berth`, only with this change.
    open(&mut client, &workloads_path, &with_fallback);
    change(
        &mut client,
        &what_if,
        3,
        json!([{"text": "placement scoring { targets = [other] }\ntarget other {\n  class = datacenter  runtime = local  connectivity = connected  cpu = 8  memory = 8GiB\n}\n"}]),
    );
    let diags = client.diagnostics(&uri(&what_if));
    let e0408 = diags
        .iter()
        .find(|d| d["code"] == "E0408")
        .unwrap_or_else(|| panic!("E0408 in {diags:#?}"));
    assert!(
        e0408["message"]
            .as_str()
            .is_some_and(|m| m.contains("workloads.berth`: fallback `hpc`")
                && m.contains("only with the changes of the what-if file")),
        "{e0408:#}"
    );
    assert_eq!(e0408["range"]["start"], json!({"line": 0, "character": 0}));
    assert_eq!(
        e0408["relatedInformation"][0]["location"]["uri"],
        uri(&workloads_path).as_str()
    );
    client.shutdown();
}

#[test]
fn duplicate_definitions_carry_related_information() {
    let (_dir, targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(
        &mut client,
        &workloads,
        &format!("{WORKLOADS}\nconst hpc = 1\n"),
    );
    let diags = client.diagnostics(&uri(&workloads));
    let dup = diags
        .iter()
        .find(|d| d["code"] == "E0202")
        .expect("a duplicate");
    let related = &dup["relatedInformation"][0]["location"];
    assert_eq!(related["uri"], uri(&targets).as_str());
    assert_eq!(
        related["range"]["start"],
        json!({"line": 3, "character": 7})
    );
    client.shutdown();
}

#[test]
fn requests_during_garbled_edits_are_answered() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(&mut client, &workloads, WORKLOADS);
    let garbage = [
        "workload {{{ \"unterminated",
        "= = = ]]] )",
        "\u{0}\u{feff}𝄞",
        "policy p { deny when",
        "",
    ];
    for (v, text) in garbage.iter().enumerate() {
        change(
            &mut client,
            &workloads,
            v as i32 + 2,
            json!([{"text": format!("{WORKLOADS}{text}")}]),
        );
        for (line, character) in [(0, 0), (4, 5), (20, 3), (99, 99)] {
            for method in [
                "textDocument/hover",
                "textDocument/definition",
                "textDocument/completion",
                "textDocument/references",
            ] {
                let mut params = position(&workloads, line, character);
                if method == "textDocument/references" {
                    params["context"] = json!({"includeDeclaration": true});
                }
                let r = client.request(method, params);
                assert!(r.get("error").is_none(), "{method}: {r}");
            }
        }
        let r = client.request(
            "textDocument/semanticTokens/full",
            json!({"textDocument": {"uri": uri(&workloads)}}),
        );
        assert!(r.get("error").is_none(), "{r}");
    }
    client.shutdown();
}

#[test]
fn a_panic_is_answered_with_an_error_and_the_server_keeps_serving() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[("BERTH_LSP_TEST_PANIC", "1")]);
    let r = client.request("berth/testPanic", Value::Null);
    assert_eq!(r["error"]["code"], -32603, "{r}");
    open(&mut client, &workloads, WORKLOADS);
    let r = client.request("textDocument/hover", position(&workloads, 10, 3));
    assert!(
        r["result"]["contents"]["value"]
            .as_str()
            .expect("hover")
            .contains("replicas"),
        "{r}"
    );
    client.shutdown();
}

#[test]
fn hover_definition_references_and_completion() {
    let (_dir, targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(&mut client, &workloads, WORKLOADS);
    // Hover on the workload's name: its docs and where the plan puts it.
    let r = client.request("textDocument/hover", position(&workloads, 3, 11));
    let text = r["result"]["contents"]["value"]
        .as_str()
        .expect("hover")
        .to_string();
    assert!(text.contains("für Zahlungen"), "{text}");
    assert!(text.contains("on `hpc`, pool `h100` (H100)"), "{text}");
    // Hover on an accelerator.
    let r = client.request("textDocument/hover", position(&workloads, 12, 19));
    let text = r["result"]["contents"]["value"]
        .as_str()
        .expect("hover")
        .to_string();
    assert!(
        text.contains("family: `hopper`") && text.contains("memory: 80GB"),
        "{text}"
    );

    // Definition: into the other file, and into the standard library's virtual document.
    let r = client.request("textDocument/definition", position(&workloads, 18, 14));
    assert_eq!(r["result"]["uri"], uri(&targets).as_str(), "{r}");
    assert_eq!(
        r["result"]["range"]["start"],
        json!({"line": 3, "character": 7})
    );
    let r = client.request("textDocument/definition", position(&workloads, 12, 19));
    assert_eq!(r["result"]["uri"], "berth-std:///gpu.berth", "{r}");
    let std = client.request("berth/stdSource", json!({"uri": "berth-std:///gpu.berth"}));
    let std_text = std["result"].as_str().expect("std text");
    let line = r["result"]["range"]["start"]["line"]
        .as_u64()
        .expect("line") as usize;
    assert!(std_text.lines().nth(line).expect("line").contains("H100"));

    // References of the target from its definition: the definition and the placement's use.
    let mut params = position(&targets, 3, 8);
    params["context"] = json!({"includeDeclaration": true});
    let r = client.request("textDocument/references", params);
    let uris: Vec<&str> = r["result"]
        .as_array()
        .expect("list")
        .iter()
        .map(|l| l["uri"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(uris, vec![uri(&targets).as_str(), uri(&workloads).as_str()]);

    // Completion of an enum value after `kind = `.
    let edited = WORKLOADS.replace("  kind     = service\n", "  kind     = \n");
    change(&mut client, &workloads, 2, json!([{"text": edited}]));
    let r = client.request("textDocument/completion", position(&workloads, 6, 13));
    let labels: Vec<&str> = r["result"]
        .as_array()
        .expect("list")
        .iter()
        .map(|c| c["label"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(labels, vec!["service", "batch", "notebook", "agent"]);
    // Enumeration members are announced as such (LSP `CompletionItemKind.EnumMember`).
    assert_eq!(r["result"][0]["kind"], 20, "{r}");
    client.shutdown();
}

#[test]
fn semantic_tokens_are_encoded_relative_to_the_previous_token() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(&mut client, &workloads, WORKLOADS);
    let r = client.request(
        "textDocument/semanticTokens/full",
        json!({"textDocument": {"uri": uri(&workloads)}}),
    );
    let data: Vec<u64> = r["result"]["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    // Decode (delta line, delta start, length, type, modifiers) into absolute positions.
    let (mut line, mut start) = (0, 0);
    let mut tokens = Vec::new();
    for t in data.chunks(5) {
        if t[0] > 0 {
            start = 0;
        }
        line += t[0];
        start += t[1];
        tokens.push((line, start, t[2], t[3]));
    }
    // The legend: keyword, definition, property, number, string, comment, operator.
    let (keyword, definition, property, comment) = (0, 1, 2, 5);
    for expected in [
        (0, 0, 3, keyword),    // `use`
        (2, 0, 36, comment),   // the doc comment: 36 UTF-16 units (37 bytes, for `ü`)
        (3, 0, 8, keyword),    // `workload`
        (3, 9, 7, definition), // `scoring`
        (10, 2, 8, property),  // `replicas`
    ] {
        assert!(tokens.contains(&expected), "{expected:?} in {tokens:?}");
    }
    client.shutdown();
}

/// Formatting a 150,000-element list (which the checker accepts) is answered, and the
/// server keeps serving: the formatter's layout document used to be a chain as deep as the
/// list, whose drop overflowed the server thread's stack and killed the process.
#[test]
fn formatting_a_very_long_list_does_not_kill_the_server() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    let list = format!("const l = [{}]\n", vec!["1"; 150_000].join(", "));
    open(&mut client, &workloads, &list);
    let r = client.request("textDocument/formatting", json!({"textDocument": {"uri": uri(&workloads)}, "options": {"tabSize": 2, "insertSpaces": true}}));
    let text = r["result"][0]["newText"].as_str().unwrap_or_default();
    assert_eq!(text.lines().count(), 150_002, "{}", &r.to_string()[..200]);
    let r = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri(&workloads)}}),
    );
    assert!(r["result"].is_array(), "{r}");
    client.shutdown();
}

#[test]
fn formatting_symbols_and_quick_fixes() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    let messy = "const   a=1\nworkload w {\n  replica = 2\n}\n";
    open(&mut client, &workloads, messy);
    let r = client.request("textDocument/formatting", json!({"textDocument": {"uri": uri(&workloads)}, "options": {"tabSize": 2, "insertSpaces": true}}));
    let edit = &r["result"][0];
    assert_eq!(
        edit["newText"], "const a = 1\n\nworkload w {\n  replica = 2\n}\n",
        "{r}"
    );
    assert_eq!(edit["range"]["end"], json!({"line": 4, "character": 0}));

    let r = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri(&workloads)}}),
    );
    let names: Vec<&str> = r["result"]
        .as_array()
        .expect("list")
        .iter()
        .map(|s| s["name"].as_str().unwrap_or(""))
        .collect();
    assert!(names.contains(&"a") && names.contains(&"w"), "{r}");

    let r = client.request("textDocument/codeAction", json!({"textDocument": {"uri": uri(&workloads)}, "range": {"start": {"line": 2, "character": 3}, "end": {"line": 2, "character": 3}}, "context": {"diagnostics": []}}));
    let action = &r["result"][0];
    assert_eq!(action["title"], "replace with `replicas`", "{r}");
    let edits = &action["edit"]["changes"][uri(&workloads)];
    assert_eq!(edits[0]["newText"], "replicas");
    assert_eq!(
        edits[0]["range"]["start"],
        json!({"line": 2, "character": 2})
    );
    client.shutdown();
}

/// Issue 7's benchmark: a 5,000-line spec in 10 files; medians over 50 one-line edits of the
/// time to diagnostics of every file (the edited file's publication comes last), and of
/// completion and hover. Run with
/// `cargo test -p berth-runtime --test lsp -- --ignored --nocapture lsp_latency`; set
/// `BERTH_BIN` to measure another binary (a release build).
#[test]
#[ignore = "benchmark: run by hand, figures in docs/performance.md"]
fn lsp_latency() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut paths = Vec::new();
    std::fs::write(dir.path().join("a_targets.berth"), TARGETS).expect("write");
    paths.push(dir.path().join("a_targets.berth"));
    let body = WORKLOADS.split("placement").next().unwrap_or(WORKLOADS);
    let body = body.strip_prefix("use std.gpu.H100\n").unwrap_or(body);
    let mut lines = TARGETS.lines().count();
    for f in 0..9 {
        let mut text = String::from("use std.gpu.H100\n");
        let mut i = 0;
        while text.lines().count() < 540 {
            text.push_str(&body.replace("workload scoring", &format!("workload w{f}_{i}")));
            i += 1;
        }
        lines += text.lines().count();
        let path = dir.path().join(format!("w{f}.berth"));
        std::fs::write(&path, &text).expect("write");
        paths.push(path);
    }
    eprintln!("{lines} lines in {} files", paths.len());
    let edited = paths[5].clone();
    let text = std::fs::read_to_string(&edited).expect("read");
    let mut client = Client::start(&[]);
    open(&mut client, &edited, &text);
    // Every file is published once; the opened one last.
    client.diagnostics(&uri(&edited));
    client.pending.clear();
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (mut diags, mut completion, mut hover) = (Vec::new(), Vec::new(), Vec::new());
    for v in 0..50 {
        // Edit the `replicas` value of one workload (one line), alternating 1 and 2.
        let edit = json!([{"range": {"start": {"line": 10, "character": 13}, "end": {"line": 10, "character": 14}}, "text": format!("{}", 1 + v % 2)}]);
        // The edited file is published last, once every file's diagnostics are current.
        let t = Instant::now();
        change(&mut client, &edited, v + 2, edit);
        let d = client.diagnostics(&uri(&edited));
        diags.push(t.elapsed());
        assert!(d.is_empty(), "{d:?}");
        let t = Instant::now();
        let r = client.request("textDocument/completion", position(&edited, 6, 13));
        completion.push(t.elapsed());
        assert!(r["result"].as_array().is_some_and(|a| !a.is_empty()), "{r}");
        let t = Instant::now();
        let r = client.request("textDocument/hover", position(&edited, 10, 4));
        hover.push(t.elapsed());
        assert!(r["result"].is_object(), "{r}");
    }
    let t = Instant::now();
    let r = client.request("textDocument/hover", position(&edited, 3, 11));
    let placement = t.elapsed();
    assert!(r["result"].is_object(), "{r}");
    eprintln!(
        "median of 50: diagnostics {:?}, completion {:?}, hover {:?}; one workload hover with placement {placement:?}",
        median(diags),
        median(completion),
        median(hover)
    );
    if let Some(cpu) = cpu_time(client.child.id()) {
        eprintln!("server CPU time (user + system) over the whole run: {cpu:?}");
    }
    client.shutdown();
}

/// The CPU time process `pid` has used so far, from `/proc` (Linux only; `None` elsewhere).
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) in parentheses; utime and stime
    // are fields 14 and 15, in clock ticks (100 per second on Linux).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// A workload hover runs the planner on a thread of its own: an edit sent right behind it is
/// handled and its diagnostics published, and the hover is still answered (about the spec
/// as it was when the hover arrived).
#[test]
fn a_placement_hover_does_not_hold_up_the_edits_behind_it() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(&mut client, &workloads, WORKLOADS);
    let uri = uri(&workloads);
    assert!(client.diagnostics(&uri).is_empty());
    let hover_id = 9_000;
    client.send(&json!({
        "jsonrpc": "2.0", "id": hover_id, "method": "textDocument/hover",
        "params": position(&workloads, 3, 11),
    }));
    change(
        &mut client,
        &workloads,
        2,
        json!([{ "text": format!("{WORKLOADS}\nworkload broken {{ replica = 2 }}\n") }]),
    );
    let diagnostics = client.diagnostics(&uri);
    assert!(
        !diagnostics.is_empty(),
        "the edit behind the hover was handled"
    );
    let hover = loop {
        if let Some(i) = client
            .pending
            .iter()
            .position(|m| m["id"] == json!(hover_id))
        {
            break client.pending.remove(i);
        }
        let msg = client.receive();
        client.pending.push(msg);
    };
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .expect("hover");
    assert!(text.contains("on `hpc`, pool `h100` (H100)"), "{text}");
    client.shutdown();
}

impl Client {
    /// Writes bytes as they are, framing included.
    fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The next message (received now or earlier) that `wanted` accepts.
    fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            if let Some(i) = self.pending.iter().position(&wanted) {
                return self.pending.remove(i);
            }
            let msg = self.receive();
            self.pending.push(msg);
        }
    }

    /// Everything that arrives within `quiet`, into `pending`.
    fn collect_for(&mut self, quiet: Duration) {
        while let Ok(msg) = self.incoming.recv_timeout(quiet) {
            self.pending.push(msg);
        }
    }
}

fn frame(body: &str) -> String {
    format!("Content-Length: {}\r\n\r\n{body}", body.len())
}

/// The peak resident memory of process `pid` in KiB, from `/proc` (Linux only).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn hover_works(client: &mut Client, path: &Path) {
    let r = client.request("textDocument/hover", position(path, 10, 4));
    assert!(r["result"]["contents"].is_object(), "{r}");
}

/// A body that is not JSON is answered with `Parse error`, JSON that is not a message with
/// `Invalid Request` (with its `id` when it has one), garbage between messages is skipped,
/// and the server goes on answering.
#[test]
fn malformed_messages_are_answered_with_errors_and_the_server_keeps_serving() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(&mut client, &workloads, WORKLOADS);
    client.send_raw(frame("{\"jsonrpc\": \"2.0\", \"id\": 1, oops").as_bytes());
    let parse = client.wait_for(|m| m["error"]["code"] == -32700);
    assert_eq!(parse["id"], Value::Null, "{parse}");
    client.send_raw(frame(r#"{"jsonrpc":"2.0","id":4242,"params":{}}"#).as_bytes());
    let invalid = client.wait_for(|m| m["id"] == 4242);
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    client.send_raw(frame(r#"[1, 2, 3]"#).as_bytes());
    let batch = client.wait_for(|m| m["error"]["code"] == -32600);
    assert_eq!(batch["id"], Value::Null, "{batch}");
    // Headers that are garbage, a header line of a megabyte, a bad length: skipped.
    client.send_raw(b"hello there\r\n\r\nContent-Length: many\r\n\r\n");
    client.send_raw(format!("X-Long: {}\r\n\r\n", "x".repeat(1 << 20)).as_bytes());
    hover_works(&mut client, &workloads);
    client.shutdown();
}

/// A message over the 64 MiB limit is skipped as it arrives, never held: its request is
/// answered with an error, the message behind it is read, and the server's peak memory stays
/// far below the declared size. A declared 10 GB is answered as soon as its `id` is seen.
#[test]
fn a_too_large_message_is_skipped_without_being_allocated() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    open(&mut client, &workloads, WORKLOADS);
    hover_works(&mut client, &workloads);
    let declared: usize = 64 * 1024 * 1024 + 1;
    let head = r#"{"jsonrpc":"2.0","id":88,"method":"textDocument/hover","params":{"pad":""#;
    client.send_raw(format!("Content-Length: {declared}\r\n\r\n{head}").as_bytes());
    let chunk = vec![b' '; 1 << 20];
    let mut left = declared - head.len();
    while left > 0 {
        let n = left.min(chunk.len());
        client.send_raw(&chunk[..n]);
        left -= n;
    }
    let too_large = client.wait_for(|m| m["id"] == 88);
    assert_eq!(too_large["error"]["code"], -32600, "{too_large}");
    hover_works(&mut client, &workloads);
    // 10 GB declared: answered from the first bytes, without waiting for the rest.
    let head = r#"{"jsonrpc":"2.0","id":89,"method":"textDocument/hover","params":{"pad":""#;
    let padding = " ".repeat(8192);
    client.send_raw(format!("Content-Length: 10000000000\r\n\r\n{head}{padding}").as_bytes());
    let too_large = client.wait_for(|m| m["id"] == 89);
    assert_eq!(too_large["error"]["code"], -32600, "{too_large}");
    if let Some(peak) = peak_rss_kib(client.child.id()) {
        assert!(peak < 60 * 1024, "peak resident memory {peak} KiB");
    }
    assert!(client.child.try_wait().expect("wait").is_none(), "alive");
    let _ = client.child.kill();
    let _ = client.child.wait();
}

/// A `didChange` for a document that was never opened is ignored: the file on disk counts.
/// `didClose` of an edited document reverts to the file on disk.
#[test]
fn a_change_to_a_document_never_opened_is_ignored_and_close_reverts_to_disk() {
    let (_dir, targets, workloads) = spec_dir();
    let mut client = Client::start(&[]);
    change(
        &mut client,
        &workloads,
        2,
        json!([{"text": "workload phantom { replica = 2 }\n"}]),
    );
    let symbols = |client: &mut Client| {
        let r = client.request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": uri(&workloads)}}),
        );
        r["result"].to_string()
    };
    let names = symbols(&mut client);
    assert!(
        names.contains("scoring") && !names.contains("phantom"),
        "{names}"
    );
    open(&mut client, &targets, TARGETS);
    assert_eq!(client.diagnostics(&uri(&workloads)), Vec::<Value>::new());
    // Opened, edited into errors, closed: back to the clean file on disk.
    let broken = format!("{WORKLOADS}\nworkload broken {{ replica = 2 }}\n");
    open(&mut client, &workloads, &broken);
    assert!(!client.diagnostics(&uri(&workloads)).is_empty());
    client.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri(&workloads)}}),
    );
    assert_eq!(client.diagnostics(&uri(&workloads)), Vec::<Value>::new());
    assert!(!symbols(&mut client).contains("broken"));
    client.shutdown();
}

/// A spec of `n` workloads in one file (about 370 bytes each).
fn many_workloads(n: usize) -> String {
    let body = WORKLOADS.split("placement").next().unwrap_or(WORKLOADS);
    let body = body.strip_prefix("use std.gpu.H100\n").unwrap_or(body);
    let mut text = String::from("use std.gpu.H100\n");
    for i in 0..n {
        text.push_str(&body.replace("workload scoring", &format!("workload w{i}")));
    }
    text
}

/// A spec directory of `targets.berth` and a `workloads.berth` of `n` workloads: the
/// directory, the workloads' path and text.
fn large_spec(n: usize) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("workloads.berth");
    std::fs::write(dir.path().join("targets.berth"), TARGETS).expect("write");
    let text = many_workloads(n);
    std::fs::write(&path, &text).expect("write");
    (dir, path, text)
}

/// `count` one-line edits (the `replicas` value of the first workload), versions
/// `first`.., in one write, as a fast typist's editor sends them.
fn burst(client: &mut Client, path: &Path, first: i32, count: i32) {
    let mut bytes = String::new();
    for v in first..first + count {
        let edit = json!([{"range": {"start": {"line": 10, "character": 13}, "end": {"line": 10, "character": 14}}, "text": format!("{}", 1 + v % 2)}]);
        let body = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": uri(path), "version": v}, "contentChanges": edit}});
        bytes.push_str(&frame(&body.to_string()));
    }
    client.send_raw(bytes.as_bytes());
}

/// The version of the next diagnostics published for `uri`, checking that no other
/// publication for it follows within a second (longer than any quiet period).
fn only_version_published(client: &mut Client, uri: &str) -> Value {
    let m = client.wait_for(|m| {
        m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
    });
    client.collect_for(Duration::from_secs(1));
    assert_eq!(publications(client, uri), Vec::<Value>::new());
    m["params"]["version"].clone()
}

fn publications(client: &Client, uri: &str) -> Vec<Value> {
    client
        .pending
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri)
        .map(|m| m["params"]["version"].clone())
        .collect()
}

/// Edits are debounced: 20 quick edits of a large document are compiled once, and published
/// once, for the last version; a hover sent right behind them waits for that one compile, not
/// for twenty.
#[test]
fn quick_edits_are_compiled_once() {
    let (_dir, path, text) = large_spec(1500);
    let uri = uri(&path);
    let mut client = Client::start(&[]);
    open(&mut client, &path, &text);
    client.diagnostics(&uri);
    client.pending.clear();
    burst(&mut client, &path, 2, 20);
    // The only publication after the edits is the last version's.
    assert_eq!(only_version_published(&mut client, &uri), 21);
    client.pending.clear();
    // With a hover behind the edits: it is answered about the last version, compiled once.
    burst(&mut client, &path, 22, 20);
    let r = client.request("textDocument/hover", position(&path, 10, 4));
    assert!(r["result"]["contents"].is_object(), "{r}");
    client.collect_for(Duration::from_secs(1));
    assert_eq!(publications(&client, &uri), [json!(41)]);
    client.shutdown();
}

/// `$/cancelRequest` for a request still waiting behind a busy loop answers it with
/// `RequestCancelled` (-32800) instead of running it.
#[test]
fn a_cancelled_request_is_answered_with_request_cancelled() {
    let (_dir, _targets, workloads) = spec_dir();
    let mut client = Client::start(&[("BERTH_LSP_TEST_PANIC", "1")]);
    open(&mut client, &workloads, WORKLOADS);
    let symbols = json!({"textDocument": {"uri": uri(&workloads)}});
    let messages = [
        json!({"jsonrpc": "2.0", "id": 500, "method": "berth/testSleep", "params": 500}),
        json!({"jsonrpc": "2.0", "id": 501, "method": "textDocument/documentSymbol", "params": symbols}),
        json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 501}}),
    ];
    let bytes: String = messages.iter().map(|m| frame(&m.to_string())).collect();
    client.send_raw(bytes.as_bytes());
    let cancelled = client.wait_for(|m| m["id"] == 501);
    assert_eq!(cancelled["error"]["code"], -32800, "{cancelled}");
    hover_works(&mut client, &workloads);
    client.shutdown();
}

/// Issue 17's benchmark: 20 quick one-line edits of a 3 MB document (8,000 workloads), sent
/// in one write, then a hover; prints the hover's latency (median of 5 bursts) and how many
/// diagnostics publications the bursts caused. Before debouncing, the hover waited for 20
/// compiles. Run with
/// `cargo test -p berth-runtime --test lsp -- --ignored --nocapture lsp_edit_burst`; set
/// `BERTH_BIN` to measure another binary (a release build).
#[test]
#[ignore = "benchmark: run by hand, figures in docs/performance.md"]
fn lsp_edit_burst() {
    let (_dir, path, text) = large_spec(8000);
    let uri = uri(&path);
    let mut client = Client::start(&[]);
    let t = Instant::now();
    open(&mut client, &path, &text);
    client.diagnostics(&uri);
    eprintln!(
        "{} bytes; open to diagnostics {:?}",
        text.len(),
        t.elapsed()
    );
    client.pending.clear();
    let mut latencies = Vec::new();
    for round in 0..5 {
        let t = Instant::now();
        burst(&mut client, &path, 2 + round * 20, 20);
        let r = client.request("textDocument/hover", position(&path, 10, 4));
        latencies.push(t.elapsed());
        assert!(r["result"]["contents"].is_object(), "{r}");
    }
    client.collect_for(Duration::from_secs(1));
    let published = publications(&client, &uri).len();
    latencies.sort();
    eprintln!(
        "20 edits then a hover, 5 times: hover answered after {:?} (median; min {:?}, max {:?}); {published} publications for 100 edits",
        latencies[2], latencies[0], latencies[4]
    );
    client.shutdown();
}

/// A compile that an edit supersedes while it runs is not published: a 3 MB document is
/// opened (its compile takes seconds in a debug build), edited 200 ms later, and the only
/// publication is the edited version's.
#[test]
fn a_compile_superseded_by_an_edit_is_not_published() {
    let (_dir, path, text) = large_spec(8000);
    let uri = uri(&path);
    let mut client = Client::start(&[]);
    open(&mut client, &path, &text);
    std::thread::sleep(Duration::from_millis(200));
    burst(&mut client, &path, 2, 1);
    assert_eq!(only_version_published(&mut client, &uri), 2);
    client.shutdown();
}

/// `$/cancelRequest` for a hover being computed on its thread (a workload hover of a spec of
/// 8,000 workloads runs the planner over all of them) answers it with `RequestCancelled` at
/// once, and the thread's own answer is dropped: the request gets exactly one response.
#[test]
fn a_hover_in_progress_is_cancelled() {
    let (_dir, path, text) = large_spec(8000);
    let uri = uri(&path);
    let mut client = Client::start(&[]);
    open(&mut client, &path, &text);
    client.diagnostics(&uri);
    let hover = json!({"jsonrpc": "2.0", "id": 700, "method": "textDocument/hover", "params": position(&path, 3, 11)});
    client.send(&hover);
    std::thread::sleep(Duration::from_millis(100));
    client.notify("$/cancelRequest", json!({"id": 700}));
    let cancelled = client.wait_for(|m| m["id"] == 700);
    assert_eq!(cancelled["error"]["code"], -32800, "{cancelled}");
    // Shutting down waits for the hover's thread; its answer never comes.
    let r = client.request("shutdown", Value::Null);
    assert!(r.get("error").is_none(), "{r}");
    assert!(!client.pending.iter().any(|m| m["id"] == 700));
    client.notify("exit", Value::Null);
    let mut rest = Vec::new();
    while let Ok(m) = client.incoming.recv_timeout(TIMEOUT) {
        rest.push(m);
    }
    assert!(!rest.iter().any(|m| m["id"] == 700), "{rest:?}");
    assert!(client.child.wait().expect("wait").success());
}
