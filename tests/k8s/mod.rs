//! A Kubernetes API test server (axum on loopback) that follows the API machinery's
//! conventions closely enough to catch real mistakes in berth's Kubernetes backend:
//!
//! - discovery (`/version`, `/api`, `/apis`, group-version resource lists);
//! - namespaced and cluster-scoped GET and LIST, with label selectors (`=`, `!=`, `in`,
//!   `notin`, `key`, `!key`);
//! - server-side apply (`PATCH`, `application/apply-patch+yaml`, `fieldManager`, `force`):
//!   fields owned per manager, listed in `metadata.managedFields`; a field another manager
//!   owns with a different value is a 409 naming that manager (unless forced); fields a
//!   manager stops applying are removed when nobody else owns them; lists are atomic;
//! - `dryRun=All` on writes; `resourceVersion` bumped on every write that changes the object
//!   (a no-op apply keeps it, as a real server does); `generation` on spec changes;
//! - DELETE; 404 for objects and for writes into a missing namespace; 422 for an object that
//!   does not deserialize into its k8s-openapi type; 401 without the bearer token;
//! - injectable faults: status codes (429, 500, 403, …) for matching requests, dropped
//!   connections after N writes, latency.
//!
//! Several servers are several clusters; [`kubeconfig`] writes one file naming them all.

#![allow(dead_code)]

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What a fault does to a matching request.
#[derive(Clone, Debug)]
pub enum FaultKind {
    /// Answer with this status code (and a Status document).
    Status(u16),
    /// Close the connection without an answer.
    Drop,
}

/// A fault injected into matching requests.
#[derive(Clone, Debug)]
pub struct Fault {
    /// `GET`, `PATCH`, `DELETE`; `None` matches every method.
    pub method: Option<Method>,
    /// A substring of the path; `None` matches every path.
    pub path: Option<String>,
    pub kind: FaultKind,
    /// How many matching requests it hits (`u32::MAX`: all).
    pub times: u32,
    /// Only once this many writes have succeeded.
    pub after_writes: u64,
}

#[derive(Clone, Debug)]
struct Stored {
    object: Value,
    /// Manager → the field paths it owns, as JSON pointers (`/spec/replicas`).
    managers: BTreeMap<String, BTreeSet<String>>,
}

#[derive(Default)]
struct Store {
    resource_version: u64,
    objects: BTreeMap<(String, String, String), Stored>,
    faults: Vec<Fault>,
    writes: u64,
    latency: Duration,
    /// `METHOD path?query` of every request, in order.
    log: Vec<String>,
}

struct Shared {
    store: Mutex<Store>,
    token: String,
}

/// One test cluster: an API server on 127.0.0.1 with its own runtime.
pub struct TestServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: tokio::runtime::Runtime,
}

/// The resources the server knows: (group/version, plural, kind, namespaced).
const RESOURCES: [(&str, &str, &str, bool); 8] = [
    ("v1", "namespaces", "Namespace", false),
    ("v1", "nodes", "Node", false),
    ("v1", "pods", "Pod", true),
    ("v1", "configmaps", "ConfigMap", true),
    ("v1", "services", "Service", true),
    ("apps/v1", "deployments", "Deployment", true),
    ("apps/v1", "statefulsets", "StatefulSet", true),
    ("batch/v1", "jobs", "Job", true),
];

