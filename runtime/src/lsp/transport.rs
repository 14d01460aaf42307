//! The server's own stdio transport: the framing of JSON-RPC messages (`Content-Length`
//! headers, then a body), hardened against hostile input. It replaces `lsp-server`'s stdio
//! threads, whose reader ends the server on the first malformed message and allocates
//! whatever length a header declares.
//!
//! - A header line is at most [`MAX_HEADER_LINE`] bytes; a longer one is skipped without being
//!   kept. Lines that are not `Name: value` headers are ignored, and a `Content-Length:` found
//!   inside such a line is still used, so the reader finds its footing again after garbage.
//! - A body is at most [`MAX_CONTENT_LENGTH`] bytes. A larger one is skipped (read and
//!   dropped in small pieces, never held); if its first [`ID_PREFIX`] bytes name a top-level
//!   `id`, that request is answered with an `Invalid Request` error at once.
//! - A body is never allocated up front: it grows as its bytes arrive.
//! - A body that is not JSON is answered with `-32700 Parse error`, JSON that is not a
//!   JSON-RPC message with `-32600 Invalid Request` (with its `id` when it has a usable one,
//!   `null` otherwise); the reader goes on with the next message.

use lsp_server::{Message, RequestId};
use serde_json::{Value, json};
use std::io::{self, BufRead, Read, Write};

/// The largest body accepted, in bytes (64 MiB): larger messages are skipped.
pub const MAX_CONTENT_LENGTH: u64 = 64 * 1024 * 1024;
/// The longest header line kept, in bytes; a longer line is skipped.
pub const MAX_HEADER_LINE: usize = 8 * 1024;
/// How much of a skipped body is kept to find its request `id`.
pub const ID_PREFIX: usize = 4 * 1024;

/// JSON-RPC's code for a body that is not JSON.
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC's code for JSON that is not a valid message.
pub const INVALID_REQUEST: i32 = -32600;

/// A message that could not be used: what to log, and what to answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a header block without `Content-Length` was ignored")]
    NoContentLength,
    #[error("`Content-Length: {value}` is not a length; the header block was ignored")]
    BadContentLength { value: String },
    #[error("a header line longer than {MAX_HEADER_LINE} bytes was skipped")]
    HeaderLineTooLong,
    #[error("a message of {declared} bytes is over the limit of {MAX_CONTENT_LENGTH} bytes")]
    TooLarge { declared: u64 },
    #[error("the message is not JSON: {reason}")]
    NotJson { reason: String },
    #[error("the message is not a JSON-RPC request, notification or response")]
    NotAMessage,
}

impl FrameError {
    /// The JSON-RPC error code the client is answered with; `None` for framing problems,
    /// where there is no message to answer.
    pub fn code(&self) -> Option<i32> {
        match self {
            FrameError::NoContentLength
            | FrameError::BadContentLength { .. }
            | FrameError::HeaderLineTooLong => None,
            FrameError::TooLarge { .. } | FrameError::NotAMessage => Some(INVALID_REQUEST),
            FrameError::NotJson { .. } => Some(PARSE_ERROR),
        }
    }
}

/// What the reader found next.
#[derive(Debug)]
pub enum Frame {
    Message(Message),
    /// A message that could not be used; `id` is its request's, when it could be recovered.
    /// For [`FrameError::TooLarge`], `skip` bytes of its body are still to be dropped.
    Bad {
        error: FrameError,
        id: Option<RequestId>,
        skip: u64,
    },
    /// The input ended.
    End,
}

/// Reads the next frame. Errors are only the input's own (a failed read).
pub fn read_frame(r: &mut impl BufRead) -> io::Result<Frame> {
    let mut length: Option<Result<u64, String>> = None;
    let mut started = false;
    loop {
        let line = match read_line(r)? {
            Line::End => return Ok(Frame::End),
            Line::TooLong => {
                return Ok(bad(FrameError::HeaderLineTooLong, None));
            }
            Line::Text(line) => line,
        };
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.is_empty() {
            if started {
                break;
            }
            // Blank lines between messages.
            continue;
        }
        started = true;
        if let Some(value) = content_length(line) {
            let value = String::from_utf8_lossy(value).trim().to_string();
            length = Some(value.parse::<u64>().map_err(|_| value));
        }
    }
    let declared = match length {
        None => return Ok(bad(FrameError::NoContentLength, None)),
        Some(Err(value)) => {
            let value: String = value.chars().take(64).collect();
            return Ok(bad(FrameError::BadContentLength { value }, None));
        }
        Some(Ok(n)) => n,
    };
    if declared > MAX_CONTENT_LENGTH {
        let mut prefix = Vec::new();
        let got = r.take(ID_PREFIX as u64).read_to_end(&mut prefix)? as u64;
        if got < (ID_PREFIX as u64).min(declared) {
            return Ok(Frame::End);
        }
        return Ok(Frame::Bad {
            error: FrameError::TooLarge { declared },
            id: top_level_id(&prefix),
            skip: declared - got,
        });
    }
    // Grows with what arrives: a declared length is never allocated up front.
    let mut body = Vec::new();
    if r.take(declared).read_to_end(&mut body)? as u64 != declared {
        return Ok(Frame::End);
    }
    Ok(match serde_json::from_slice::<Message>(&body) {
        Ok(message) => Frame::Message(message),
        Err(parse) => match serde_json::from_slice::<Value>(&body) {
            Ok(value) => bad(
                FrameError::NotAMessage,
                value.get("id").and_then(request_id),
            ),
            Err(_) => bad(
                FrameError::NotJson {
                    reason: parse.to_string(),
                },
                None,
            ),
        },
    })
}

