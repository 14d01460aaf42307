//! The agent's HTTP API: `GET /v1/status`, `GET /v1/telemetry?after=CURSOR`,
//! `POST /v1/telemetry/ack`, `POST /v1/sync`, `GET /metrics`, and `GET /healthz`.
//!
//! Every endpoint but `/healthz` requires `Authorization: Bearer TOKEN`; anything else gets
//! 401. Must never: log or echo the token; compare it in time that depends on its content.
//!
//! Connections are driven here (hyper's HTTP/1.1 server), not by `axum::serve`, so that no
//! client can starve the others (docs/agent.md, "Limits"): a request's headers must arrive
//! within [`HEADER_TIMEOUT`] (which also closes idle kept-alive connections), its body within
//! [`BODY_TIMEOUT`] and [`MAX_BODY_BYTES`]; at most [`MAX_CONNECTIONS`] connections are held,
//! of which a peer that has not authenticated holds at most [`MAX_UNAUTHENTICATED_PER_PEER`].
//! When a new connection finds no room, the oldest connection that never authenticated is
//! closed to make it: idle or slow-loris connections, however many, can delay an authorised
//! client by one connection, never lock it out. Every refusal is logged (`tracing`).

use super::Agent;
use axum::Json;
use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::Deserialize;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;

/// The most events one telemetry read returns.
const PAGE: usize = 1000;

/// How long a client may take to send a request's headers, counted from the moment the
/// connection waits for a request: a kept-alive connection idle this long is closed too.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's body once its headers arrived.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to finish a TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request body (the API's bodies are a few bytes of JSON).
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// The largest request head: request line and headers.
pub const MAX_HEADER_BYTES: usize = 16 << 10;
/// Connections held at once, every peer together.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections one address may hold at once before they authenticate.
pub const MAX_UNAUTHENTICATED_PER_PEER: usize = 32;

#[derive(Clone)]
struct Shared {
    agent: Arc<Agent>,
    token: Arc<String>,
}

/// What the middleware knows of the connection a request came on.
#[derive(Clone)]
struct Connection {
    peer: SocketAddr,
    /// Set once a request on this connection presented the token: it is never closed to make
    /// room for another.
    authenticated: Arc<AtomicBool>,
}

pub fn router(agent: Arc<Agent>, token: String) -> Router {
    let shared = Shared {
        agent,
        token: Arc::new(token),
    };
    let protected = Router::new()
        .route("/v1/status", get(status))
        .route("/v1/telemetry", get(telemetry))
        .route("/v1/telemetry/ack", post(acknowledge))
        .route("/v1/sync", post(sync))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn(bounded_body))
        .route_layer(middleware::from_fn_with_state(shared.clone(), authenticate));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .merge(protected)
        .with_state(shared)
}

/// Serves the API on `listener`, over TLS when `tls` is given, until the task is dropped.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    agent: Arc<Agent>,
    token: String,
) -> std::io::Result<()> {
    serve_router(listener, tls, router(agent, token)).await
}

/// Serves `router` on `listener` (over TLS when `tls` is given) with the agent's connection
/// bounds and time limits, until the task is dropped. Requests carry their connection, which
/// a router's own authentication may mark as authenticated (as [`router`]'s does).
pub async fn serve_router(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    router: Router,
) -> std::io::Result<()> {
    let tls = tls.map(TlsAcceptor::from);
    let table = Arc::new(Mutex::new(Table::default()));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors and the like: wait rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = admit(&table, peer) else {
            continue;
        };
        let (router, tls, table) = (router.clone(), tls.clone(), table.clone());
        tokio::spawn(async move {
            let close = slot.close.clone();
            let id = slot.id;
            tokio::select! {
                () = close.notified() => {}
                () = async {
                    match tls {
                        None => serve_connection(stream, router, slot.connection).await,
                        Some(acceptor) => {
                            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                                Ok(Ok(stream)) => serve_connection(stream, router, slot.connection).await,
                                Ok(Err(e)) => tracing::warn!("connection from {peer} refused: TLS handshake failed: {e}"),
                                Err(_) => tracing::warn!(
                                    "connection from {peer} closed: TLS handshake not finished within {} s",
                                    HANDSHAKE_TIMEOUT.as_secs()
                                ),
                            }
                        }
                    }
                } => {}
            }
            if let Ok(mut table) = table.lock() {
                table.release(id);
            }
        });
    }
}

