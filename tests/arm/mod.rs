//! A test double of Azure Resource Manager and of the Microsoft Entra token endpoint, for the
//! parts berth uses: `Microsoft.KubernetesConfiguration` extensions (2025-03-01) and
//! fluxConfigurations (2025-04-01) under a connected cluster, their asynchronous operations
//! (create, update, and `FluxConfigurations_Delete`), write-only protected settings, the
//! client-credentials token flow, and App Service's managed-identity token endpoint. Written from the published REST specification (its
//! paths, status codes, headers, error envelope and examples); every PUT body is validated
//! against the JSON Schemas in `tests/data/arm/` written from it. HTTPS on 127.0.0.1 with a
//! test CA. What it models and what it does not: docs/runtime-arc.md.
//!
//! Faults are queued per request kind and consumed once each: throttling (429 with
//! `Retry-After`), conflicts (409), server errors (500), a forbidden write (403), an expired
//! token (401 `ExpiredAuthenticationToken`, after which that token stays refused).

#![allow(dead_code)]

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
pub const CLIENT_ID: &str = "0b6d8b9a-berth-test-client";
pub const CLIENT_SECRET: &str = "client-secret-do-not-print";
/// The Kubernetes service-account token a workload-identity pod would hold.
pub const FEDERATED_TOKEN: &str = "federated-sa-token-do-not-print";
/// The secret an App Service managed-identity endpoint expects in `X-IDENTITY-HEADER`.
pub const IDENTITY_HEADER: &str = "identity-header-do-not-print";
/// Where the double serves the App Service managed-identity token endpoint.
pub const MSI_PATH: &str = "/msi/token";
pub const FLUX_API: &str = "2025-04-01";
pub const EXTENSION_API: &str = "2025-03-01";

/// A fault for the next matching request.
#[derive(Clone, Debug)]
pub enum Fault {
    /// 429 `TooManyRequests` with `Retry-After: seconds`.
    Throttle { seconds: u64 },
    /// 409 `Conflict`: another operation is in progress on the resource.
    Conflict,
    /// 500 `InternalServerError`.
    ServerError,
    /// 403 `AuthorizationFailed`.
    Forbidden,
    /// 401 `ExpiredAuthenticationToken`; the token presented stays refused afterwards.
    ExpireToken,
}

/// Which requests a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    AnyArm,
    PutConfiguration,
    PutExtension,
    GetConfiguration,
    DeleteConfiguration,
}

/// One logged request: method, path (no query), status answered.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub status: u16,
}

struct Operation {
    /// Polls still answered `InProgress`.
    polls_left: u32,
    /// `Succeeded`, or `Failed` with a code and message.
    failure: Option<(String, String)>,
    resource: String,
    /// A delete: the resource goes when the operation succeeds.
    delete: bool,
}

#[derive(Default)]
struct Inner {
    resources: BTreeMap<String, Value>,
    operations: HashMap<String, Operation>,
    next_operation: u64,
    faults: VecDeque<(On, Fault)>,
    valid_tokens: Vec<String>,
    expired_tokens: Vec<String>,
    tokens_issued: u32,
    log: Vec<Logged>,
    /// How many polls an operation stays `InProgress`.
    lro_polls: u32,
    /// The next operation ends `Failed` with this code and message.
    fail_next_operation: Option<(String, String)>,
    /// Each Flux configuration's `configurationProtectedSettings` as last PUT: write-only,
    /// never in a GET.
    protected: BTreeMap<String, Value>,
}

#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    flux_schema: Arc<jsonschema::Validator>,
    extension_schema: Arc<jsonschema::Validator>,
    base: Arc<Mutex<String>>,
}

/// The running double: its URL, the CA to trust, and a handle on its state.
pub struct ArmDouble {
    pub url: String,
    pub ca_file: PathBuf,
    shared: Shared,
    _dir: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
}

fn schema(name: &str) -> jsonschema::Validator {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/arm")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let value: Value = serde_json::from_str(&text).expect("schema JSON");
    jsonschema::validator_for(&value).expect("a valid schema")
}

