//! Request and notification handlers: decode the parameters, find the document's spec,
//! convert positions, ask the compiler's `ide` queries, encode the answer.

use super::STD_SOURCE_METHOD;
use super::convert::{self, std_file, std_uri};
use super::state::Server;
use berth_compiler::driver::format_file;
use berth_compiler::ide::stdlib;
use berth_compiler::ide::{self, Analysis, CompletionKind, SymbolKind, TokenClass};
use berth_compiler::source::{SourceFile, Span};
use lsp_server::{ErrorCode, Notification, Request, Response};
use lsp_types as lsp;
use lsp_types::notification::{
    DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument, DidOpenTextDocument,
    DidSaveTextDocument, Notification as _,
};
use lsp_types::request::{
    CodeActionRequest, Completion, DocumentSymbolRequest, Formatting, GotoDefinition, HoverRequest,
    References, Request as _, SemanticTokensFullRequest,
};
use serde::de::DeserializeOwned;
use std::path::PathBuf;

/// A method only served when `BERTH_LSP_TEST_PANIC` is set: it panics, so tests can check
/// that a panic is answered with an error and the server keeps serving.
const TEST_PANIC_METHOD: &str = "berth/testPanic";
/// Also only with `BERTH_LSP_TEST_PANIC`: sleeps for the milliseconds its parameter says.
const TEST_SLEEP_METHOD: &str = "berth/testSleep";