impl TestServer {
    /// Starts a server that accepts `Authorization: Bearer TOKEN`.
    pub fn start(token: &str) -> TestServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("test server runtime");
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::default()),
            token: token.to_string(),
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind loopback");
        let addr = listener.local_addr().expect("address");
        let app = Router::new().fallback(handle).with_state(shared.clone());
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestServer {
            addr,
            shared,
            runtime,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        self.shared.store.lock().expect("store lock")
    }

    /// Stores `object` as if `manager` had applied it (no HTTP, no checks): nodes, pods with
    /// status, or objects of other tools.
    pub fn seed(&self, manager: &str, object: Value) {
        let mut store = self.store();
        let (plural, namespaced) = plural_of(&object).expect("a known kind");
        let ns = if namespaced {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        };
        let name = object["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_string();
        let key = (plural.to_string(), ns, name);
        let stored = store.objects.get(&key).cloned();
        let (mut result, _) =
            ssa(&mut store, stored, manager, &object, true).expect("seed applies");
        // Status is the server's (kubelet's, controllers') to write: seeded as given.
        if let Some(status) = object.get("status") {
            result.object["status"] = status.clone();
        }
        store.objects.insert(key, result);
    }

    /// The stored object, if any.
    pub fn get(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let store = self.store();
        let key = (plural.to_string(), namespace.to_string(), name.to_string());
        store.objects.get(&key).map(rendered)
    }

    /// Every stored object's `(plural, namespace, name)`.
    pub fn keys(&self) -> Vec<(String, String, String)> {
        self.store().objects.keys().cloned().collect()
    }

    pub fn inject(&self, fault: Fault) {
        self.store().faults.push(fault);
    }

    pub fn clear_faults(&self) {
        self.store().faults.clear();
    }

    pub fn set_latency(&self, latency: Duration) {
        self.store().latency = latency;
    }

    /// The requests seen so far.
    pub fn log(&self) -> Vec<String> {
        self.store().log.clone()
    }

    /// Successful (non dry-run) writes so far.
    pub fn writes(&self) -> u64 {
        self.store().writes
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // The runtime stops its tasks when dropped; nothing else to release.
        let _ = &self.runtime;
    }
}

/// A kubeconfig naming each `(context, server)`, every user with `token`.
pub fn kubeconfig(clusters: &[(&str, &TestServer)], token: &str) -> String {
    let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (context, server) in clusters {
        text.push_str(&format!(
            "- name: {context}\n  cluster:\n    server: {}\n",
            server.url()
        ));
    }
    text.push_str("users:\n");
    for (context, _) in clusters {
        text.push_str(&format!(
            "- name: {context}-user\n  user:\n    token: {token}\n"
        ));
    }
    text.push_str("contexts:\n");
    for (context, _) in clusters {
        text.push_str(&format!(
            "- name: {context}\n  context:\n    cluster: {context}\n    user: {context}-user\n"
        ));
    }
    if let Some((first, _)) = clusters.first() {
        text.push_str(&format!("current-context: {first}\n"));
    }
    text
}

fn plural_of(object: &Value) -> Option<(&'static str, bool)> {
    let api_version = object["apiVersion"].as_str()?;
    let kind = object["kind"].as_str()?;
    RESOURCES
        .iter()
        .find(|(gv, _, k, _)| *gv == api_version && *k == kind)
        .map(|(_, plural, _, namespaced)| (*plural, *namespaced))
}

fn status(code: u16, reason: &str, message: &str, causes: Vec<Value>) -> Response {
    let mut doc = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    if !causes.is_empty() {
        doc["details"] = json!({ "causes": causes });
    }
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(doc),
    )
        .into_response()
}

fn ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

/// A request's target, parsed from its path.
struct Target {
    group_version: String,
    plural: String,
    kind: String,
    namespaced: bool,
    namespace: Option<String>,
    name: Option<String>,
}

fn parse_target(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (gv, rest) = match segments.as_slice() {
        ["api", "v1", rest @ ..] => ("v1".to_string(), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => return None,
    };
    let (namespace, plural, name) = match rest {
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name)),
        ["namespaces", ns, plural] => (Some(*ns), *plural, None),
        [plural, name] => (None, *plural, Some(*name)),
        [plural] => (None, *plural, None),
        _ => return None,
    };
    let (_, _, kind, namespaced) = RESOURCES
        .iter()
        .find(|(g, p, _, _)| *g == gv && *p == plural)?;
    Some(Target {
        group_version: gv,
        plural: plural.to_string(),
        kind: kind.to_string(),
        namespaced: *namespaced,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
    })
}