impl ArmDouble {
    pub fn start() -> ArmDouble {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ca_file, cert, key) = super::test_tls::tls_files(dir.path());
        let config = berth_runtime::agent::tls::server_config(&cert, &key).expect("TLS config");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let shared = Shared {
            inner: Arc::new(Mutex::new(Inner::default())),
            flux_schema: Arc::new(schema("fluxConfiguration-2025-04-01.schema.json")),
            extension_schema: Arc::new(schema("extension-2025-03-01.schema.json")),
            base: Arc::new(Mutex::new(String::new())),
        };
        let router = Router::new()
            .route("/{tenant}/oauth2/v2.0/token", post(token))
            .route(MSI_PATH, axum::routing::get(managed_identity))
            .fallback(any(arm))
            .with_state(shared.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let url = format!("https://127.0.0.1:{port}");
        *shared.base.lock().expect("lock") = url.clone();
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let router = router.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper_util::service::TowerToHyperService::new(router);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        ArmDouble {
            url,
            ca_file,
            shared,
            _dir: dir,
            _runtime: runtime,
        }
    }

    /// The environment berth needs to use this double with a service principal.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("BERTH_ARM_ENDPOINT", self.url.clone()),
            ("BERTH_ARM_CA_FILE", self.ca_file.display().to_string()),
            ("AZURE_AUTHORITY_HOST", self.url.clone()),
            ("AZURE_TENANT_ID", TENANT.to_string()),
            ("AZURE_CLIENT_ID", CLIENT_ID.to_string()),
            ("AZURE_CLIENT_SECRET", CLIENT_SECRET.to_string()),
            ("BERTH_AZURE_CREDENTIAL", String::new()),
        ]
    }

    pub fn fault(&self, on: On, fault: Fault) {
        self.lock().faults.push_back((on, fault));
    }

    /// Operations stay `InProgress` for `polls` polls.
    pub fn set_lro_polls(&self, polls: u32) {
        self.lock().lro_polls = polls;
    }

    pub fn fail_next_operation(&self, code: &str, message: &str) {
        self.lock().fail_next_operation = Some((code.to_string(), message.to_string()));
    }

    pub fn log(&self) -> Vec<Logged> {
        self.lock().log.clone()
    }

    pub fn clear_log(&self) {
        self.lock().log.clear();
    }

    /// A token ARM accepts, issued as if Entra had given it to someone else (the Azure CLI's
    /// `az login`), for a stub `az` to print.
    pub fn issue_token(&self) -> String {
        let mut inner = self.lock();
        inner.tokens_issued += 1;
        let token = format!("cli-token-{}-do-not-print", inner.tokens_issued);
        inner.valid_tokens.push(token.clone());
        token
    }

    pub fn tokens_issued(&self) -> u32 {
        self.lock().tokens_issued
    }

    /// The stored resource at `path` (a resource id, any case).
    pub fn resource(&self, path: &str) -> Option<Value> {
        self.lock()
            .resources
            .get(&path.to_ascii_lowercase())
            .cloned()
    }

    /// Puts a resource in place, as if created by someone else (the portal, the CLI).
    pub fn insert(&self, path: &str, resource: Value) {
        self.lock()
            .resources
            .insert(path.to_ascii_lowercase(), resource);
    }

    /// The protected settings the last PUT of the configuration at `path` carried (decoded
    /// from base64), as the Arc agent would hand them to Flux.
    pub fn protected_settings(&self, path: &str) -> Option<BTreeMap<String, String>> {
        let inner = self.lock();
        let settings = inner.protected.get(&path.to_ascii_lowercase())?;
        Some(
            settings
                .as_object()?
                .iter()
                .map(|(k, v)| {
                    let bytes = base64::Engine::decode(
                        &base64::engine::general_purpose::STANDARD,
                        v.as_str().unwrap_or(""),
                    )
                    .expect("validated as base64");
                    (k.clone(), String::from_utf8_lossy(&bytes).into_owned())
                })
                .collect(),
        )
    }

    /// Writes the read-only status fields of a stored Flux configuration, as the cluster's
    /// Flux agent reports them to ARM.
    pub fn report_flux_status(&self, path: &str, status: Value) {
        let mut inner = self.lock();
        let resource = inner
            .resources
            .get_mut(&path.to_ascii_lowercase())
            .expect("the configuration exists");
        let props = resource["properties"].as_object_mut().expect("properties");
        for (k, v) in status.as_object().expect("an object") {
            props.insert(k.clone(), v.clone());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.inner.lock().expect("lock")
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [("content-type", "application/json")],
        json!({ "error": { "code": code, "message": message } }).to_string(),
    )
        .into_response()
}

