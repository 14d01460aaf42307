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
//! - POST (create, 409 `AlreadyExists`) and PUT (replace, the body's `resourceVersion` a
//!   precondition: 409 `Conflict`), as Leases are written;
//! - DELETE; 404 for objects and for writes into a missing namespace; 422 for an object that
//!   does not deserialize into its k8s-openapi type, and for a Job whose `spec.template` or
//!   `spec.selector` changes (`field is immutable`); 401 without the bearer token;
//! - WATCH (`?watch=true`) on namespaced and cluster-scoped collections: newline-delimited
//!   JSON events (`ADDED`, `MODIFIED`, `DELETED`; `BOOKMARK` with `allowWatchBookmarks`) from
//!   every write (applies, deletes, seeded objects and status), starting after
//!   `resourceVersion` (or with the current objects as `ADDED` when it is unset or `0`),
//!   ended after `timeoutSeconds`; a `resourceVersion` older than the retained history
//!   ([`TestServer::compact`]) gets one `ERROR` event, a `410` `Expired` Status, as the API
//!   server's watch cache answers;
//! - controllers on request ([`TestServer::run_controllers`]): workload status (ready
//!   replicas, Job completion) written a set delay after each spec change;
//! - injectable faults: status codes (429, 500, 403, …) for matching requests, 429 with
//!   `Retry-After`, dropped connections after N writes, latency.
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
    /// A watch answered with one `ERROR` event, `410 Expired`, as if its resourceVersion
    /// had been compacted away.
    Expired,
    /// 429 with a `Retry-After` header and `details.retryAfterSeconds`, as the API server's
    /// priority and fairness answers.
    Throttle { retry_after_seconds: u32 },
}

/// A fault injected into matching requests.
#[derive(Clone, Debug)]
pub struct Fault {
    /// `GET`, `PATCH`, `DELETE`; `None` matches every method.
    pub method: Option<Method>,
    /// A substring of the path and query (`/jobs/`, `watch=true`); `None` matches every
    /// request.
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

/// `(plural, namespace, name)`; the namespace is empty for cluster-scoped objects.
type Key = (String, String, String);

/// A change, as a watch reports it.
#[derive(Clone, Debug)]
struct Event {
    resource_version: u64,
    plural: String,
    namespace: String,
    /// `ADDED`, `MODIFIED`, `DELETED`.
    kind: &'static str,
    /// The object after the change (for `DELETED`, its last state with the deletion's
    /// resourceVersion).
    object: Value,
    /// The object before the change, if it existed: a watch with a label selector sees an
    /// object that stops matching as DELETED, one that starts matching as ADDED.
    previous: Option<Value>,
}

/// A watch that waits longer than this for events it was not sent is ended (the watch
/// cache drops too slow watchers the same way).
const WATCH_BUFFER: usize = 4096;

struct Store {
    resource_version: u64,
    objects: BTreeMap<Key, Stored>,
    faults: Vec<Fault>,
    writes: u64,
    latency: Duration,
    /// `METHOD path?query` of every request, in order (DELETE: and its propagation policy).
    log: Vec<String>,
    /// Every event since `compacted`, in order: what a watch from an older version replays.
    history: Vec<Event>,
    /// Watches from a resourceVersion below this are `410 Expired`.
    compacted: u64,
    /// Every event, to the open watches.
    events: tokio::sync::broadcast::Sender<Event>,
    /// How often a watch with `allowWatchBookmarks` gets a BOOKMARK.
    bookmark_interval: Duration,
}

impl Store {
    fn new() -> Store {
        Store {
            resource_version: 0,
            objects: BTreeMap::new(),
            faults: Vec::new(),
            writes: 0,
            latency: Duration::ZERO,
            log: Vec::new(),
            history: Vec::new(),
            compacted: 0,
            events: tokio::sync::broadcast::channel(WATCH_BUFFER).0,
            bookmark_interval: Duration::from_secs(1),
        }
    }

    /// Records a change the object at `key` went through; `object` carries its new
    /// resourceVersion.
    // INVARIANT: every bump of `resource_version` is followed by exactly one event, so a
    // watch's bookmarks never skip an event.
    fn record(&mut self, kind: &'static str, key: &Key, object: Value) {
        let event = Event {
            resource_version: self.resource_version,
            plural: key.0.clone(),
            namespace: key.1.clone(),
            kind,
            object,
            previous: self.objects.get(key).map(rendered),
        };
        self.history.push(event.clone());
        // No receiver (no open watch) is not an error.
        let _ = self.events.send(event);
    }