fn bad(error: FrameError, id: Option<RequestId>) -> Frame {
    Frame::Bad { error, id, skip: 0 }
}

/// Drops `n` bytes of input in small pieces; `false` if the input ended first.
pub fn skip(r: &mut impl Read, n: u64) -> io::Result<bool> {
    Ok(io::copy(&mut r.take(n), &mut io::sink())? == n)
}

/// Reads frames until the input ends or `deliver` returns `false`: messages go to
/// `deliver`, bad frames are logged through `log` and, when they have an error code,
/// answered through `reply` (a whole JSON-RPC response). This is the server's reader thread,
/// and what the `lsp_framing` fuzz target runs.
pub fn pump(
    r: &mut impl BufRead,
    mut deliver: impl FnMut(Message) -> bool,
    mut reply: impl FnMut(Value),
    mut log: impl FnMut(&FrameError),
) -> io::Result<()> {
    loop {
        match read_frame(r)? {
            Frame::End => return Ok(()),
            Frame::Message(m) => {
                if !deliver(m) {
                    return Ok(());
                }
            }
            Frame::Bad { error, id, skip: n } => {
                log(&error);
                if let Some(code) = error.code() {
                    reply(error_response(id, code, &error));
                }
                if n > 0 && !skip(r, n)? {
                    return Ok(());
                }
            }
        }
    }
}

/// A JSON-RPC error response; `id` is `null` when it could not be recovered.
pub fn error_response(id: Option<RequestId>, code: i32, error: &FrameError) -> Value {
    let id = id.map_or(Value::Null, |id| {
        serde_json::to_value(id).unwrap_or(Value::Null)
    });
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": error.to_string()}})
}

/// Writes one message's frame and flushes it.
pub fn write_frame(out: &mut impl Write, body: &str) -> io::Result<()> {
    write!(out, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    out.flush()
}

/// Messages read ahead of the loop that handles them (a little room, so a `$/cancelRequest`
/// can be seen behind the request it cancels).
const READ_AHEAD: usize = 16;

/// The reader and writer threads of [`stdio`].
pub struct IoThreads {
    writer: std::thread::JoinHandle<io::Result<()>>,
}

impl IoThreads {
    /// Waits for every message sent to be written. The reader is not waited for: it may be
    /// blocked on a client that never closes its end.
    pub fn join(self) -> io::Result<()> {
        self.writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the writer thread panicked")))
    }
}

/// A connection over stdin and stdout through this module's reader: the reader thread
/// answers bad messages itself (writing to stdout under its lock, a whole frame at a time)
/// and stops after `exit`.
pub fn stdio() -> io::Result<(lsp_server::Connection, IoThreads)> {
    let (to_loop, receiver) = crossbeam_channel::bounded::<Message>(READ_AHEAD);
    let (sender, to_client) = crossbeam_channel::unbounded::<Message>();
    std::thread::Builder::new()
        .name("berth-lsp-reader".into())
        .spawn(move || {
            let stdin = io::stdin();
            let result = pump(
                &mut stdin.lock(),
                |m| {
                    let exit = matches!(&m, Message::Notification(n) if n.method == "exit");
                    to_loop.send(m).is_ok() && !exit
                },
                |response| {
                    let _ = write_frame(&mut io::stdout().lock(), &response.to_string());
                },
                |e| eprintln!("berth lsp: {e}"),
            );
            if let Err(e) = result {
                eprintln!("berth lsp: reading stdin: {e}");
            }
        })?;
    let writer = std::thread::Builder::new()
        .name("berth-lsp-writer".into())
        .spawn(move || {
            for message in to_client {
                let body = serde_json::to_string(&Outgoing {
                    jsonrpc: "2.0",
                    message: &message,
                })?;
                write_frame(&mut io::stdout().lock(), &body)?;
            }
            Ok(())
        })?;
    Ok((
        lsp_server::Connection { sender, receiver },
        IoThreads { writer },
    ))
}

/// A message as written: `lsp-server`'s own, with the `jsonrpc` member.
#[derive(serde::Serialize)]
struct Outgoing<'a> {
    jsonrpc: &'static str,
    #[serde(flatten)]
    message: &'a Message,
}