/// Microsoft Entra's token endpoint, client-credentials grant.
async fn token(State(shared): State<Shared>, Path(tenant): Path<String>, body: Bytes) -> Response {
    let form: HashMap<String, String> = url_form(&body);
    let refuse = |code: &str, description: &str| {
        (
            StatusCode::UNAUTHORIZED,
            [("content-type", "application/json")],
            json!({ "error": code, "error_description": description }).to_string(),
        )
            .into_response()
    };
    if tenant != TENANT {
        return refuse("invalid_tenant", "AADSTS90002: Tenant not found.");
    }
    if form.get("grant_type").map(String::as_str) != Some("client_credentials")
        || form.get("client_id").map(String::as_str) != Some(CLIENT_ID)
    {
        return refuse(
            "unauthorized_client",
            "AADSTS700016: Application not found.",
        );
    }
    let assertion_type = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
    match (form.get("client_secret"), form.get("client_assertion")) {
        (Some(secret), None) if secret == CLIENT_SECRET => {}
        (Some(_), None) => {
            return refuse(
                "invalid_client",
                "AADSTS7000215: Invalid client secret provided.",
            );
        }
        // Workload identity: the federated token as a client assertion.
        (None, Some(assertion))
            if form.get("client_assertion_type").map(String::as_str) == Some(assertion_type)
                && assertion == FEDERATED_TOKEN => {}
        _ => {
            return refuse(
                "invalid_client",
                "AADSTS700024: Client assertion is not within its valid time range.",
            );
        }
    }
    let base = shared.base.lock().expect("lock").clone();
    if form.get("scope").map(String::as_str) != Some(&format!("{base}/.default")) {
        return refuse(
            "invalid_scope",
            "AADSTS70011: The provided scope is not valid.",
        );
    }
    let mut inner = shared.inner.lock().expect("lock");
    inner.tokens_issued += 1;
    let access_token = format!("arm-token-{}-do-not-print", inner.tokens_issued);
    inner.valid_tokens.push(access_token.clone());
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        json!({
            "token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
            "access_token": access_token,
        })
        .to_string(),
    )
        .into_response()
}

/// The App Service managed-identity endpoint (`IDENTITY_ENDPOINT`, API 2019-08-01), as Azure
/// App Service, Functions and Container Apps serve it: `GET ?api-version=2019-08-01&resource=…
/// [&client_id=…]` with the `X-IDENTITY-HEADER` secret; the answer
/// `{ access_token, expires_on (seconds, as a string), resource, token_type }`.
async fn managed_identity(
    State(shared): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let refuse = |status: StatusCode, message: &str| {
        (
            status,
            [("content-type", "application/json")],
            json!({ "statusCode": status.as_u16(), "message": message }).to_string(),
        )
            .into_response()
    };
    if headers
        .get("x-identity-header")
        .and_then(|v| v.to_str().ok())
        != Some(IDENTITY_HEADER)
    {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "The identity header is missing or wrong.",
        );
    }
    if query.get("api-version").map(String::as_str) != Some("2019-08-01") {
        return refuse(StatusCode::BAD_REQUEST, "The api-version is not supported.");
    }
    if query.get("client_id").is_some_and(|id| id != CLIENT_ID) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "The requested identity has not been assigned to this resource.",
        );
    }
    let base = shared.base.lock().expect("lock").clone();
    let resource = query.get("resource").cloned().unwrap_or_default();
    if resource != base {
        return refuse(StatusCode::BAD_REQUEST, "The resource is not valid.");
    }
    let mut inner = shared.inner.lock().expect("lock");
    inner.tokens_issued += 1;
    let access_token = format!("msi-token-{}-do-not-print", inner.tokens_issued);
    inner.valid_tokens.push(access_token.clone());
    let expires_on = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() + 3600)
        .unwrap_or(0);
    json_response(
        StatusCode::OK,
        &json!({
            "access_token": access_token, "expires_on": expires_on.to_string(),
            "resource": resource, "token_type": "Bearer",
        }),
    )
}

