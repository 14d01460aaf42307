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
//! Edits are debounced: they record the new text, and a directory is recompiled once its
//! edits have been quiet for a moment, or first thing when a request about it arrives (a
//! request always sees every edit sent before it). Messages are read by `transport`, the
//! server's own framing reader, which answers malformed ones itself and bounds every size.
//!
//! Never crashes on any text or any bytes: a panic inside a handler is caught, logged on
//! stderr and answered with an `InternalError`; the server keeps serving. See
//! docs/editors.md, "Limits and hostile input".

mod convert;
mod handlers;
mod state;
mod transport;

use crate::report::Exit;
use crossbeam_channel::RecvTimeoutError;
use lsp_server::RequestId;
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types as lsp;
use state::Server;
use std::collections::{HashSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use convert::STD_SCHEME;
pub use transport::MAX_CONTENT_LENGTH;

/// Reads `input` as the server reads its stdin: the messages it would handle, and the error
/// responses its reader would send for bad ones. For the `lsp_framing` fuzz target.
pub fn read_frames(input: &[u8]) -> (Vec<Message>, Vec<serde_json::Value>) {
    let (mut messages, mut replies) = (Vec::new(), Vec::new());
    // Reading from memory cannot fail.
    let _ = transport::pump(
        &mut &input[..],
        |m| {
            messages.push(m);
            true
        },
        |r| replies.push(r),
        |_| {},
    );
    (messages, replies)
}

/// A request (answered with a custom method) that returns a standard-library virtual
/// document's text, for clients that cannot open `berth-std:` URIs by themselves.
pub const STD_SOURCE_METHOD: &str = "berth/stdSource";

/// Hovers are answered off the message loop (see `handlers::hover_off_the_loop`).
const HOVER: &str = <lsp_types::request::HoverRequest as lsp_types::request::Request>::METHOD;

const CANCEL: &str = <lsp::notification::Cancel as lsp::notification::Notification>::METHOD;

/// Runs the server on stdin/stdout until the client says `exit`.
pub fn main() -> Exit {
    let (connection, io_threads) = match transport::stdio() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("berth lsp: {e}");
            return Exit::Trouble;
        }
    };
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

/// Serves one connection: the handshake, then every message in order. Edits only record
/// the new text; a directory is recompiled once its edits have been quiet for a while
/// (`state::Server::touched`), or as soon as a request needs it.
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
    let mut inbox = Inbox {
        receiver: &connection.receiver,
        backlog: VecDeque::new(),
    };
    let hovers = InFlight::default();
    loop {
        let message = match inbox.next(&mut server) {
            Some(m) => m,
            None => return Exit::Clean,
        };
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
                let response = if inbox.cancels(&req.id) {
                    Some(cancelled(req.id))
                } else if req.method == HOVER {
                    handlers::hover_off_the_loop(
                        &mut server,
                        req,
                        connection.sender.clone(),
                        &hovers,
                    )
                } else {
                    Some(answer(&mut server, req))
                };
                if let Some(response) = response
                    && connection.sender.send(response.into()).is_err()
                {
                    return Exit::Trouble;
                }
            }
            Message::Notification(n) if n.method == CANCEL => {
                // A hover still being computed is answered now; its thread's answer is
                // dropped. Requests answered on the loop are answered already, or are
                // cancelled before they start (`Inbox::cancels`).
                if let Some(id) = cancel_id(&n)
                    && hovers.finish(&id)
                    && connection.sender.send(cancelled(id).into()).is_err()
                {
                    return Exit::Trouble;
                }
            }
            Message::Notification(n) => notify(&mut server, n),
            Message::Response(_) => {}
        }
    }
}

/// The messages to handle: those read ahead of the loop (to see a cancellation behind its
/// request, or an edit behind a compile), then the connection's.
struct Inbox<'a> {
    receiver: &'a crossbeam_channel::Receiver<Message>,
    backlog: VecDeque<Message>,
}

/// At most this many messages are read ahead.
const BACKLOG: usize = 256;

impl Inbox<'_> {
    /// The next message, compiling every directory whose quiet period ends first; `None`
    /// once the client is gone.
    fn next(&mut self, server: &mut Server) -> Option<Message> {
        loop {
            let now = Instant::now();
            if server.next_due().is_some_and(|due| due <= now) {
                for dir in server.due(now) {
                    server.refresh(&dir, |dir| self.edits(dir));
                }
                continue;
            }
            if let Some(m) = self.backlog.pop_front() {
                return Some(m);
            }
            let received = match server.next_due() {
                Some(due) => match self.receiver.recv_deadline(due) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return None,
                },
                None => self.receiver.recv().ok()?,
            };
            return Some(received);
        }
    }

    /// Reads ahead what has already arrived.
    fn read_ahead(&mut self) {
        while self.backlog.len() < BACKLOG {
            match self.receiver.try_recv() {
                Ok(m) => self.backlog.push_back(m),
                Err(_) => break,
            }
        }
    }

    /// Whether a `$/cancelRequest` for `id` has already arrived.
    fn cancels(&mut self, id: &RequestId) -> bool {
        self.read_ahead();
        self.backlog.iter().any(|m| {
            matches!(m, Message::Notification(n) if n.method == CANCEL && cancel_id(n).as_ref() == Some(id))
        })
    }

    /// Whether an edit of a document of directory `dir` has already arrived: a compile of
    /// `dir` that just finished is then stale, and not published.
    fn edits(&mut self, dir: &Path) -> bool {
        self.read_ahead();
        self.backlog.iter().any(|m| {
            let Message::Notification(n) = m else {
                return false;
            };
            handlers::edited_path(n).is_some_and(|p| p.parent() == Some(dir))
        })
    }
}

/// The request `$/cancelRequest` names.
fn cancel_id(n: &Notification) -> Option<RequestId> {
    let p: lsp::CancelParams = serde_json::from_value(n.params.clone()).ok()?;
    Some(match p.id {
        lsp::NumberOrString::Number(n) => RequestId::from(n),
        lsp::NumberOrString::String(s) => RequestId::from(s),
    })
}

fn cancelled(id: RequestId) -> Response {
    Response::new_err(
        id,
        ErrorCode::RequestCanceled as i32,
        "the request was cancelled".into(),
    )
}

/// Hover requests being answered on threads of their own: whichever of the thread and a
/// `$/cancelRequest` comes first answers.
#[derive(Clone, Default)]
pub struct InFlight(Arc<Mutex<HashSet<RequestId>>>);

impl InFlight {
    pub fn start(&self, id: RequestId) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
    }

    /// `true` for the first caller only: it answers the request.
    pub fn finish(&self, id: &RequestId) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id)
    }
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