pub fn notification(server: &mut Server, n: Notification) {
    match n.method.as_str() {
        DidOpenTextDocument::METHOD => {
            if let Some(p) = params::<lsp::DidOpenTextDocumentParams>(&n) {
                let Some(path) = convert::uri_to_path(&p.text_document.uri) else {
                    return;
                };
                server.open.insert(path.clone(), p.text_document.text);
                server.set_version(&path, Some(p.text_document.version));
                server.touched(&path);
            }
        }
        DidChangeTextDocument::METHOD => {
            if let Some(p) = params::<lsp::DidChangeTextDocumentParams>(&n) {
                let Some(path) = convert::uri_to_path(&p.text_document.uri) else {
                    return;
                };
                // A change to a document never opened would become a phantom overriding the
                // file on disk.
                let Some(text) = server.open.get_mut(&path) else {
                    eprintln!(
                        "berth lsp: `didChange` for `{}`, which is not open, was ignored",
                        path.display()
                    );
                    return;
                };
                for change in p.content_changes {
                    apply_change(text, change);
                }
                server.set_version(&path, Some(p.text_document.version));
                server.touched(&path);
            }
        }
        DidCloseTextDocument::METHOD => {
            if let Some(p) = params::<lsp::DidCloseTextDocumentParams>(&n)
                && let Some(path) = convert::uri_to_path(&p.text_document.uri)
            {
                // The file on disk is what counts again.
                server.open.remove(&path);
                server.set_version(&path, None);
                server.touched(&path);
            }
        }
        DidSaveTextDocument::METHOD => {
            if let Some(p) = params::<lsp::DidSaveTextDocumentParams>(&n)
                && let Some(path) = convert::uri_to_path(&p.text_document.uri)
            {
                server.touched(&path);
            }
        }
        DidChangeWatchedFiles::METHOD => {
            if let Some(p) = params::<lsp::DidChangeWatchedFilesParams>(&n) {
                for change in p.changes {
                    if let Some(path) = convert::uri_to_path(&change.uri) {
                        server.touched(&path);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The document an open, change or close notification is about (to tell a compile in
/// progress that it is stale), read without decoding the whole notification.
pub fn edited_path(n: &Notification) -> Option<PathBuf> {
    let edits = [
        DidOpenTextDocument::METHOD,
        DidChangeTextDocument::METHOD,
        DidCloseTextDocument::METHOD,
    ];
    if !edits.contains(&n.method.as_str()) {
        return None;
    }
    let uri = n.params.get("textDocument")?.get("uri")?.as_str()?;
    convert::uri_to_path(&uri.parse().ok()?)
}

fn params<P: DeserializeOwned>(n: &Notification) -> Option<P> {
    match serde_json::from_value(n.params.clone()) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("berth lsp: bad `{}` parameters: {e}", n.method);
            None
        }
    }
}

/// Applies one change (a range edit, or the whole text) to a document's text.
fn apply_change(text: &mut String, change: lsp::TextDocumentContentChangeEvent) {
    let Some(range) = change.range else {
        *text = change.text;
        return;
    };
    let start = convert::offset_in(text, range.start);
    let end = convert::offset_in(text, range.end).max(start);
    text.replace_range(start..end, &change.text);
}

pub fn request(server: &mut Server, req: Request) -> Response {
    let id = req.id.clone();
    let result = match req.method.as_str() {
        HoverRequest::METHOD => handle(req, |p: lsp::HoverParams| {
            hover(server, p.text_document_position_params)
        }),
        GotoDefinition::METHOD => handle(req, |p: lsp::GotoDefinitionParams| {
            definition(server, p.text_document_position_params)
        }),
        References::METHOD => handle(req, |p: lsp::ReferenceParams| {
            references(server, p.text_document_position)
        }),
        Completion::METHOD => handle(req, |p: lsp::CompletionParams| {
            completion(server, p.text_document_position)
        }),
        DocumentSymbolRequest::METHOD => handle(req, |p: lsp::DocumentSymbolParams| {
            symbols(server, p.text_document.uri)
        }),
        Formatting::METHOD => handle(req, |p: lsp::DocumentFormattingParams| {
            formatting(server, p.text_document.uri)
        }),
        SemanticTokensFullRequest::METHOD => handle(req, |p: lsp::SemanticTokensParams| {
            semantic_tokens(server, p.text_document.uri)
        }),
        CodeActionRequest::METHOD => {
            handle(req, |p: lsp::CodeActionParams| code_actions(server, p))
        }
        STD_SOURCE_METHOD => handle(req, |p: lsp::TextDocumentIdentifier| {
            std_file(&p.uri).map(|f| f.text)
        }),
        TEST_PANIC_METHOD if std::env::var_os("BERTH_LSP_TEST_PANIC").is_some() => {
            panic!("the test panic")
        }
        TEST_SLEEP_METHOD if std::env::var_os("BERTH_LSP_TEST_PANIC").is_some() => {
            // Keeps the loop busy, so that tests can queue messages behind a request.
            let ms = req.params.as_u64().unwrap_or(0).min(10_000);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            Ok(serde_json::Value::Null)
        }
        other => Err((
            ErrorCode::MethodNotFound,
            format!("`{other}` is not supported"),
        )),
    };
    match result {
        Ok(value) => Response::new_ok(id, value),
        Err((code, message)) => Response::new_err(id, code as i32, message),
    }
}

type Answer = Result<serde_json::Value, (ErrorCode, String)>;

/// Decodes a request's parameters, runs `f`, encodes its result.
fn handle<P: DeserializeOwned, R: serde::Serialize>(
    req: Request,
    f: impl FnOnce(P) -> R,
) -> Answer {
    let p: P = serde_json::from_value(req.params)
        .map_err(|e| (ErrorCode::InvalidParams, format!("bad parameters: {e}")))?;
    serde_json::to_value(f(p)).map_err(|e| (ErrorCode::InternalError, e.to_string()))
}

/// A document resolved to its analysis, file and text.
struct Doc<'a> {
    analysis: &'a Analysis,
    file: &'a SourceFile,
    /// Its spec's paths, to turn file ids back into URIs.
    paths: &'a [PathBuf],
}

/// Runs `f` on the document behind `uri`: a file of a spec, or a standard-library document.
fn with_doc<R>(
    server: &mut Server,
    uri: &lsp::Uri,
    f: impl FnOnce(Doc<'_>) -> Option<R>,
) -> Option<R> {
    if let Some(std) = std_file(uri) {
        let analysis = server.std_analysis();
        return f(Doc {
            analysis,
            file: &std,
            paths: &[],
        });
    }
    let path = convert::uri_to_path(uri)?;
    let spec = server.spec_of(&path)?;
    let id = spec.file_id(&path)?;
    f(Doc {
        analysis: &spec.analysis,
        file: spec.file(id)?,
        paths: &spec.paths,
    })
}

impl Doc<'_> {
    fn offset(&self, pos: lsp::Position) -> u32 {
        convert::offset(self.file, pos)
    }

    /// A span of this spec or of the standard library as a protocol location.
    fn location(&self, span: Span) -> Option<lsp::Location> {
        if stdlib::is_std(span.file) {
            let uri = std_uri(span.file)?;
            let std = stdlib::file(span.file)?;
            let file = SourceFile::new(span.file, std.name, std.text);
            return Some(lsp::Location::new(uri, convert::range(&file, span)));
        }
        let file = self.analysis.sources.get(span.file)?;
        let path = self.paths.get(span.file.0 as usize)?;
        Some(lsp::Location::new(
            convert::path_to_uri(path),
            convert::range(file, span),
        ))
    }
}

/// Answers a hover on a thread of its own when it is on a spec file: a workload hover runs
/// the placement engine, which must never hold up the edits and diagnostics behind it in the
/// message loop. Returns the response when it was answered here instead (standard-library
/// documents, bad parameters).
pub fn hover_off_the_loop(
    server: &mut Server,
    req: Request,
    sender: crossbeam_channel::Sender<lsp_server::Message>,
    in_flight: &super::InFlight,
) -> Option<Response> {
    let params: Option<lsp::HoverParams> = serde_json::from_value(req.params.clone()).ok();
    let spec_file = params.as_ref().and_then(|p| {
        let at = &p.text_document_position_params;
        std_file(&at.text_document.uri).is_none().then_some(())?;
        let path = convert::uri_to_path(&at.text_document.uri)?;
        let spec = server.spec_of(&path)?;
        let id = spec.file_id(&path)?;
        let offset = convert::offset(spec.file(id)?, at.position);
        Some((std::sync::Arc::clone(&spec.analysis), id, offset))
    });
    let Some((analysis, id, offset)) = spec_file else {
        return Some(request(server, req));
    };
    let request_id = req.id;
    in_flight.start(request_id.clone());
    let in_flight = in_flight.clone();
    std::thread::spawn(move || {
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // The runtime owns the clock: the placement shown is the plan as of now.
            let now = crate::commands::spec::now();
            let file = analysis.sources.get(id)?;
            let h = analysis.hover(id, offset, Some(now))?;
            Some(lsp::Hover {
                contents: lsp::HoverContents::Markup(lsp::MarkupContent {
                    kind: lsp::MarkupKind::Markdown,
                    value: h.markdown,
                }),
                range: Some(convert::range(file, h.span)),
            })
        }));
        let response = match answer {
            Ok(hover) => Response::new_ok(request_id, hover),
            Err(_) => {
                eprintln!("berth lsp: panic in a hover");
                Response::new_err(
                    request_id,
                    ErrorCode::InternalError as i32,
                    "internal error in `textDocument/hover`".into(),
                )
            }
        };
        // Unless `$/cancelRequest` answered it already. The client may be gone; there is no
        // one left to tell.
        if in_flight.finish(&response.id) {
            let _ = sender.send(response.into());
        }
    });
    None
}

fn hover(server: &mut Server, at: lsp::TextDocumentPositionParams) -> Option<lsp::Hover> {
    with_doc(server, &at.text_document.uri, |doc| {
        let offset = doc.offset(at.position);
        // The runtime owns the clock: the placement shown is the plan as of now.
        let now = crate::commands::spec::now();
        let h = doc.analysis.hover(doc.file.id, offset, Some(now))?;
        Some(lsp::Hover {
            contents: lsp::HoverContents::Markup(lsp::MarkupContent {
                kind: lsp::MarkupKind::Markdown,
                value: h.markdown,
            }),
            range: Some(convert::range(doc.file, h.span)),
        })
    })
}

fn definition(
    server: &mut Server,
    at: lsp::TextDocumentPositionParams,
) -> Option<lsp::GotoDefinitionResponse> {
    with_doc(server, &at.text_document.uri, |doc| {
        let span = doc
            .analysis
            .definition(doc.file.id, doc.offset(at.position))?;
        doc.location(span).map(lsp::GotoDefinitionResponse::Scalar)
    })
}

fn references(
    server: &mut Server,
    at: lsp::TextDocumentPositionParams,
) -> Option<Vec<lsp::Location>> {
    with_doc(server, &at.text_document.uri, |doc| {
        let spans = doc
            .analysis
            .references(doc.file.id, doc.offset(at.position));
        Some(spans.into_iter().filter_map(|s| doc.location(s)).collect())
    })
}

fn completion(
    server: &mut Server,
    at: lsp::TextDocumentPositionParams,
) -> Option<lsp::CompletionResponse> {
    with_doc(server, &at.text_document.uri, |doc| {
        let offset = doc.offset(at.position);
        let line_start = doc.offset(lsp::Position::new(at.position.line, 0)) as usize;
        let prefix = doc.file.text.get(line_start..offset as usize).unwrap_or("");
        let items = doc
            .analysis
            .completions(doc.file.id, offset, prefix)
            .into_iter()
            .map(|c| lsp::CompletionItem {
                label: c.label,
                kind: Some(match c.kind {
                    CompletionKind::Field => lsp::CompletionItemKind::FIELD,
                    CompletionKind::EnumMember => lsp::CompletionItemKind::ENUM_MEMBER,
                    CompletionKind::Name => lsp::CompletionItemKind::REFERENCE,
                    CompletionKind::Constructor => lsp::CompletionItemKind::CONSTRUCTOR,
                    CompletionKind::Keyword => lsp::CompletionItemKind::KEYWORD,
                }),
                detail: (!c.detail.is_empty()).then_some(c.detail),
                documentation: (!c.doc.is_empty()).then_some(lsp::Documentation::MarkupContent(
                    lsp::MarkupContent {
                        kind: lsp::MarkupKind::Markdown,
                        value: c.doc,
                    },
                )),
                ..Default::default()
            })
            .collect();
        Some(lsp::CompletionResponse::Array(items))
    })
}

fn symbols(server: &mut Server, uri: lsp::Uri) -> Option<lsp::DocumentSymbolResponse> {
    with_doc(server, &uri, |doc| {
        let out = doc
            .analysis
            .symbols(doc.file.id)
            .into_iter()
            .map(|s| symbol(doc.file, s))
            .collect();
        Some(lsp::DocumentSymbolResponse::Nested(out))
    })
}

#[allow(deprecated)] // `deprecated` is a required field of the protocol type.
fn symbol(file: &SourceFile, s: ide::Symbol) -> lsp::DocumentSymbol {
    lsp::DocumentSymbol {
        name: s.name,
        detail: None,
        kind: match s.kind {
            SymbolKind::Const => lsp::SymbolKind::CONSTANT,
            SymbolKind::Model => lsp::SymbolKind::CLASS,
            SymbolKind::Workload => lsp::SymbolKind::FUNCTION,
            SymbolKind::Target => lsp::SymbolKind::MODULE,
            SymbolKind::Placement => lsp::SymbolKind::EVENT,
            SymbolKind::Policy => lsp::SymbolKind::INTERFACE,
            SymbolKind::Field => lsp::SymbolKind::FIELD,
            SymbolKind::Block => lsp::SymbolKind::STRUCT,
        },
        tags: None,
        deprecated: None,
        range: convert::range(file, s.span),
        selection_range: convert::range(file, s.name_span),
        children: (!s.children.is_empty())
            .then(|| s.children.into_iter().map(|c| symbol(file, c)).collect()),
    }
}

/// The whole document rewritten by the `berth fmt` formatter; nothing for a document with
/// syntax errors (it cannot be rewritten faithfully) or already formatted.
fn formatting(server: &mut Server, uri: lsp::Uri) -> Option<Vec<lsp::TextEdit>> {
    with_doc(server, &uri, |doc| {
        let formatted = format_file(&doc.file.text).ok()?;
        if formatted == doc.file.text {
            return Some(Vec::new());
        }
        let end = convert::position(doc.file, doc.file.text.len() as u32);
        Some(vec![lsp::TextEdit::new(
            lsp::Range::new(lsp::Position::new(0, 0), end),
            formatted,
        )])
    })
}

pub fn semantic_legend() -> lsp::SemanticTokensLegend {
    let types = TokenClass::ALL.iter().map(|c| match c {
        TokenClass::Keyword => lsp::SemanticTokenType::KEYWORD,
        TokenClass::Definition => lsp::SemanticTokenType::TYPE,
        TokenClass::Property => lsp::SemanticTokenType::PROPERTY,
        TokenClass::Number => lsp::SemanticTokenType::NUMBER,
        TokenClass::String => lsp::SemanticTokenType::STRING,
        TokenClass::Comment => lsp::SemanticTokenType::COMMENT,
        TokenClass::Operator => lsp::SemanticTokenType::OPERATOR,
    });
    lsp::SemanticTokensLegend {
        token_types: types.collect(),
        token_modifiers: Vec::new(),
    }
}

fn semantic_tokens(server: &mut Server, uri: lsp::Uri) -> Option<lsp::SemanticTokensResult> {
    with_doc(server, &uri, |doc| {
        let parsed = doc
            .analysis
            .compilation
            .parsed
            .iter()
            .find(|p| p.ast.file == doc.file.id);
        let classes = ide::semantic_tokens(doc.file.id, &doc.file.text, parsed.map(|p| &p.ast));
        let mut data = Vec::new();
        let (mut last_line, mut last_start) = (0, 0);
        for (span, class) in classes {
            let token_type = TokenClass::ALL
                .iter()
                .position(|c| *c == class)
                .unwrap_or(0) as u32;
            // The protocol's tokens lie on one line: a multi-line token is cut at each line.
            for (line, start, length) in line_pieces(doc.file, span) {
                let delta_line = line - last_line;
                let delta_start = if delta_line == 0 {
                    start - last_start
                } else {
                    start
                };
                data.push(lsp::SemanticToken {
                    delta_line,
                    delta_start,
                    length,
                    token_type,
                    token_modifiers_bitset: 0,
                });
                (last_line, last_start) = (line, start);
            }
        }
        Some(lsp::SemanticTokensResult::Tokens(lsp::SemanticTokens {
            result_id: None,
            data,
        }))
    })
}

/// `(line, UTF-16 start, UTF-16 length)` of each line's piece of `span`.
fn line_pieces(file: &SourceFile, span: Span) -> Vec<(u32, u32, u32)> {
    let mut out = Vec::new();
    let mut start = span.start as usize;
    let end = span.end as usize;
    while start < end {
        let line_end = file.text[start..end].find('\n').map_or(end, |i| start + i);
        let a = convert::position(file, start as u32);
        let b = convert::position(file, line_end as u32);
        if b.character > a.character {
            out.push((a.line, a.character, b.character - a.character));
        }
        start = line_end + 1;
    }
    out
}

fn code_actions(server: &mut Server, p: lsp::CodeActionParams) -> Option<lsp::CodeActionResponse> {
    let uri = p.text_document.uri.clone();
    with_doc(server, &p.text_document.uri, |doc| {
        let wanted = doc.offset(p.range.start)..=doc.offset(p.range.end);
        let actions = doc
            .analysis
            .diagnostics()
            .iter()
            .filter(|d| d.primary.span.file == doc.file.id)
            .filter(|d| {
                let s = d.primary.span;
                s.start <= *wanted.end() && *wanted.start() <= s.end
            })
            .filter_map(|d| {
                let fix = ide::quick_fix(d)?;
                let edit = lsp::TextEdit::new(convert::range(doc.file, fix.span), fix.replacement);
                // The protocol type keys a map by URI; lsp-types' `Uri` is only flagged for
                // its lazily computed parts, which never change its ordering.
                #[allow(clippy::mutable_key_type)]
                let changes = [(uri.clone(), vec![edit])].into_iter().collect();
                Some(lsp::CodeActionOrCommand::CodeAction(lsp::CodeAction {
                    title: fix.title,
                    kind: Some(lsp::CodeActionKind::QUICKFIX),
                    is_preferred: Some(true),
                    edit: Some(lsp::WorkspaceEdit {
                        changes: Some(changes),
                        ..Default::default()
                    }),
                    ..Default::default()
                }))
            })
            .collect();
        Some(actions)
    })
}