fn url_form(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            Some((decode(k), decode(v)))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a path under a cluster names.
enum Target {
    Extension(String),
    Extensions,
    Configuration(String),
    Operation(String),
}

fn parse(path: &str) -> Option<(String, Target)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // subscriptions/S/resourceGroups/G/providers/RP/KIND/NAME/providers/Microsoft.KubernetesConfiguration/...
    if parts.len() < 10
        || !parts[0].eq_ignore_ascii_case("subscriptions")
        || !parts[2].eq_ignore_ascii_case("resourceGroups")
        || !parts[4].eq_ignore_ascii_case("providers")
        || !parts[8].eq_ignore_ascii_case("providers")
        || !parts[9].eq_ignore_ascii_case("Microsoft.KubernetesConfiguration")
        || !parts[6].chars().all(|c| c.is_ascii_alphabetic())
    {
        return None;
    }
    let cluster = format!("/{}", parts[..8].join("/"));
    let target = match &parts[10..] {
        [kind] if kind.eq_ignore_ascii_case("extensions") => Target::Extensions,
        [kind, name] if kind.eq_ignore_ascii_case("extensions") => {
            Target::Extension(name.to_string())
        }
        [kind, name] if kind.eq_ignore_ascii_case("fluxConfigurations") => {
            Target::Configuration(name.to_string())
        }
        [_, _, ops, id] if ops.eq_ignore_ascii_case("operations") => {
            Target::Operation(id.to_string())
        }
        _ => return None,
    };
    Some((cluster, target))
}

/// Everything under `/subscriptions/…`.
async fn arm(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let response = handle(&shared, &method, &path, &query, &headers, &body);
    shared.inner.lock().expect("lock").log.push(Logged {
        method: method.to_string(),
        path,
        status: response.status().as_u16(),
    });
    response
}