enum Line {
    Text(Vec<u8>),
    TooLong,
    End,
}

/// One line (without its `\n`), at most [`MAX_HEADER_LINE`] bytes kept: the rest of a longer
/// line is read and dropped.
fn read_line(r: &mut impl BufRead) -> io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            // A last line without `\n` cannot be a header block's end: the input ended.
            return Ok(Line::End);
        }
        let (piece, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (available.get(..i).unwrap_or_default(), Some(i + 1)),
            None => (available, None),
        };
        if !too_long {
            if line.len() + piece.len() > MAX_HEADER_LINE {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(piece);
            }
        }
        let used = done.unwrap_or(available.len());
        r.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Text(line)
            });
        }
    }
}

/// The value of a `Content-Length:` header found in `line` (case-insensitive, anywhere in
/// the line, so that one glued behind garbage is still found).
fn content_length(line: &[u8]) -> Option<&[u8]> {
    const NAME: &[u8] = b"content-length:";
    let at = line
        .windows(NAME.len())
        .position(|w| w.eq_ignore_ascii_case(NAME))?;
    line.get(at + NAME.len()..)
}

/// A JSON-RPC `id` the server can answer: an integer that fits, or a string.
fn request_id(v: &Value) -> Option<RequestId> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(RequestId::from),
        Value::String(s) => Some(RequestId::from(s.clone())),
        _ => None,
    }
}