    /// Bumps the resourceVersion for a write to `stored` and records its event (before the
    /// new state is stored: the stored one is the event's previous state).
    fn bump(&mut self, kind: &'static str, key: &Key, stored: &mut Stored) {
        self.resource_version += 1;
        stored.object["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
        self.record(kind, key, rendered(stored));
    }
}

struct Shared {
    store: Mutex<Store>,
    token: String,
    /// Answer every request with 422 quoting its `Authorization` header (a server that
    /// echoes credentials in its errors).
    quote_authorization: std::sync::atomic::AtomicBool,
}

/// One test cluster: an API server on 127.0.0.1 with its own runtime.
pub struct TestServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: tokio::runtime::Runtime,
}

/// The resources the server knows: (group/version, plural, kind, namespaced).
const RESOURCES: [(&str, &str, &str, bool); 10] = [
    ("v1", "namespaces", "Namespace", false),
    ("v1", "nodes", "Node", false),
    ("v1", "pods", "Pod", true),
    ("v1", "configmaps", "ConfigMap", true),
    (
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
    ),
    ("v1", "services", "Service", true),
    ("apps/v1", "deployments", "Deployment", true),
    ("apps/v1", "statefulsets", "StatefulSet", true),
    ("batch/v1", "jobs", "Job", true),
    ("coordination.k8s.io/v1", "leases", "Lease", true),
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
            store: Mutex::new(Store::new()),
            token: token.to_string(),
            quote_authorization: std::sync::atomic::AtomicBool::new(false),
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

    /// From now on, every request is answered 422 with its `Authorization` header quoted in
    /// the message, whatever credential it carries.
    pub fn quote_authorization(&self) {
        self.shared
            .quote_authorization
            .store(true, std::sync::atomic::Ordering::Relaxed);
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
        let existing = store.objects.get(&key).cloned();
        let (mut result, mut changed) =
            ssa(&store, existing.clone(), manager, &object, true).expect("seed applies");
        // Status is the server's (kubelet's, controllers') to write: seeded as given.
        if let Some(status) = object.get("status")
            && result.object.get("status") != Some(status)
        {
            result.object["status"] = status.clone();
            changed = true;
        }
        if changed {
            let kind = if existing.is_some() {
                "MODIFIED"
            } else {
                "ADDED"
            };
            store.bump(kind, &key, &mut result);
        }
        store.objects.insert(key, result);
    }

    /// Drops the event history: a watch from any resourceVersion before now is `410 Expired`.
    pub fn compact(&self) {
        let mut store = self.store();
        store.compacted = store.resource_version;
        store.history.clear();
    }

    /// How often watches that allow bookmarks get one (default 1 s).
    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.store().bookmark_interval = interval;
    }