fn query(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let latency = {
        let mut store = shared.store.lock().expect("store lock");
        store.log.push(format!(
            "{method} {}",
            uri.path_and_query().map_or("", |p| p.as_str())
        ));
        store.latency
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {}", shared.token));
    if !authorized {
        return status(401, "Unauthorized", "Unauthorized", Vec::new());
    }
    if let Some(fault) = take_fault(&shared, &method, uri.path()) {
        match fault {
            FaultKind::Drop => {
                // Unwinding out of the handler aborts the connection's task: the client sees
                // the connection close with no answer. `resume_unwind` skips the panic hook.
                std::panic::resume_unwind(Box::new("injected connection drop"));
            }
            FaultKind::Status(code) => {
                let reason = match code {
                    429 => "TooManyRequests",
                    403 => "Forbidden",
                    _ => "InternalError",
                };
                return status(code, reason, &format!("injected {code}"), Vec::new());
            }
        }
    }
    match uri.path() {
        "/version" => return ok(json!({"major": "1", "minor": "35", "gitVersion": "v1.35.0"})),
        "/api" => return ok(json!({"kind": "APIVersions", "versions": ["v1"]})),
        "/apis" => return ok(discovery_groups()),
        path => {
            if let Some(list) = discovery_resources(path) {
                return ok(list);
            }
        }
    }
    let Some(target) = parse_target(uri.path()) else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
            Vec::new(),
        );
    };
    let params = query(&uri);
    let mut store = shared.store.lock().expect("store lock");
    match (method.as_str(), &target.name) {
        ("GET", Some(name)) => get_one(&store, &target, name),
        ("GET", None) => list(&store, &target, &params),
        ("PATCH", Some(name)) => {
            let content_type = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if content_type != "application/apply-patch+yaml" {
                return status(
                    415,
                    "UnsupportedMediaType",
                    "only server-side apply is served",
                    Vec::new(),
                );
            }
            apply(&mut store, &target, name, &params, &body)
        }
        ("DELETE", Some(name)) => {
            // Clients send DeleteOptions in the body (`{"dryRun": ["All"]}`) or the query.
            let mut params = params;
            let options: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if options["dryRun"]
                .as_array()
                .is_some_and(|d| d.contains(&json!("All")))
            {
                params.insert("dryRun".to_string(), "All".to_string());
            }
            delete(&mut store, &target, name, &params)
        }
        _ => status(
            405,
            "MethodNotAllowed",
            "not served by the test server",
            Vec::new(),
        ),
    }
}

fn take_fault(shared: &Shared, method: &Method, path: &str) -> Option<FaultKind> {
    let mut store = shared.store.lock().expect("store lock");
    let writes = store.writes;
    let fault = store.faults.iter_mut().find(|f| {
        f.times > 0
            && writes >= f.after_writes
            && f.method.as_ref().is_none_or(|m| m == method)
            && f.path.as_deref().is_none_or(|p| path.contains(p))
    })?;
    if fault.times != u32::MAX {
        fault.times -= 1;
    }
    Some(fault.kind.clone())
}

fn discovery_groups() -> Value {
    let group = |name: &str| {
        json!({"name": name, "versions": [{"groupVersion": format!("{name}/v1"), "version": "v1"}],
               "preferredVersion": {"groupVersion": format!("{name}/v1"), "version": "v1"}})
    };
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group("apps"), group("batch")]})
}

fn discovery_resources(path: &str) -> Option<Value> {
    let gv = match path {
        "/api/v1" => "v1",
        "/apis/apps/v1" => "apps/v1",
        "/apis/batch/v1" => "batch/v1",
        _ => return None,
    };
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|(g, _, _, _)| *g == gv)
        .map(|(_, plural, kind, namespaced)| {
            json!({"name": plural, "singularName": kind.to_lowercase(), "namespaced": namespaced,
                   "kind": kind, "verbs": ["get", "list", "patch", "delete"]})
        })
        .collect();
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn key_of(target: &Target, name: &str) -> (String, String, String) {
    (
        target.plural.clone(),
        target.namespace.clone().unwrap_or_default(),
        name.to_string(),
    )
}

fn not_found(target: &Target, name: &str) -> Response {
    status(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", target.plural),
        Vec::new(),
    )
}

fn get_one(store: &Store, target: &Target, name: &str) -> Response {
    match store.objects.get(&key_of(target, name)) {
        Some(stored) => ok(rendered(stored)),
        None => not_found(target, name),
    }
}