/// The `id` member of the top-level object that `prefix` starts, if it is complete within
/// the prefix and is an integer or a string without escapes. A scanner of JSON's structure
/// only: nested `id`s and strings holding `"id"` are not mistaken for it.
fn top_level_id(prefix: &[u8]) -> Option<RequestId> {
    let mut s = Scanner { b: prefix, i: 0 };
    s.ws();
    s.eat(b'{')?;
    loop {
        s.ws();
        let key = s.string()?;
        s.ws();
        s.eat(b':')?;
        s.ws();
        if key == b"id" {
            return s.id();
        }
        s.value()?;
        s.ws();
        match s.next()? {
            b',' => {}
            _ => return None,
        }
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    /// A string's raw bytes (escapes left as they are), after its opening quote.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match self.next()? {
                b'\\' => {
                    self.next()?;
                }
                b'"' => return self.b.get(start..self.i - 1),
                _ => {}
            }
        }
    }

    /// Skips one value of any kind; `None` if the prefix ends inside it.
    fn value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.i += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.i += 1;
                }
                b',' if depth == 0 => return Some(()),
                _ => self.i += 1,
            }
            if depth == 0 && matches!(self.peek(), Some(b',' | b'}')) {
                return Some(());
            }
        }
    }

    fn id(&mut self) -> Option<RequestId> {
        if self.peek()? == b'"' {
            let raw = self.string()?;
            if raw.contains(&b'\\') {
                return None;
            }
            return Some(RequestId::from(String::from_utf8(raw.to_vec()).ok()?));
        }
        let start = self.i;
        while matches!(self.peek()?, b'-' | b'0'..=b'9') {
            self.i += 1;
        }
        let digits = std::str::from_utf8(self.b.get(start..self.i)?).ok()?;
        digits.parse::<i32>().ok().map(RequestId::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> (Vec<Message>, Vec<Value>, Vec<FrameError>) {
        let (mut messages, mut replies, mut errors) = (Vec::new(), Vec::new(), Vec::new());
        pump(
            &mut &input[..],
            |m| {
                messages.push(m);
                true
            },
            |r| replies.push(r),
            |e| errors.push(e.clone()),
        )
        .expect("in memory");
        (messages, replies, errors)
    }

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    const HOVER: &str = r#"{"jsonrpc":"2.0","id":3,"method":"textDocument/hover","params":{}}"#;

    #[test]
    fn bad_bodies_are_answered_and_the_next_message_is_read() {
        let input = [
            frame("{not json"),
            frame(r#"{"jsonrpc":"2.0","id":5,"params":{}}"#),
            frame("[1,2]"),
            frame(HOVER),
        ]
        .concat();
        let (messages, replies, _) = frames(input.as_bytes());
        assert_eq!(messages.len(), 1, "{messages:?}");
        let codes: Vec<_> = replies
            .iter()
            .map(|r| (r["id"].clone(), r["error"]["code"].clone()))
            .collect();
        assert_eq!(
            codes,
            [
                (Value::Null, json!(PARSE_ERROR)),
                (json!(5), json!(INVALID_REQUEST)),
                (Value::Null, json!(INVALID_REQUEST)),
            ]
        );
    }

    #[test]
    fn garbage_headers_are_skipped_and_a_glued_content_length_is_found() {
        let long = "x".repeat(MAX_HEADER_LINE * 3);
        let input = format!(
            "{long}\r\nContent-Type: a\r\n\r\nnonsense{}{}",
            frame(HOVER),
            frame(HOVER)
        );
        let (messages, replies, errors) = frames(input.as_bytes());
        assert_eq!(messages.len(), 2, "{errors:?}");
        assert!(replies.is_empty());
        assert_eq!(
            errors,
            [FrameError::HeaderLineTooLong, FrameError::NoContentLength]
        );
    }

    #[test]
    fn a_too_large_body_is_skipped_and_its_request_answered() {
        let declared = MAX_CONTENT_LENGTH + 10;
        let head = r#"{"params":{"id":1,"s":"\"id\":2"},"id":"big","method":"m","x":""#;
        let mut input = format!("Content-Length: {declared}\r\n\r\n{head}").into_bytes();
        input.resize(input.len() + declared as usize - head.len(), b' ');
        input.extend_from_slice(frame(HOVER).as_bytes());
        let (messages, replies, _) = frames(&input);
        assert_eq!(messages.len(), 1);
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0]["id"], "big");
        assert_eq!(replies[0]["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn a_declared_length_is_not_allocated_when_the_input_ends() {
        let input = format!("Content-Length: {}\r\n\r\n{{", MAX_CONTENT_LENGTH);
        let (messages, replies, _) = frames(input.as_bytes());
        assert!(messages.is_empty() && replies.is_empty());
        let input = "Content-Length: 99999999999999999999999\r\n\r\n{}";
        let (_, _, errors) = frames(input.as_bytes());
        assert!(matches!(
            errors.as_slice(),
            [FrameError::BadContentLength { .. }, ..]
        ));
    }

    /// Random splices of pieces of frames (a deterministic generator): nothing panics, every
    /// reply is an error with a usable `id`, and a well-formed frame after a complete bad one
    /// is always read.
    #[test]
    fn spliced_frames_never_panic() {
        let pieces: [&[u8]; 12] = [
            b"Content-Length: ",
            b"content-length:2",
            b"67108865",
            b"99999999999999999999",
            b"12",
            b"\r\n",
            b"\n",
            b"{\"id\":1,\"method\":\"m\"}",
            b"{\"id\":\"x\",",
            b"[\"id\"]",
            b"\xff\xfe",
            b"\"id\":-7}",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for _ in 0..20_000 {
            let mut input = Vec::new();
            for _ in 0..next(12) {
                input.extend_from_slice(pieces[next(pieces.len())]);
            }
            let (_, replies, _) = frames(&input);
            for r in &replies {
                assert!(
                    matches!(r["error"]["code"].as_i64(), Some(-32700 | -32600)),
                    "{r}"
                );
                assert!(r["id"].is_null() || r["id"].is_i64() || r["id"].is_string());
            }
            // Behind a complete frame of any body, a good frame is read.
            let mut framed = frame(&String::from_utf8_lossy(&input)).into_bytes();
            framed.extend_from_slice(frame(HOVER).as_bytes());
            let (messages, _, _) = frames(&framed);
            assert!(
                messages
                    .iter()
                    .any(|m| matches!(m, Message::Request(r) if r.id == RequestId::from(3))),
                "{:?}",
                String::from_utf8_lossy(&framed)
            );
        }
    }

    #[test]
    fn top_level_ids() {
        let id = |s: &str| top_level_id(s.as_bytes());
        assert_eq!(id(r#"{"id":7,"method"#), Some(RequestId::from(7)));
        assert_eq!(
            id(r#" { "a" : [1,{"id":2}], "id" : "x""#),
            Some("x".to_string().into())
        );
        assert_eq!(id(r#"{"a":"id","b":{"id":1}"#), None);
        assert_eq!(id(r#"{"id":99999999999}"#), None);
        assert_eq!(id("[1]"), None);
    }
}
