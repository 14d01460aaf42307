//! A fault proxy in front of a real API server: it terminates TLS with a certificate of the
//! cluster's CA, forwards every request unchanged (headers, body, streamed answers such as
//! watches), and injects on request what the real server will not produce on demand —
//! 429 with `Retry-After`, 5xx, a connection dropped before the answer, a slow answer.
//! Everything else is the real server's own semantics.

use super::Cluster;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a fault does to a matching request.
#[derive(Clone, Debug)]
pub enum FaultKind {
    /// Answer with this status code and a `Status` document, without forwarding.
    Status(u16),
    /// 429 with `Retry-After` and `details.retryAfterSeconds`, as priority and fairness
    /// answers.
    Throttle { retry_after_seconds: u32 },
    /// Close the connection without an answer (the request is not forwarded).
    Drop,
    /// Forward after this delay.
    Delay(Duration),
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
    /// A proxy to `cluster`'s API server on a new loopback port.
    pub fn start(cluster: &Cluster) -> FaultProxy {
        let (cert, key) = cluster.pki.serving();
        let dir = cluster
            .dir
            .join(format!("proxy-{}", super::process::free_port()));
        std::fs::create_dir_all(&dir).expect("proxy dir");
        std::fs::write(dir.join("tls.crt"), cert).expect("proxy cert");
        std::fs::write(dir.join("tls.key"), key).expect("proxy key");
        let config =
            berth_runtime::agent::tls::server_config(&dir.join("tls.crt"), &dir.join("tls.key"))
                .expect("proxy TLS config");
        let ca = reqwest::Certificate::from_pem(&std::fs::read(&cluster.pki.ca_cert).expect("ca"))
            .expect("ca pem");
        let shared = Arc::new(Shared {
            upstream: cluster.server(),
            client: reqwest::Client::builder()
                .add_root_certificate(ca)
                .build()
                .expect("client"),
            faults: Mutex::new(Vec::new()),
            writes: Mutex::new(0),
            log: Mutex::new(Vec::new()),
        });
        let rt = super::runtime();
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
            Some(upstream),
            |upstream| async {
                let mut upstream = upstream?;
                match upstream.chunk().await {
                    Ok(Some(chunk)) => Some((Ok::<_, reqwest::Error>(chunk), Some(upstream))),
                    Ok(None) => None,
                    // The error ends the stream (and the connection) after it.
                    Err(e) => Some((Err(e), None)),
                }
            },
        )))
        .unwrap_or_else(|e| status(500, "InternalError", &e.to_string()))
}