    /// Starts the workload controllers: `ready_after` each change of a Deployment's,
    /// StatefulSet's or Job's spec (a new generation), its status says rolled out (every
    /// replica updated, ready and available; the Job complete), as the kube-controller-manager
    /// and kubelets would once the pods run. The status write is an ordinary write: a new
    /// resourceVersion and a MODIFIED event.
    pub fn run_controllers(&self, ready_after: Duration) {
        let shared = self.shared.clone();
        let mut events = self.store().events.subscribe();
        self.runtime.spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if event.kind == "DELETED" || rolled_out_status(&event.object).is_none() {
                    continue;
                }
                let shared = shared.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(ready_after).await;
                    let key = (event.plural, event.namespace, name_of(&event.object));
                    let mut store = shared.store.lock().expect("store lock");
                    let Some(mut stored) = store.objects.get(&key).cloned() else {
                        return;
                    };
                    // A newer generation got its own timer.
                    if stored.object["metadata"]["generation"]
                        != event.object["metadata"]["generation"]
                    {
                        return;
                    }
                    if let Some(status) = rolled_out_status(&stored.object) {
                        stored.object["status"] = status;
                        store.bump("MODIFIED", &key, &mut stored);
                        store.objects.insert(key, stored);
                    }
                });
            }
        });
    }

    /// The server's current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store().resource_version
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
        // A DELETE's options travel in its body: the propagation policy is logged with it.
        let propagation = (method == Method::DELETE)
            .then(|| serde_json::from_slice::<Value>(&body).ok())
            .flatten()
            .and_then(|o| o["propagationPolicy"].as_str().map(str::to_string))
            .map_or(String::new(), |p| format!(" propagationPolicy={p}"));
        store.log.push(format!(
            "{method} {}{propagation}",
            uri.path_and_query().map_or("", |p| p.as_str())
        ));
        store.latency
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if shared
        .quote_authorization
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        let quoted = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        let message = format!("request with `Authorization: {quoted}` is invalid");
        return status(422, "Invalid", &message, Vec::new());
    }
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {}", shared.token));
    if !authorized {
        return status(401, "Unauthorized", "Unauthorized", Vec::new());
    }
    let path_and_query = uri.path_and_query().map_or("", |p| p.as_str());
    if let Some(fault) = take_fault(&shared, &method, path_and_query) {
        match fault {
            FaultKind::Drop => {
                // Unwinding out of the handler aborts the connection's task: the client sees
                // the connection close with no answer. `resume_unwind` skips the panic hook.
                std::panic::resume_unwind(Box::new("injected connection drop"));
            }
            FaultKind::Expired => {
                let current = shared.store.lock().expect("store lock").resource_version;
                return stream_response(futures::stream::iter([expired(0, current)]));
            }
            FaultKind::Throttle {
                retry_after_seconds,
            } => {
                let doc = json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Too many requests, please try again later.",
                    "reason": "TooManyRequests", "code": 429,
                    "details": {"retryAfterSeconds": retry_after_seconds},
                });
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", retry_after_seconds.to_string())],
                    axum::Json(doc),
                )
                    .into_response();
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
    if method == Method::GET && target.name.is_none() && is_watch(&params) {
        return watch(&shared, &target, &params);
    }
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
        ("POST", None) => create(&mut store, &target, &body),
        ("PUT", Some(name)) => replace(&mut store, &target, name, &body),
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
                   "kind": kind, "verbs": ["get", "list", "watch", "patch", "delete"]})
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

fn is_watch(params: &BTreeMap<String, String>) -> bool {
    params.get("watch").is_some_and(|w| w == "true" || w == "1")
}

/// How long a watch without `timeoutSeconds` stays open.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(290);

/// A watch of a collection: its target and selector.
struct Watch {
    plural: String,
    namespace: Option<String>,
    selector: String,
    kind: String,
    group_version: String,
}

impl Watch {
    /// The event this watch is sent for `event`, if any: label selectors are applied to the
    /// object before and after the change, as the API server does.
    fn sees(&self, event: &Event) -> Option<Bytes> {
        if event.plural != self.plural
            || self
                .namespace
                .as_ref()
                .is_some_and(|ns| *ns != event.namespace)
        {
            return None;
        }
        let now = matches_selector(&event.object, &self.selector);
        let before = event
            .previous
            .as_ref()
            .is_some_and(|p| matches_selector(p, &self.selector));
        let kind = match (event.kind, before, now) {
            ("DELETED", _, true) | ("MODIFIED", true, false) => "DELETED",
            ("DELETED", _, false) => return None,
            ("MODIFIED", false, true) => "ADDED",
            (kind, _, true) => kind,
            (_, _, false) => return None,
        };
        Some(line(kind, event.object.clone()))
    }

    fn bookmark(&self, resource_version: u64) -> Bytes {
        line(
            "BOOKMARK",
            json!({"kind": self.kind, "apiVersion": self.group_version,
                   "metadata": {"resourceVersion": resource_version.to_string()}}),
        )
    }
}