fn list(store: &Store, target: &Target, params: &BTreeMap<String, String>) -> Response {
    if params.get("watch").is_some_and(|w| w == "true" || w == "1") {
        return status(
            405,
            "MethodNotAllowed",
            "watch is not served by the test server",
            Vec::new(),
        );
    }
    let selector = params
        .get("labelSelector")
        .map(String::as_str)
        .unwrap_or("");
    let items: Vec<Value> = store
        .objects
        .iter()
        .filter(|((plural, ns, _), _)| {
            *plural == target.plural && target.namespace.as_ref().is_none_or(|t| t == ns)
        })
        .map(|(_, stored)| rendered(stored))
        .filter(|o| matches_selector(o, selector))
        .collect();
    ok(json!({
        "kind": format!("{}List", target.kind),
        "apiVersion": target.group_version,
        "metadata": {"resourceVersion": store.resource_version.to_string()},
        "items": items,
    }))
}

/// Equality- and set-based label selectors, as the API server reads them.
pub fn matches_selector(object: &Value, selector: &str) -> bool {
    let labels = object["metadata"]["labels"].as_object();
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    split_requirements(selector).iter().all(|req| {
        let req = req.trim();
        if req.is_empty() {
            return true;
        }
        if let Some((key, values)) = req.split_once(" in ") {
            let set = set_values(values);
            return label(key.trim()).is_some_and(|v| set.contains(&v.to_string()));
        }
        if let Some((key, values)) = req.split_once(" notin ") {
            let set = set_values(values);
            return label(key.trim()).is_none_or(|v| !set.contains(&v.to_string()));
        }
        if let Some((key, value)) = req.split_once("!=") {
            return label(key.trim()) != Some(value.trim());
        }
        if let Some((key, value)) = req.split_once("==").or_else(|| req.split_once('=')) {
            return label(key.trim()) == Some(value.trim());
        }
        if let Some(key) = req.strip_prefix('!') {
            return label(key.trim()).is_none();
        }
        label(req).is_some()
    })
}

/// Splits on commas outside parentheses.
fn split_requirements(selector: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut depth = 0;
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out
}

fn set_values(text: &str) -> Vec<String> {
    text.trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(|v| v.trim().to_string())
        .collect()
}

fn delete(
    store: &mut Store,
    target: &Target,
    name: &str,
    params: &BTreeMap<String, String>,
) -> Response {
    let key = key_of(target, name);
    if !store.objects.contains_key(&key) {
        return not_found(target, name);
    }
    if !is_dry_run(params) {
        store.objects.remove(&key);
        store.resource_version += 1;
        store.writes += 1;
    }
    ok(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
              "details": {"name": name, "kind": target.plural}}),
    )
}

fn is_dry_run(params: &BTreeMap<String, String>) -> bool {
    params.get("dryRun").is_some_and(|v| v == "All")
}

