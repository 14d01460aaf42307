//! A fault proxy in front of a real server (a Kubernetes API server, an OCI registry): it
//! terminates TLS with a certificate the client trusts, forwards every request unchanged
//! (headers, body, streamed answers such as watches and blobs), and injects on request what
//! the real server will not produce on demand — 429 with `Retry-After`, 5xx, a connection
//! dropped before the answer, a slow answer, an answer whose body is not what the server sent.
//! Everything else is the real server's own semantics.

#![allow(dead_code)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a fault does to a matching request.
#[derive(Clone, Debug)]
pub enum FaultKind {
    /// Answer with this status code and a `Status` document (Kubernetes' form), without
    /// forwarding.
    Status(u16),
    /// 429 with `Retry-After` and `details.retryAfterSeconds`, as priority and fairness
    /// answers.
    Throttle { retry_after_seconds: u32 },
    /// Close the connection without an answer (the request is not forwarded).
    Drop,
    /// Forward after this delay.
    Delay(Duration),
    /// Forward, and flip every bit of the answer's body byte at this offset (counted from the
    /// first byte the server sent): same status, headers and length, other bytes.
    Corrupt { at: u64 },
}

/// A fault for matching requests.
#[derive(Clone, Debug)]
pub struct Fault {
    /// `GET`, `PATCH`, …; `None` matches every method.
    pub method: Option<&'static str>,
    /// A substring of the path and query; `None` matches every request.
    pub path: Option<String>,
    pub kind: FaultKind,
    /// How many matching requests it hits (`u32::MAX`: all).
    pub times: u32,
    /// Only once this many writes have been forwarded and succeeded.
    pub after_writes: u64,
}

struct Shared {
    upstream: String,
    client: reqwest::Client,
    faults: Mutex<Vec<Fault>>,
    writes: Mutex<u64>,
    log: Mutex<Vec<String>>,
}

/// The proxy; stops when dropped.
pub struct FaultProxy {
    pub port: u16,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on a new loopback port, serving TLS with the PEM files `cert` and `key` and
    /// forwarding to `upstream` (`https://HOST:PORT`), whose certificate `ca_pem` signed; it
    /// runs on `rt`.
    pub fn forward_to(
        rt: &tokio::runtime::Runtime,
        upstream: String,
        ca_pem: &[u8],
        cert: &Path,
        key: &Path,
    ) -> FaultProxy {
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let config = berth_runtime::agent::tls::server_config(cert, key).expect("proxy TLS config");
        let ca = reqwest::Certificate::from_pem(ca_pem).expect("ca pem");
        let shared = Arc::new(Shared {
            upstream,
            client: reqwest::Client::builder()
                .add_root_certificate(ca)
                .build()
                .expect("client"),
            faults: Mutex::new(Vec::new()),
            writes: Mutex::new(0),
            log: Mutex::new(Vec::new()),
        });
        let tcp = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind proxy");
        let port = tcp.local_addr().expect("addr").port();
        let app = Router::new().fallback(forward).with_state(shared.clone());
        let task = rt.spawn(async move {
            let _ = berth_runtime::agent::api::serve_router(tcp, Some(config), app).await;
        });
        FaultProxy { port, shared, task }
    }

    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`: the proxy as a registry host.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn inject(&self, fault: Fault) {
        self.shared.faults.lock().expect("faults").push(fault);
    }

    pub fn clear_faults(&self) {
        self.shared.faults.lock().expect("faults").clear();
    }

    /// `METHOD path?query` of every request, in order.
    pub fn log(&self) -> Vec<String> {
        self.shared.log.lock().expect("log").clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn take_fault(shared: &Shared, method: &Method, path: &str) -> Option<FaultKind> {
    let writes = *shared.writes.lock().expect("writes");
    let mut faults = shared.faults.lock().expect("faults");
    let fault = faults.iter_mut().find(|f| {
        f.times > 0
            && writes >= f.after_writes
            && f.method.is_none_or(|m| m == method.as_str())
            && f.path.as_deref().is_none_or(|p| path.contains(p))
    })?;
    fault.times = fault.times.saturating_sub(1);
    Some(fault.kind.clone())
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let doc = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [("content-type", "application/json")],
        doc.to_string(),
    )
        .into_response()
}

/// `chunk` (bytes `offset..` of a body) with the byte at `at` flipped, if it holds it.
fn corrupt(chunk: Bytes, offset: u64, at: Option<u64>) -> Bytes {
    match at {
        Some(at) if at >= offset && at - offset < chunk.len() as u64 => {
            let mut bytes = chunk.to_vec();
            let i = (at - offset) as usize;
            bytes[i] ^= 0xff;
            Bytes::from(bytes)
        }
        _ => chunk,
    }
}

async fn forward(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    shared
        .log
        .lock()
        .expect("log")
        .push(format!("{method} {path}"));
    let mut corrupt_at = None;
    match take_fault(&shared, &method, &path) {
        Some(FaultKind::Status(code)) => {
            return status(code, "InternalError", "injected by the fault proxy");
        }
        Some(FaultKind::Throttle {
            retry_after_seconds,
        }) => {
            // As the API server's priority and fairness answers: the header, and the same
            // in the Status document's details.
            let doc = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "Too many requests, please try again later.",
                "reason": "TooManyRequests", "code": 429,
                "details": {"retryAfterSeconds": retry_after_seconds}});
            let mut response = (
                StatusCode::TOO_MANY_REQUESTS,
                [("content-type", "application/json")],
                doc.to_string(),
            )
                .into_response();
            response.headers_mut().insert(
                "retry-after",
                HeaderValue::from_str(&retry_after_seconds.to_string()).expect("header"),
            );
            return response;
        }
        Some(FaultKind::Drop) => {
            // Unwinding out of the handler aborts the connection's task: the client sees the
            // connection close with no answer. `resume_unwind` skips the panic hook.
            std::panic::resume_unwind(Box::new("injected connection drop"));
        }
        Some(FaultKind::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(FaultKind::Corrupt { at }) => corrupt_at = Some(at),
        None => {}
    }
    let is_write = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
    let mut request = shared
        .client
        .request(method, format!("{}{path}", shared.upstream));
    for (name, value) in &headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection") {
            request = request.header(name, value);
        }
    }
    let upstream = match request.body(body).send().await {
        Ok(response) => response,
        Err(e) => return status(502, "BadGateway", &format!("upstream: {e}")),
    };
    let code = upstream.status();
    if is_write && code.is_success() {
        *shared.writes.lock().expect("writes") += 1;
    }
    let mut response = Response::builder().status(code.as_u16());
    for (name, value) in upstream.headers() {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(futures::stream::unfold(
            Some((upstream, 0u64)),
            move |upstream| async move {
                let (mut upstream, offset) = upstream?;
                match upstream.chunk().await {
                    Ok(Some(chunk)) => {
                        let next = offset + chunk.len() as u64;
                        let chunk = corrupt(chunk, offset, corrupt_at);
                        Some((Ok::<_, reqwest::Error>(chunk), Some((upstream, next))))
                    }
                    Ok(None) => None,
                    // The error ends the stream (and the connection) after it.
                    Err(e) => Some((Err(e), None)),
                }
            },
        )))
        .unwrap_or_else(|e| status(500, "InternalError", &e.to_string()))
}