/// One watch event, a line of JSON.
fn line(kind: &str, object: Value) -> Bytes {
    let mut text = json!({"type": kind, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

/// The watch cache's answer to a resourceVersion older than its history: one ERROR event.
fn expired(asked: u64, current: u64) -> Bytes {
    line(
        "ERROR",
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("too old resource version: {asked} ({current})"),
               "reason": "Expired", "code": 410}),
    )
}

/// `GET …?watch=true`: the events after `resourceVersion` (or the current objects as ADDED
/// when it is unset or `0`), then every new one as it happens, until `timeoutSeconds`.
fn watch(shared: &Arc<Shared>, target: &Target, params: &BTreeMap<String, String>) -> Response {
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(DEFAULT_WATCH_TIMEOUT, Duration::from_secs);
    let bookmarks = params
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true" || b == "1");
    let watch = Watch {
        plural: target.plural.clone(),
        namespace: target.namespace.clone(),
        selector: params.get("labelSelector").cloned().unwrap_or_default(),
        kind: target.kind.clone(),
        group_version: target.group_version.clone(),
    };
    let store = shared.store.lock().expect("store lock");
    let from = params.get("resourceVersion").map_or("", String::as_str);
    let mut backlog = Vec::new();
    let start = match from {
        "" | "0" => {
            // "Any" version: the current state as synthetic ADDED events.
            for ((plural, ns, _), stored) in &store.objects {
                let object = rendered(stored);
                if *plural == watch.plural
                    && watch.namespace.as_ref().is_none_or(|w| w == ns)
                    && matches_selector(&object, &watch.selector)
                {
                    backlog.push(line("ADDED", object));
                }
            }
            store.resource_version
        }
        text => match text.parse::<u64>() {
            Err(_) => {
                return status(
                    400,
                    "BadRequest",
                    &format!("invalid resource version: {text}"),
                    Vec::new(),
                );
            }
            Ok(asked) if asked < store.compacted => {
                let body = expired(asked, store.resource_version);
                return stream_response(futures::stream::iter([body]));
            }
            Ok(asked) => {
                backlog.extend(
                    store
                        .history
                        .iter()
                        .filter(|e| e.resource_version > asked)
                        .filter_map(|e| watch.sees(e)),
                );
                asked
            }
        },
    };
    let mut receiver = store.events.subscribe();
    let mut seen = store.resource_version;
    let interval = store.bookmark_interval;
    drop(store);
    let (sender, lines) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        for event in backlog {
            if sender.send(event).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        loop {
            let next = tokio::select! {
                () = sender.closed() => return,
                () = tokio::time::sleep_until(deadline) => {
                    // A last bookmark as the watch ends, so the client resumes from here.
                    if bookmarks {
                        let _ = sender.send(watch.bookmark(seen)).await;
                    }
                    return;
                }
                _ = ticks.tick(), if bookmarks => watch.bookmark(seen),
                event = receiver.recv() => match event {
                    Ok(event) => {
                        seen = seen.max(event.resource_version);
                        match watch.sees(&event) {
                            Some(line) if event.resource_version > start => line,
                            _ => continue,
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let _ = sender.send(expired(seen, seen)).await;
                        return;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
            };
            if sender.send(next).await.is_err() {
                return;
            }
        }
    });
    stream_response(futures::stream::unfold(lines, |mut lines| async move {
        lines.recv().await.map(|line| (line, lines))
    }))
}

/// A 200 whose body is `lines`, sent as they come (chunked).
fn stream_response(lines: impl futures::Stream<Item = Bytes> + Send + 'static) -> Response {
    use futures::StreamExt;
    let body = axum::body::Body::from_stream(lines.map(Ok::<_, std::convert::Infallible>));
    (StatusCode::OK, [("content-type", "application/json")], body).into_response()
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
    if !is_dry_run(params)
        && let Some(mut last) = store.objects.remove(&key)
    {
        store.writes += 1;
        store.bump("DELETED", &key, &mut last);
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
    let (stored, changed) = match ssa(store, existing.clone(), manager, &config, force) {
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
    if let Some(old) = &existing
        && let Some(response) = immutable(target, name, &old.object, &stored.object)
    {
        return response;
    }
    if let Err(e) = typed_check(&target.kind, &stored.object) {
        return status(
            422,
            "Invalid",
            &format!("{} \"{name}\" is invalid: {e}", target.kind),
            Vec::new(),
        );
    }
    let mut stored = stored;
    if !dry_run {
        if changed {
            store.writes += 1;
            let kind = if existing.is_some() {
                "MODIFIED"
            } else {
                "ADDED"
            };
            store.bump(kind, &key, &mut stored);
        }
        store.objects.insert(key, stored.clone());
    }
    ok(rendered(&stored))
}

/// POST: a new object (409 `AlreadyExists` when there is one), as Leases are created.
fn create(store: &mut Store, target: &Target, body: &[u8]) -> Response {
    let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the body is not JSON", Vec::new());
    };
    let name = name_of(&object);
    if let Err(e) = typed_check(&target.kind, &object) {
        return status(422, "Invalid", &e, Vec::new());
    }
    let key = key_of(target, &name);
    if store.objects.contains_key(&key) {
        let message = format!("{} \"{name}\" already exists", target.plural);
        return status(409, "AlreadyExists", &message, Vec::new());
    }
    if let Some(ns) = &target.namespace {
        object["metadata"]["namespace"] = json!(ns);
    }
    let mut stored = Stored {
        object,
        managers: BTreeMap::new(),
    };
    store.writes += 1;
    store.bump("ADDED", &key, &mut stored);
    store.objects.insert(key, stored.clone());
    (StatusCode::CREATED, axum::Json(rendered(&stored))).into_response()
}

/// PUT: the whole object replaced, its `resourceVersion` a precondition (409 `Conflict` when
/// the stored one is newer), as Leases are renewed.
fn replace(store: &mut Store, target: &Target, name: &str, body: &[u8]) -> Response {
    let Ok(object) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the body is not JSON", Vec::new());
    };
    let key = key_of(target, name);
    let Some(existing) = store.objects.get(&key).cloned() else {
        return status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", target.plural),
            Vec::new(),
        );
    };
    if object["metadata"]["resourceVersion"] != existing.object["metadata"]["resourceVersion"] {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again",
            target.plural
        );
        return status(409, "Conflict", &message, Vec::new());
    }
    if let Err(e) = typed_check(&target.kind, &object) {
        return status(422, "Invalid", &e, Vec::new());
    }
    let mut stored = Stored {
        object,
        managers: existing.managers,
    };
    store.writes += 1;
    store.bump("MODIFIED", &key, &mut stored);
    store.objects.insert(key, stored.clone());
    ok(rendered(&stored))
}

fn name_of(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The status a workload object has once rolled out, or `None` when it has it already (or
/// is not a workload).
fn rolled_out_status(object: &Value) -> Option<Value> {
    let generation = object["metadata"]["generation"].clone();
    let status = match object["kind"].as_str()? {
        "Deployment" | "StatefulSet" => {
            let replicas = object["spec"]["replicas"].as_i64().unwrap_or(1);
            json!({"observedGeneration": generation, "replicas": replicas,
                   "updatedReplicas": replicas, "readyReplicas": replicas,
                   "availableReplicas": replicas, "currentReplicas": replicas})
        }
        "Job" => {
            let completions = object["spec"]["completions"].as_i64().unwrap_or(1);
            json!({"succeeded": completions, "active": 0,
                   "conditions": [{"type": "Complete", "status": "True"}]})
        }
        _ => return None,
    };
    // The status carries the observed generation: equal means rolled out already.
    (object.get("status") != Some(&status)).then_some(status)
}

/// The fields of a kind that cannot change once created, as JSON pointers. A Job's pod
/// template and selector are immutable (the API server's Job validation).
fn immutable_fields(plural: &str) -> &'static [&'static str] {
    match plural {
        "jobs" => &["/spec/template", "/spec/selector"],
        _ => &[],
    }
}

/// 422 `field is immutable` when the update changes an immutable field, as the API server
/// words it: `Job.batch "x" is invalid: spec.template: Invalid value: …: field is immutable`.
fn immutable(target: &Target, name: &str, old: &Value, new: &Value) -> Option<Response> {
    let changed: Vec<&str> = immutable_fields(&target.plural)
        .iter()
        .copied()
        .filter(|path| old.pointer(path) != new.pointer(path))
        .collect();
    if changed.is_empty() {
        return None;
    }
    let group = target.group_version.split_once('/').map_or("", |(g, _)| g);
    let causes: Vec<Value> = changed
        .iter()
        .map(|path| {
            json!({"reason": "FieldValueInvalid",
                   "message": "Invalid value: \"object\": field is immutable",
                   "field": dotted(path).trim_start_matches('.')})
        })
        .collect();
    let details: Vec<String> = changed
        .iter()
        .map(|path| {
            format!(
                "{}: Invalid value: \"object\": field is immutable",
                dotted(path).trim_start_matches('.')
            )
        })
        .collect();
    let message = format!(
        "{}.{group} \"{name}\" is invalid: {}",
        target.kind,
        details.join(", ")
    );
    Some(status(422, "Invalid", &message, causes))
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
    store: &Store,
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
        // The resourceVersion is set when the write is committed (`Store::bump`).
        let meta = &mut stored.object["metadata"];
        if existing.is_none() {
            meta["uid"] = json!(format!("uid-{}", store.resource_version + 1));
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
    use k8s_openapi::api::core::v1::{
        ConfigMap, Namespace, Node, PersistentVolumeClaim, Pod, Service,
    };
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
        "PersistentVolumeClaim" => check::<PersistentVolumeClaim>(object),
        "Service" => check::<Service>(object),
        "Deployment" => check::<Deployment>(object),
        "StatefulSet" => check::<StatefulSet>(object),
        "Job" => check::<Job>(object),
        "Lease" => check::<k8s_openapi::api::coordination::v1::Lease>(object),
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

#[cfg(test)]
mod tests;