fn handle(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let mut inner = shared.inner.lock().expect("lock");
    // Authentication first, as ARM's front door does.
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let Some(bearer) = bearer else {
        return error(
            StatusCode::UNAUTHORIZED,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
        );
    };
    if inner.expired_tokens.contains(&bearer) {
        return expired();
    }
    if !inner.valid_tokens.contains(&bearer) {
        return error(
            StatusCode::UNAUTHORIZED,
            "InvalidAuthenticationToken",
            "The access token is invalid.",
        );
    }
    let Some((cluster, target)) = parse(path) else {
        return error(
            StatusCode::NOT_FOUND,
            "InvalidResourceType",
            "The resource type could not be found in the namespace 'Microsoft.KubernetesConfiguration'.",
        );
    };
    let api = query.get("api-version").cloned().unwrap_or_default();
    let wanted = match target {
        Target::Extension(_) | Target::Extensions => EXTENSION_API,
        Target::Configuration(_) | Target::Operation(_) => {
            if path.to_ascii_lowercase().contains("/extensions/") {
                EXTENSION_API
            } else {
                FLUX_API
            }
        }
    };
    if api.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    if api != wanted {
        return error(
            StatusCode::BAD_REQUEST,
            "NoRegisteredProviderFound",
            &format!("No registered resource provider found for API version '{api}'."),
        );
    }
    let on = match (&target, method.as_str()) {
        (Target::Configuration(_), "PUT") => On::PutConfiguration,
        (Target::Extension(_), "PUT") => On::PutExtension,
        (Target::Configuration(_), "GET") => On::GetConfiguration,
        (Target::Configuration(_), "DELETE") => On::DeleteConfiguration,
        _ => On::AnyArm,
    };
    if let Some(i) = inner
        .faults
        .iter()
        .position(|(when, _)| *when == on || *when == On::AnyArm)
    {
        let (_, fault) = inner.faults.remove(i).expect("present");
        match fault {
            Fault::Throttle { seconds } => {
                let mut r = error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "TooManyRequests",
                    "The request is being throttled.",
                );
                r.headers_mut()
                    .insert("retry-after", seconds.to_string().parse().expect("value"));
                return r;
            }
            Fault::Conflict => {
                return error(
                    StatusCode::CONFLICT,
                    "Conflict",
                    "Another operation is in progress on the resource.",
                );
            }
            Fault::ServerError => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalServerError",
                    "Encountered internal server error.",
                );
            }
            Fault::Forbidden => {
                return error(
                    StatusCode::FORBIDDEN,
                    "AuthorizationFailed",
                    &format!(
                        "The client '{CLIENT_ID}' does not have authorization to perform action over scope '{path}'."
                    ),
                );
            }
            Fault::ExpireToken => {
                inner.valid_tokens.retain(|t| *t != bearer);
                inner.expired_tokens.push(bearer);
                return expired();
            }
        }
    }
    let base = shared.base.lock().expect("lock").clone();
    match (target, method.as_str()) {
        (Target::Extensions, "GET") => {
            let prefix = format!(
                "{}/providers/microsoft.kubernetesconfiguration/extensions/",
                cluster.to_ascii_lowercase()
            );
            let value: Vec<Value> = inner
                .resources
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(_, v)| v.clone())
                .collect();
            json_response(StatusCode::OK, &json!({ "value": value }))
        }
        (Target::Extension(_) | Target::Configuration(_), "GET") => {
            match inner.resources.get(&path.to_ascii_lowercase()) {
                Some(resource) => json_response(StatusCode::OK, resource),
                None => error(
                    StatusCode::NOT_FOUND,
                    "ResourceNotFound",
                    "The Resource was not found.",
                ),
            }
        }
        (Target::Operation(id), "GET") => match inner.operations.get_mut(&id) {
            None => error(
                StatusCode::NOT_FOUND,
                "ResourceNotFound",
                "The operation was not found.",
            ),
            Some(op) => {
                let op_id = path.to_string();
                if op.polls_left > 0 {
                    op.polls_left -= 1;
                    let mut r = json_response(
                        StatusCode::OK,
                        &json!({ "id": op_id, "name": id, "status": "InProgress", "properties": {} }),
                    );
                    r.headers_mut()
                        .insert("retry-after", "0".parse().expect("value"));
                    return r;
                }
                let resource = op.resource.clone();
                let failure = op.failure.clone();
                let (status, error_body) = match &failure {
                    None => ("Succeeded", Value::Null),
                    Some((code, message)) => {
                        ("Failed", json!({ "code": code, "message": message }))
                    }
                };
                if op.delete && failure.is_none() {
                    inner.resources.remove(&resource);
                } else if let Some(stored) = inner.resources.get_mut(&resource) {
                    stored["properties"]["provisioningState"] = json!(if failure.is_none() {
                        "Succeeded"
                    } else {
                        "Failed"
                    });
                    if let Some((_, message)) = &failure {
                        stored["properties"]["errorMessage"] = json!(message);
                    }
                }
                json_response(
                    StatusCode::OK,
                    &json!({ "id": op_id, "name": id, "status": status, "properties": {}, "error": error_body }),
                )
            }
        },
        (Target::Extension(name), "PUT") => {
            let Some(request) = validated(&shared.extension_schema, body) else {
                return invalid(&shared.extension_schema, body);
            };
            let id = path.to_string();
            let existing = inner.resources.contains_key(&path.to_ascii_lowercase());
            let mut resource = json!({
                "id": id, "name": name,
                "type": "Microsoft.KubernetesConfiguration/extensions",
                "properties": request["properties"].clone(),
            });
            let props = resource["properties"].as_object_mut().expect("object");
            props.insert("provisioningState".into(), json!("Creating"));
            props.insert("currentVersion".into(), Value::Null);
            props.insert("statuses".into(), json!([]));
            props.insert("isSystemExtension".into(), json!(false));
            props.remove("configurationProtectedSettings");
            start_operation(&mut inner, &base, path, resource, existing)
        }
        (Target::Configuration(name), "PUT") => {
            let Some(request) = validated(&shared.flux_schema, body) else {
                return invalid(&shared.flux_schema, body);
            };
            let key = path.to_ascii_lowercase();
            // The Flux extension must be installed first.
            let prefix = format!(
                "{}/providers/microsoft.kubernetesconfiguration/extensions/",
                cluster.to_ascii_lowercase()
            );
            let flux_installed = inner.resources.iter().any(|(k, v)| {
                k.starts_with(&prefix)
                    && v["properties"]["extensionType"].as_str() == Some("microsoft.flux")
            });
            if !flux_installed {
                return error(
                    StatusCode::BAD_REQUEST,
                    "ExtensionNotFound",
                    "The 'microsoft.flux' extension is not installed on the cluster.",
                );
            }
            let existing = inner.resources.get(&key).cloned();
            if let Some(live) = &existing {
                for create_only in ["scope", "namespace"] {
                    let before = &live["properties"][create_only];
                    let after = &request["properties"][create_only];
                    if !after.is_null() && before != after {
                        return error(
                            StatusCode::BAD_REQUEST,
                            "InvalidRequestParameter",
                            &format!(
                                "The property '{create_only}' cannot be changed after creation."
                            ),
                        );
                    }
                }
            }
            let mut props = request["properties"].clone();
            let p = props.as_object_mut().expect("object");
            // Write-only: kept aside, never returned. Their values are base64, as the Flux
            // extension decodes them (`httpsKey`, `sshPrivateKey`, …). A PUT replaces the
            // resource, so a PUT without them leaves none.
            match p.remove("configurationProtectedSettings") {
                Some(Value::Object(settings)) => {
                    if let Some((name, _)) = settings.iter().find(|(_, v)| {
                        base64::Engine::decode(
                            &base64::engine::general_purpose::STANDARD,
                            v.as_str().unwrap_or("!"),
                        )
                        .is_err()
                    }) {
                        return error(
                            StatusCode::BAD_REQUEST,
                            "InvalidRequestContent",
                            &format!("The protected setting '{name}' is not base64-encoded."),
                        );
                    }
                    inner.protected.insert(key.clone(), Value::Object(settings));
                }
                _ => {
                    inner.protected.remove(&key);
                }
            }
            // Defaults the specification declares.
            p.entry("scope").or_insert(json!("cluster"));
            p.entry("namespace").or_insert(json!("default"));
            p.entry("sourceKind").or_insert(json!("GitRepository"));
            p.entry("suspend").or_insert(json!(false));
            if let Some(k) = p.get_mut("kustomizations").and_then(Value::as_object_mut) {
                for (name, kustomization) in k.iter_mut() {
                    let k = kustomization.as_object_mut().expect("object");
                    k.insert("name".into(), json!(name));
                    k.entry("timeoutInSeconds").or_insert(json!(600));
                    k.entry("syncIntervalInSeconds").or_insert(json!(600));
                    k.entry("prune").or_insert(json!(false));
                    k.entry("force").or_insert(json!(false));
                    k.entry("wait").or_insert(json!(true));
                }
            }
            p.insert("provisioningState".into(), json!("Creating"));
            p.insert("complianceState".into(), json!("Pending"));
            p.insert("statuses".into(), json!([]));
            p.insert("errorMessage".into(), json!(""));
            p.insert("sourceSyncedCommitId".into(), Value::Null);
            p.insert("sourceUpdatedAt".into(), Value::Null);
            let resource = json!({
                "id": path, "name": name,
                "type": "Microsoft.KubernetesConfiguration/fluxConfigurations",
                "properties": props,
            });
            start_operation(&mut inner, &base, path, resource, existing.is_some())
        }
        // FluxConfigurations_Delete: `204` when there is nothing to delete; else `202` with
        // `Azure-AsyncOperation` and `Retry-After`, the resource `Deleting` until the operation
        // succeeds. `forceDelete` (a boolean query) is accepted; the double deletes the same
        // way with it.
        (Target::Configuration(_), "DELETE") => {
            if let Some(force) = query.get("forceDelete")
                && force != "true"
                && force != "false"
            {
                return error(
                    StatusCode::BAD_REQUEST,
                    "InvalidRequestParameter",
                    &format!("The value '{force}' is not valid for 'forceDelete'."),
                );
            }
            let key = path.to_ascii_lowercase();
            let Some(stored) = inner.resources.get_mut(&key) else {
                return StatusCode::NO_CONTENT.into_response();
            };
            stored["properties"]["provisioningState"] = json!("Deleting");
            inner.next_operation += 1;
            let id = format!("00000000-0000-0000-0000-{:012}", inner.next_operation);
            let failure = inner.fail_next_operation.take();
            let polls_left = inner.lro_polls;
            inner.operations.insert(
                id.clone(),
                Operation {
                    polls_left,
                    failure,
                    resource: key,
                    delete: true,
                },
            );
            let operation = format!("{base}{path}/operations/{id}?api-version={FLUX_API}");
            let mut r = StatusCode::ACCEPTED.into_response();
            r.headers_mut()
                .insert("azure-asyncoperation", operation.parse().expect("value"));
            r.headers_mut()
                .insert("retry-after", "0".parse().expect("value"));
            r
        }
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "The method is not allowed on the resource.",
        ),
    }
}

