//! `berth lsp`: the language server, over stdio, on rust-analyzer's `lsp-server`.
//!
//! One thread handles every message in arrival order (edits are never reordered); the
//! compiler's own rayon parallelism does the heavy lifting inside each request. Hovers on a
//! spec file are the exception: they run on a thread of their own over the analysis of the
//! moment (an `Arc`), because a workload hover runs the placement engine, and that must
//! never delay the diagnostics of the edits behind it. The runtime
//! owns I/O here — documents, files of the spec directory, the clock for placement hovers —
//! and asks the compiler's pure `ide` queries everything else.
//!
//! Never crashes on any text: a panic inside a handler is caught, logged on stderr and
//! answered with an `InternalError`; the server keeps serving. See docs/editors.md.

mod convert;
mod handlers;
mod state;

use crate::report::Exit;
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types as lsp;
use state::Server;
use std::panic::{AssertUnwindSafe, catch_unwind};

pub use convert::STD_SCHEME;

/// A request (answered with a custom method) that returns a standard-library virtual
/// document's text, for clients that cannot open `berth-std:` URIs by themselves.
pub const STD_SOURCE_METHOD: &str = "berth/stdSource";

/// Hovers are answered off the message loop (see `handlers::hover_off_the_loop`).
const HOVER: &str = <lsp_types::request::HoverRequest as lsp_types::request::Request>::METHOD;

/// Runs the server on stdin/stdout until the client says `exit`.
pub fn main() -> Exit {
    let (connection, io_threads) = Connection::stdio();
    let exit = serve(&connection);
    drop(connection);
    match io_threads.join() {
        Ok(()) => exit,
        Err(e) => {
            eprintln!("berth lsp: {e}");
            Exit::Trouble
        }
    }
}

/// Serves one connection: the handshake, then every message in order.
pub fn serve(connection: &Connection) -> Exit {
    let capabilities = match serde_json::to_value(capabilities()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("berth lsp: {e}");
            return Exit::Trouble;
        }
    };
    if let Err(e) = connection.initialize(capabilities) {
        eprintln!("berth lsp: initialize failed: {e}");
        return Exit::Trouble;
    }
    let mut server = Server::new(connection.sender.clone());
    for message in &connection.receiver {
        match message {
            Message::Request(req) => {
                match connection.handle_shutdown(&req) {
                    Ok(true) => return Exit::Clean,
                    Ok(false) => {}
                    Err(e) => {
                        eprintln!("berth lsp: {e}");
                        return Exit::Trouble;
                    }
                }
                let response = if req.method == HOVER {
                    handlers::hover_off_the_loop(&mut server, req, connection.sender.clone())
                } else {
                    Some(answer(&mut server, req))
                };
                if let Some(response) = response
                    && connection.sender.send(response.into()).is_err()
                {
                    return Exit::Trouble;
                }
            }
            Message::Notification(n) => notify(&mut server, n),
            Message::Response(_) => {}
        }
    }
    Exit::Clean
}

/// Handles a request; a panic becomes an error response.
fn answer(server: &mut Server, req: Request) -> Response {
    let id = req.id.clone();
    let method = req.method.clone();
    match catch_unwind(AssertUnwindSafe(|| handlers::request(server, req))) {
        Ok(response) => response,
        Err(panic) => {
            let why = panic_text(&*panic);
            eprintln!("berth lsp: panic in `{method}`: {why}");
            server.recover();
            Response::new_err(
                id,
                ErrorCode::InternalError as i32,
                format!("internal error in `{method}`: {why}"),
            )
        }
    }
}

/// Handles a notification; a panic is logged and the notification dropped.
fn notify(server: &mut Server, n: Notification) {
    let method = n.method.clone();
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| handlers::notification(server, n))) {
        eprintln!("berth lsp: panic in `{method}`: {}", panic_text(&*panic));
        server.recover();
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

fn capabilities() -> lsp::ServerCapabilities {
    lsp::ServerCapabilities {
        position_encoding: Some(lsp::PositionEncodingKind::UTF16),
        text_document_sync: Some(lsp::TextDocumentSyncCapability::Options(
            lsp::TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(lsp::TextDocumentSyncKind::INCREMENTAL),
                save: Some(lsp::TextDocumentSyncSaveOptions::Supported(true)),
                ..Default::default()
            },
        )),
        hover_provider: Some(lsp::HoverProviderCapability::Simple(true)),
        definition_provider: Some(lsp::OneOf::Left(true)),
        references_provider: Some(lsp::OneOf::Left(true)),
        completion_provider: Some(lsp::CompletionOptions {
            trigger_characters: Some(vec!["=".into(), " ".into(), "[".into(), ".".into()]),
            ..Default::default()
        }),
        document_symbol_provider: Some(lsp::OneOf::Left(true)),
        document_formatting_provider: Some(lsp::OneOf::Left(true)),
        code_action_provider: Some(lsp::CodeActionProviderCapability::Options(
            lsp::CodeActionOptions {
                code_action_kinds: Some(vec![lsp::CodeActionKind::QUICKFIX]),
                ..Default::default()
            },
        )),
        semantic_tokens_provider: Some(
            lsp::SemanticTokensServerCapabilities::SemanticTokensOptions(
                lsp::SemanticTokensOptions {
                    legend: handlers::semantic_legend(),
                    full: Some(lsp::SemanticTokensFullOptions::Bool(true)),
                    range: None,
                    ..Default::default()
                },
            ),
        ),
        ..Default::default()
    }
}
