//! The agent's HTTP API: `GET /v1/status`, `GET /v1/telemetry?after=CURSOR`,
//! `POST /v1/telemetry/ack`, `POST /v1/sync`, `GET /metrics`, and `GET /healthz`.
//!
//! Every endpoint but `/healthz` requires `Authorization: Bearer TOKEN`; anything else gets
//! 401. Must never: log or echo the token; compare it in time that depends on its content.

use super::Agent;
use axum::Json;
use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use std::sync::Arc;

/// The most events one telemetry read returns.
const PAGE: usize = 1000;

#[derive(Clone)]
struct Shared {
    agent: Arc<Agent>,
    token: Arc<String>,
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
        .route_layer(middleware::from_fn_with_state(shared.clone(), authenticate));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .merge(protected)
        .with_state(shared)
}

/// Serves the API on `listener` (plain TCP, or [`super::tls::TlsListener`]) until the task is
/// dropped.
pub async fn serve<L>(listener: L, agent: Arc<Agent>, token: String) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = std::net::SocketAddr>,
{
    axum::serve(listener, router(agent, token)).await
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
    match offered {
        Some(token)
            if !shared.token.is_empty() && same(token.as_bytes(), shared.token.as_bytes()) =>
        {
            next.run(request).await
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "unauthorized\n",
        )
            .into_response(),
    }
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

/// Prometheus text exposition.
async fn metrics(State(shared): State<Shared>) -> Response {
    let agent = &shared.agent;
    let status = agent.status().await;
    let generation = status["generation"].as_u64().unwrap_or(0);
    let buffered = status["telemetry"]["buffered"].as_u64().unwrap_or(0);
    let dropped = status["telemetry"]["dropped"].as_u64().unwrap_or(0);
    let cache = status["cache"]["bytes"].as_u64().unwrap_or(0);
    let mut text = format!(
        "# TYPE berth_agent_bundle_generation gauge\nberth_agent_bundle_generation {generation}\n\
         # TYPE berth_agent_telemetry_buffered gauge\nberth_agent_telemetry_buffered {buffered}\n\
         # TYPE berth_agent_telemetry_dropped_total counter\nberth_agent_telemetry_dropped_total {dropped}\n\
         # TYPE berth_agent_cache_bytes gauge\nberth_agent_cache_bytes {cache}\n\
         # TYPE berth_agent_workload_running gauge\n"
    );
    for w in status["workloads"].as_array().into_iter().flatten() {
        let running = u8::from(w["state"] == "running");
        text.push_str(&format!(
            "berth_agent_workload_running{{workload=\"{}\"}} {running}\n",
            w["name"].as_str().unwrap_or_default()
        ));
    }
    text.push_str("# TYPE berth_agent_gpu_utilization gauge\n");
    for d in status["gpus"]["devices"].as_array().into_iter().flatten() {
        text.push_str(&format!(
            "berth_agent_gpu_utilization{{gpu=\"{}\"}} {}\n",
            d["index"], d["utilization"]
        ));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