fn apply(
    store: &mut Store,
    target: &Target,
    name: &str,
    params: &BTreeMap<String, String>,
    body: &[u8],
) -> Response {
    let Some(manager) = params.get("fieldManager").filter(|m| !m.is_empty()) else {
        return status(
            400,
            "BadRequest",
            "PATCH with apply-patch+yaml requires a fieldManager",
            Vec::new(),
        );
    };
    let text = String::from_utf8_lossy(body);
    let parsed: Result<Value, String> = serde_json::from_str(&text)
        .or_else(|_| serde_saphyr::from_str::<Value>(&text).map_err(|e| e.to_string()));
    let config = match parsed {
        Ok(v) if v.is_object() => v,
        Ok(_) => return status(400, "BadRequest", "the patch is not an object", Vec::new()),
        Err(e) => {
            return status(
                400,
                "BadRequest",
                &format!("cannot parse the patch: {e}"),
                Vec::new(),
            );
        }
    };
    if config["apiVersion"].as_str() != Some(target.group_version.as_str())
        || config["kind"].as_str() != Some(target.kind.as_str())
    {
        return status(
            400,
            "BadRequest",
            "apiVersion and kind do not match the resource",
            Vec::new(),
        );
    }
    if config["metadata"]["name"].as_str() != Some(name) {
        return status(
            400,
            "BadRequest",
            "the name in the body does not match the URL",
            Vec::new(),
        );
    }
    if let Some(ns) = &target.namespace {
        if let Some(body_ns) = config["metadata"]["namespace"].as_str()
            && body_ns != ns
        {
            return status(
                400,
                "BadRequest",
                "the namespace in the body does not match the URL",
                Vec::new(),
            );
        }
        let ns_key = ("namespaces".to_string(), String::new(), ns.clone());
        if !store.objects.contains_key(&ns_key) {
            return status(
                404,
                "NotFound",
                &format!("namespaces \"{ns}\" not found"),
                Vec::new(),
            );
        }
    }
    let force = params.get("force").is_some_and(|f| f == "true");
    let key = key_of(target, name);
    let existing = store.objects.get(&key).cloned();
    let dry_run = is_dry_run(params);
    let (stored, changed) = match ssa(store, existing, manager, &config, force) {
        Ok(result) => result,
        Err(conflicts) => {
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|(m, field)| {
                    json!({"reason": "FieldManagerConflict",
                           "message": format!("conflict with \"{m}\" using {}", target.group_version),
                           "field": dotted(field)})
                })
                .collect();
            let message = format!(
                "Apply failed with {} conflict{}: {}",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                conflicts
                    .iter()
                    .map(|(m, f)| format!(
                        "conflict with \"{m}\" using {}: {}",
                        target.group_version,
                        dotted(f)
                    ))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            return status(409, "Conflict", &message, causes);
        }
    };
    if let Err(e) = typed_check(&target.kind, &stored.object) {
        return status(
            422,
            "Invalid",
            &format!("{} \"{name}\" is invalid: {e}", target.kind),
            Vec::new(),
        );
    }
    let result = rendered(&stored);
    if !dry_run {
        if changed {
            store.writes += 1;
        }
        store.objects.insert(key, stored);
    }
    ok(result)
}

/// The object with its managedFields, as the server returns it.
fn rendered(stored: &Stored) -> Value {
    let mut object = stored.object.clone();
    let entries: Vec<Value> = stored
        .managers
        .iter()
        .filter(|(_, fields)| !fields.is_empty())
        .map(|(manager, fields)| {
            json!({"manager": manager, "operation": "Apply",
                   "apiVersion": object["apiVersion"], "fieldsType": "FieldsV1",
                   "time": "2026-01-01T00:00:00Z", "fieldsV1": fields_v1(fields)})
        })
        .collect();
    object["metadata"]["managedFields"] = Value::Array(entries);
    object
}

/// `/spec/replicas` → `{"f:spec": {"f:replicas": {}}}`.
fn fields_v1(fields: &BTreeSet<String>) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut node = &mut root;
        for part in segments(path) {
            node = node
                .entry(format!("f:{part}"))
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("an object");
        }
    }
    Value::Object(root)
}

/// Fields no manager owns: identity and what the server maintains.
const UNOWNED: [&str; 9] = [
    "/apiVersion",
    "/kind",
    "/metadata/name",
    "/metadata/namespace",
    "/metadata/resourceVersion",
    "/metadata/managedFields",
    "/metadata/uid",
    "/metadata/generation",
    "/metadata/creationTimestamp",
];

/// The leaf paths of a configuration (lists and empty objects are leaves: lists are atomic).
fn leaf_paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                if prefix.is_empty() && k == "status" {
                    continue;
                }
                let escaped = k.replace('~', "~0").replace('/', "~1");
                leaf_paths(v, &format!("{prefix}/{escaped}"), out);
            }
        }
        _ => {
            if !prefix.is_empty() && !UNOWNED.contains(&prefix) {
                out.insert(prefix.to_string());
            }
        }
    }
}

/// The keys of a JSON pointer, unescaped.
fn segments(path: &str) -> Vec<String> {
    path.trim_start_matches('/')
        .split('/')
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// A field path as the API server writes it in conflicts: `.spec.replicas`.
fn dotted(path: &str) -> String {
    segments(path).iter().map(|s| format!(".{s}")).collect()
}

fn at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    value.pointer(path)
}

fn set(value: &mut Value, path: &str, new: Value) {
    let parts = segments(path);
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    let mut node = value;
    for part in parents {
        if !node.get(part.as_str()).is_some_and(Value::is_object) {
            node[part.as_str()] = Value::Object(Map::new());
        }
        node = &mut node[part.as_str()];
    }
    node[last.as_str()] = new;
}