/// Answers the raw bytes of one HTTP/1.1 connection (`request`, then end of input) exactly as
/// a connection to the agent is answered, and returns what was sent back: the fuzz target's
/// door (fuzz/fuzz_targets/agent_http.rs).
pub async fn respond_to_bytes(router: Router, request: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client, server) = tokio::io::duplex(64 << 10);
    let connection = Connection {
        peer: SocketAddr::from(([127, 0, 0, 1], 0)),
        authenticated: Arc::new(AtomicBool::new(false)),
    };
    let served = tokio::spawn(serve_connection(server, router, connection));
    let mut response = Vec::new();
    let exchange = async {
        let _ = client.write_all(request).await;
        let _ = client.shutdown().await;
        let _ = client.read_to_end(&mut response).await;
    };
    // A request cut short waits for its headers no longer than a real client would.
    let _ = tokio::time::timeout(HEADER_TIMEOUT + BODY_TIMEOUT, exchange).await;
    served.abort();
    response
}

/// One connection, HTTP/1.1 with the time and size limits, until it ends.
async fn serve_connection<S>(stream: S, router: Router, connection: Connection)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let peer = connection.peer;
    let service = TowerToHyperService::new(router.layer(axum::Extension(connection)));
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        // A client that shuts its sending side after its request still gets the answer.
        .half_close(true)
        .max_buf_size(MAX_HEADER_BYTES.max(8192))
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        if e.is_timeout() {
            tracing::warn!(
                "connection from {peer} closed: no complete request headers within {} s",
                HEADER_TIMEOUT.as_secs()
            );
        } else if e.is_parse_too_large() {
            tracing::warn!(
                "request from {peer} refused: its headers are larger than {MAX_HEADER_BYTES} bytes"
            );
        } else if e.is_parse() {
            tracing::warn!("request from {peer} refused: not HTTP/1.1: {e}");
        }
    }
}

/// A connection held: its number, what requests on it carry, and how to close it.
struct Slot {
    id: u64,
    connection: Connection,
    close: Arc<Notify>,
}

/// The connections held, oldest first.
#[derive(Default)]
struct Table {
    next: u64,
    held: VecDeque<(u64, IpAddr, Arc<AtomicBool>, Arc<Notify>)>,
}

impl Table {
    /// Closes the oldest connection that never authenticated (from `peer` only, when given).
    fn evict(&mut self, peer: Option<IpAddr>) -> Option<IpAddr> {
        let at = self.held.iter().position(|(_, ip, trusted, _)| {
            !trusted.load(Ordering::Relaxed) && peer.is_none_or(|p| p == *ip)
        })?;
        let (_, ip, _, close) = self.held.remove(at)?;
        close.notify_one();
        Some(ip)
    }

    fn release(&mut self, id: u64) {
        self.held.retain(|(held, ..)| *held != id);
    }
}

/// Makes room for a connection from `peer` and holds it; None (and the connection dropped)
/// when every slot is held by an authenticated connection.
fn admit(table: &Mutex<Table>, peer: SocketAddr) -> Option<Slot> {
    let mut table = table.lock().ok()?;
    let ip = peer.ip();
    let unauthenticated = table
        .held
        .iter()
        .filter(|(_, held, trusted, _)| *held == ip && !trusted.load(Ordering::Relaxed))
        .count();
    if unauthenticated >= MAX_UNAUTHENTICATED_PER_PEER && table.evict(Some(ip)).is_some() {
        tracing::warn!(
            "connection from {ip} closed to make room: {ip} holds \
             {MAX_UNAUTHENTICATED_PER_PEER} connections that have not authenticated"
        );
    }
    if table.held.len() >= MAX_CONNECTIONS {
        match table.evict(None) {
            Some(evicted) => tracing::warn!(
                "connection from {evicted} closed to make room: {MAX_CONNECTIONS} connections \
                 held and it had not authenticated"
            ),
            None => {
                tracing::warn!(
                    "connection from {peer} refused: all {MAX_CONNECTIONS} connections are \
                     held by authenticated clients"
                );
                return None;
            }
        }
    }
    let id = table.next;
    table.next += 1;
    let authenticated = Arc::new(AtomicBool::new(false));
    let close = Arc::new(Notify::new());
    table
        .held
        .push_back((id, ip, authenticated.clone(), close.clone()));
    Some(Slot {
        id,
        connection: Connection {
            peer,
            authenticated,
        },
        close,
    })
}

/// Equal lengths and every byte compared, whatever differs first.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn authenticate(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let offered = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let connection = request.extensions().get::<Connection>().cloned();
    match offered {
        Some(token)
            if !shared.token.is_empty() && same(token.as_bytes(), shared.token.as_bytes()) =>
        {
            if let Some(c) = connection {
                c.authenticated.store(true, Ordering::Relaxed);
            }
            next.run(request).await
        }
        _ => {
            // The path without its query; never the header (it may be a near-miss token).
            let why = if offered.is_some() {
                "wrong bearer token"
            } else {
                "no bearer token"
            };
            tracing::warn!(
                "request refused: {} {} from {}: {why}",
                request.method(),
                request.uri().path(),
                peer_of(connection.as_ref())
            );
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "unauthorized\n",
            )
                .into_response()
        }
    }
}