fn expired() -> Response {
    let mut r = error(
        StatusCode::UNAUTHORIZED,
        "ExpiredAuthenticationToken",
        "The access token expiry UTC time is earlier than current UTC time.",
    );
    r.headers_mut().insert(
        "www-authenticate",
        "Bearer error=\"invalid_token\", error_description=\"The access token has expired.\""
            .parse()
            .expect("value"),
    );
    r
}

/// Stores the resource as `Creating` and answers as the specification's examples do: 201 on
/// create, 200 on update, both with `Azure-AsyncOperation` (the operation's status URL) and
/// `Retry-After`.
fn start_operation(
    inner: &mut Inner,
    base: &str,
    path: &str,
    resource: Value,
    existing: bool,
) -> Response {
    inner.next_operation += 1;
    let id = format!("00000000-0000-0000-0000-{:012}", inner.next_operation);
    let key = path.to_ascii_lowercase();
    inner.resources.insert(key.clone(), resource.clone());
    let failure = inner.fail_next_operation.take();
    inner.operations.insert(
        id.clone(),
        Operation {
            polls_left: inner.lro_polls,
            failure,
            resource: key,
            delete: false,
        },
    );
    let api = if path.contains("/extensions/") {
        EXTENSION_API
    } else {
        FLUX_API
    };
    let operation = format!("{base}{path}/operations/{id}?api-version={api}");
    let status = if existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut r = json_response(status, &resource);
    r.headers_mut()
        .insert("azure-asyncoperation", operation.parse().expect("value"));
    r.headers_mut()
        .insert("retry-after", "0".parse().expect("value"));
    r
}

fn validated(schema: &jsonschema::Validator, body: &[u8]) -> Option<Value> {
    let value: Value = serde_json::from_slice(body).ok()?;
    schema.is_valid(&value).then_some(value)
}

/// 400 `InvalidRequestContent` with the schema's first complaint.
fn invalid(schema: &jsonschema::Validator, body: &[u8]) -> Response {
    let message = match serde_json::from_slice::<Value>(body) {
        Err(e) => format!("The request content was invalid and could not be deserialized: {e}"),
        Ok(value) => schema
            .iter_errors(&value)
            .next()
            .map(|e| {
                format!(
                    "The request content was invalid: {e} at '{}'",
                    e.instance_path()
                )
            })
            .unwrap_or_default(),
    };
    error(StatusCode::BAD_REQUEST, "InvalidRequestContent", &message)
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}