fn remove(value: &mut Value, path: &str) {
    let parts = segments(path);
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    let mut node = value;
    for part in parents {
        match node.get_mut(part.as_str()) {
            Some(next) => node = next,
            None => return,
        }
    }
    if let Some(map) = node.as_object_mut() {
        map.remove(last.as_str());
    }
}

type Conflicts = Vec<(String, String)>;

/// Server-side apply of `config` by `manager` onto `existing`: the new stored object and
/// whether it changed, or the conflicts with other managers.
fn ssa(
    store: &mut Store,
    existing: Option<Stored>,
    manager: &str,
    config: &Value,
    force: bool,
) -> Result<(Stored, bool), Conflicts> {
    let mut applied = BTreeSet::new();
    leaf_paths(config, "", &mut applied);
    let mut stored = existing.clone().unwrap_or_else(|| Stored {
        object: json!({"apiVersion": config["apiVersion"], "kind": config["kind"],
                       "metadata": {"name": config["metadata"]["name"]}}),
        managers: BTreeMap::new(),
    });
    if let Some(ns) = config["metadata"]["namespace"].as_str() {
        stored.object["metadata"]["namespace"] = json!(ns);
    }
    let mut conflicts = Vec::new();
    for path in &applied {
        for (other, fields) in &stored.managers {
            if other != manager
                && fields.contains(path)
                && at(&stored.object, path) != at(config, path)
            {
                conflicts.push((other.clone(), path.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for (other, path) in &conflicts {
        if let Some(fields) = stored.managers.get_mut(other) {
            fields.remove(path);
        }
    }
    let before = stored.object.clone();
    let previous = stored.managers.get(manager).cloned().unwrap_or_default();
    for path in previous.difference(&applied) {
        let owned_elsewhere = stored
            .managers
            .iter()
            .any(|(m, f)| m != manager && f.contains(path));
        if !owned_elsewhere {
            remove(&mut stored.object, path);
        }
    }
    for path in &applied {
        if let Some(value) = at(config, path) {
            set(&mut stored.object, path, value.clone());
        }
    }
    stored.managers.insert(manager.to_string(), applied);
    let changed = existing
        .as_ref()
        .is_none_or(|e| e.object != stored.object || e.managers != stored.managers);
    if changed {
        store.resource_version += 1;
        let meta = &mut stored.object["metadata"];
        meta["resourceVersion"] = json!(store.resource_version.to_string());
        if existing.is_none() {
            meta["uid"] = json!(format!("uid-{}", store.resource_version));
            meta["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
            meta["generation"] = json!(1);
        } else if before.get("spec") != stored.object.get("spec") {
            let generation = before["metadata"]["generation"].as_i64().unwrap_or(1);
            stored.object["metadata"]["generation"] = json!(generation + 1);
        }
    }
    Ok((stored, changed))
}

/// 422 unless the object deserializes into its k8s-openapi type.
fn typed_check(kind: &str, object: &Value) -> Result<(), String> {
    use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Service};
    fn check<T: serde::de::DeserializeOwned>(object: &Value) -> Result<(), String> {
        serde_json::from_value::<T>(object.clone())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    match kind {
        "Namespace" => check::<Namespace>(object),
        "Node" => check::<Node>(object),
        "Pod" => check::<Pod>(object),
        "ConfigMap" => check::<ConfigMap>(object),
        "Service" => check::<Service>(object),
        "Deployment" => check::<Deployment>(object),
        "StatefulSet" => check::<StatefulSet>(object),
        "Job" => check::<Job>(object),
        other => Err(format!("unknown kind `{other}`")),
    }
}

impl TestServer {
    /// Runs `f` on the server's runtime (for tests that drive a kube client in-process).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
}

#[cfg(test)]
mod selector_tests {
    use super::*;

    #[test]
    fn selectors() {
        let o = json!({"metadata": {"labels": {"a": "1", "b": "x"}}});
        assert!(matches_selector(&o, "a=1,b in (x,y)"));
        assert!(!matches_selector(&o, "a=1,b in (y)"));
        assert!(matches_selector(&o, "!c,a!=2"));
        assert!(!matches_selector(&o, "c"));
        assert!(matches_selector(&o, "b notin (y)"));
    }
}