fn peer_of(connection: Option<&Connection>) -> String {
    connection.map_or_else(|| "an unknown peer".into(), |c| c.peer.to_string())
}

/// Reads the body whole, within [`BODY_TIMEOUT`] and [`MAX_BODY_BYTES`], before the handler
/// sees it: 408 or 413 otherwise.
async fn bounded_body(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let peer = peer_of(parts.extensions.get::<Connection>());
    let refuse = |status: StatusCode, why: String| {
        tracing::warn!(
            "request refused: {} {} from {peer}: {why}",
            parts.method,
            parts.uri.path()
        );
        (status, format!("{why}\n")).into_response()
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = format!("the body is larger than {MAX_BODY_BYTES} bytes");
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, too_large);
    }
    let limited = http_body_util::Limited::new(body, MAX_BODY_BYTES);
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return refuse(StatusCode::PAYLOAD_TOO_LARGE, too_large);
        }
        Ok(Err(e)) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("the body is unreadable: {e}"),
            );
        }
        Err(_) => {
            let why = format!(
                "the body did not arrive within {} s",
                BODY_TIMEOUT.as_secs()
            );
            return refuse(StatusCode::REQUEST_TIMEOUT, why);
        }
    };
    let request = Request::from_parts(parts.clone(), axum::body::Body::from(bytes));
    next.run(request).await
}

async fn status(State(shared): State<Shared>) -> Json<serde_json::Value> {
    Json(shared.agent.status().await)
}

#[derive(Deserialize)]
struct After {
    #[serde(default)]
    after: u64,
    limit: Option<usize>,
}

/// Events after the cursor. Reading after `C` acknowledges every event up to `C`: the caller
/// has them (so a reader that keeps its cursor gets each event exactly once).
async fn telemetry(State(shared): State<Shared>, Query(q): Query<After>) -> Response {
    let state = &shared.agent.state;
    if q.after > 0
        && let Err(e) = state.acknowledge(q.after)
    {
        return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
    }
    let limit = q.limit.unwrap_or(PAGE).min(PAGE);
    match (state.events_after(q.after, limit), state.telemetry_counts()) {
        (Ok(events), Ok((buffered, dropped))) => {
            let next = events.last().map_or(q.after, |e| e.seq);
            Json(serde_json::json!({
                "events": events,
                "next": next,
                "buffered": buffered,
                "dropped": dropped,
            }))
            .into_response()
        }
        (Err(e), _) | (_, Err(e)) => {
            (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
        }
    }
}

#[derive(Deserialize)]
struct Ack {
    through: u64,
}

async fn acknowledge(State(shared): State<Shared>, Json(ack): Json<Ack>) -> Response {
    match shared.agent.state.acknowledge(ack.through) {
        Ok(removed) => Json(serde_json::json!({ "removed": removed })).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn sync(State(shared): State<Shared>) -> Response {
    shared.agent.sync_now.notify_one();
    (
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "sync": "requested" })),
    )
        .into_response()
}

/// Prometheus text exposition ([`super::metrics`]).
async fn metrics(State(shared): State<Shared>) -> Response {
    let status = shared.agent.status().await;
    let text = super::metrics::exposition(&status, &super::metrics::hostname());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Config;

    /// The fuzz target's door answers like a connection: a request with the token, one
    /// without, and bytes that are not HTTP, each at once.
    #[tokio::test]
    async fn raw_bytes_are_answered_as_a_connection_is() {
        let dir = tempfile::tempdir().expect("temp dir");
        let router = router(
            Agent::open(Config::minimal(dir.path().to_path_buf())).expect("agent"),
            "t0ken-1234".into(),
        );
        let answer = async |bytes: &[u8]| {
            let started = std::time::Instant::now();
            let response = respond_to_bytes(router.clone(), bytes).await;
            assert!(started.elapsed() < HEADER_TIMEOUT, "waited for a timeout");
            String::from_utf8_lossy(&response).into_owned()
        };
        let ok = answer(
            b"GET /v1/status HTTP/1.1\r\nhost: a\r\nauthorization: Bearer t0ken-1234\r\n\r\n",
        )
        .await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(!ok.contains("t0ken-1234"));
        let refused = answer(b"POST /v1/sync HTTP/1.1\r\nhost: a\r\n\r\n").await;
        assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
        let garbage = answer(b"\x00\xff GET / HTTP/9\r\n\r\n").await;
        assert!(
            garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"),
            "{garbage}"
        );
        let cut = answer(b"POST /v1/telemetry/ack HTTP/1.1\r\nhost: a\r\nauthorization: Bearer t0ken-1234\r\ncontent-length: 50\r\n\r\n{").await;
        assert!(cut.starts_with("HTTP/1.1 400"), "{cut}");
    }
}
