//! One cluster's API, as berth uses it: server-side apply, get, list by label, delete, with
//! bounded retries (429, 5xx, lost connections) and errors that say what was refused and by
//! whom. Objects travel as JSON values; their kinds are berth's fixed set ([`Kind`]), so no
//! discovery round trips are needed beyond the first contact.

use super::FIELD_MANAGER;
use super::render::{Kind, Manifest};
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, ObjectList, Patch, PatchParams, PostParams,
    ValidationDirective, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// How failed requests are retried: `attempts` tries in all, waiting `base`, `2 × base`, …
/// between them, or longer when the server asks for it (`Retry-After`), up to
/// `max_retry_after`.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub base: Duration,
    /// The longest wait a server's `Retry-After` may impose before one attempt.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            base: Duration::from_millis(200),
            max_retry_after: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The default, with `BERTH_K8S_RETRY_BASE_MS` overriding the first wait (tests use a
    /// short one).
    pub fn from_env() -> Self {
        let mut policy = RetryPolicy::default();
        if let Some(ms) = std::env::var("BERTH_K8S_RETRY_BASE_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            policy.base = Duration::from_millis(ms);
        }
        policy
    }
}

/// Why a request failed, after retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiError {
    /// 409 from server-side apply: fields owned by other field managers.
    Conflict {
        managers: Vec<String>,
        fields: Vec<String>,
    },
    /// 403: the credentials may not do this.
    Forbidden {
        verb: &'static str,
        resource: String,
        namespace: Option<String>,
    },
    /// 401: the server did not accept the credentials.
    Unauthorized,
    /// 404 (a missing namespace on a write).
    NotFound { message: String },
    /// 422 for a change to fields that cannot change once the object exists.
    Immutable { fields: Vec<String> },
    /// 422 or 400: the server rejects the object.
    Invalid { code: u16, message: String },
    /// 429 or 5xx on every attempt.
    Unavailable { code: u16, attempts: u32 },
    /// The connection failed or dropped on every attempt.
    Connection { message: String, attempts: u32 },
    /// Any other status.
    Other { code: u16, message: String },
}

impl ApiError {
    /// Whether the cluster can no longer be reached: later requests would fail the same way.
    pub fn is_connection(&self) -> bool {
        matches!(self, ApiError::Connection { .. })
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Conflict { managers, fields } => {
                let who: Vec<String> = managers.iter().map(|m| format!("`{m}`")).collect();
                write!(
                    f,
                    "conflict with field manager {} over {}",
                    who.join(", "),
                    fields.join(", ")
                )
            }
            ApiError::Forbidden {
                verb,
                resource,
                namespace,
            } => {
                write!(f, "forbidden: may not `{verb}` `{resource}`")?;
                match namespace {
                    Some(ns) => write!(f, " in namespace `{ns}`"),
                    None => write!(f, " (cluster-wide)"),
                }
            }
            ApiError::Unauthorized => write!(f, "the server did not accept the credentials"),
            ApiError::NotFound { message } => write!(f, "not found: {message}"),
            ApiError::Immutable { fields } => {
                let fields: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
                write!(
                    f,
                    "rejected (422): {} cannot change once created (berth replaces only Jobs it manages)",
                    fields.join(", ")
                )
            }
            ApiError::Invalid { code, message } => write!(f, "rejected ({code}): {message}"),
            ApiError::Unavailable { code, attempts } => {
                write!(f, "server answered {code} on all {attempts} attempts")
            }
            ApiError::Connection { message, attempts } => {
                write!(f, "connection failed on all {attempts} attempts: {message}")
            }
            ApiError::Other { code, message } => write!(f, "server answered {code}: {message}"),
        }
    }
}

/// What a failed attempt means for the next one.
enum Attempt {
    /// Worth another try, after at least `after` when the server said so.
    Retry {
        error: ApiError,
        after: Option<Duration>,
    },
    Fail(ApiError),
}

/// The wait before the next attempt: the backoff, or what the server asked for
/// (`Retry-After`) when that is longer, bounded by `bound`.
fn next_wait(backoff: Duration, asked: Option<Duration>, bound: Duration) -> Duration {
    asked.map_or(backoff, |asked| backoff.max(asked.min(bound)))
}

/// A stream of watch events, as the server sends them.
pub type Events = BoxStream<'static, Result<WatchEvent<DynamicObject>, kube::Error>>;

/// The API resource of a kind.
pub fn api_resource(kind: Kind) -> ApiResource {
    let (group, version) = match kind.api_version().split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", kind.api_version()),
    };
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind.kind()),
        kind.plural(),
    )
}

fn resource_name(kind: Kind) -> String {
    match kind.group() {
        "" => kind.plural().to_string(),
        group => format!("{}.{group}", kind.plural()),
    }
}

/// One cluster, reached through one kubeconfig context.
#[derive(Clone)]
pub struct Cluster {
    pub context: String,
    client: kube::Client,
    retry: RetryPolicy,
}

impl Cluster {
    /// A client for `config`; the first request checks the server answers.
    ///
    /// The credential of every request (whatever its source: token, `tokenFile`, an exec
    /// plugin, basic auth) is recorded in `learned` as it is sent, so that a server quoting
    /// it back in an error is redacted ([`super::kubeconfig::Kubeconfigs::redact`]).
    pub async fn connect(
        context: &str,
        mut config: kube::Config,
        retry: RetryPolicy,
        learned: super::kubeconfig::Learned,
    ) -> Result<Cluster, ApiError> {
        use kube::client::ConfigExt;
        // kube's own retry layer (429, 503, 504) would multiply berth's attempts and follows
        // any `Retry-After`, however long: berth's policy is the only one, and bounded.
        config.default_retry = false;
        let failed = |message: String| ApiError::Connection {
            message,
            attempts: 0,
        };
        // kube's stack without its authentication; the same authentication outside it,
        // followed by the layer that records what it put in the header.
        let auth = config.auth_layer().map_err(|e| failed(e.to_string()))?;
        let mut anonymous = config;
        // Without a header to set (no credentials, or an exec plugin that returns a client
        // certificate, which kube's TLS set-up asks it for), kube's config is kept whole.
        if auth.is_some() {
            let user = &mut anonymous.auth_info;
            user.token = None;
            user.token_file = None;
            user.username = None;
            user.password = None;
            user.exec = None;
            user.auth_provider = None;
        }
        let record = tower::util::MapRequestLayer::new(
            move |request: axum::http::Request<kube::client::Body>| {
                if let Some(value) = request
                    .headers()
                    .get(axum::http::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                {
                    learned.remember(value);
                }
                request
            },
        );
        let client = kube::client::ClientBuilder::try_from(anonymous)
            .map_err(|e| failed(e.to_string()))?
            .with_layer(
                // The authentication of exec plugins and token files wants a service it can
                // clone: a buffer (as kube's own client has) gives it one.
                &tower::ServiceBuilder::new()
                    .option_layer(auth)
                    .layer(tower::buffer::BufferLayer::new(1024))
                    .layer(record),
            )
            .build();
        let cluster = Cluster {
            context: context.to_string(),
            client,
            retry,
        };
        let probe = cluster.client.clone();
        cluster
            .with_retries("get", "version", None, || {
                let probe = probe.clone();
                async move { probe.apiserver_version().await.map(|_| ()) }
            })
            .await?;
        Ok(cluster)
    }

    fn api(&self, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = api_resource(kind);
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// A typed API over every namespace (nodes, pods).
    pub fn typed_all<K>(&self) -> Api<K>
    where
        K: kube::Resource + Clone + DeserializeOwned + fmt::Debug,
        K::DynamicType: Default,
    {
        Api::all(self.client.clone())
    }

    /// Lists every object of a typed API (nodes, pods across namespaces).
    pub async fn list_typed<K>(
        &self,
        api: Api<K>,
        resource: &str,
        selector: Option<&str>,
    ) -> Result<Vec<K>, ApiError>
    where
        K: kube::Resource + Clone + DeserializeOwned + fmt::Debug,
    {
        let params = match selector {
            Some(s) => ListParams::default().labels(s),
            None => ListParams::default(),
        };
        self.with_retries("list", resource, None, || {
            let api = api.clone();
            let params = params.clone();
            async move { api.list(&params).await.map(|l| l.items) }
        })
        .await
    }

    /// The live object, or `None` when there is none.
    pub async fn get(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let api = self.api(kind, namespace);
        let result = self
            .with_retries("get", &resource_name(kind), namespace, || {
                let api = api.clone();
                let name = name.to_string();
                async move { api.get_opt(&name).await }
            })
            .await?;
        Ok(result.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)))
    }

    /// Server-side applies `manifest` as field manager `berth`; returns the object the server
    /// holds afterwards (or would hold, in a dry run).
    pub async fn apply(
        &self,
        manifest: &Manifest,
        dry_run: bool,
        force: bool,
    ) -> Result<Value, ApiError> {
        let api = self.api(manifest.kind, manifest.namespace.as_deref());
        // Strict: a field the server does not know fails the apply instead of being dropped
        // with a warning (a custom resource's schema prunes unknown fields silently).
        let mut params = PatchParams::apply(FIELD_MANAGER).validation(ValidationDirective::Strict);
        if dry_run {
            params = params.dry_run();
        }
        if force {
            params = params.force();
        }
        let result = self
            .with_retries(
                "patch",
                &resource_name(manifest.kind),
                manifest.namespace.as_deref(),
                || {
                    let api = api.clone();
                    let params = params.clone();
                    let name = manifest.name.clone();
                    let object = manifest.object.clone();
                    async move { api.patch(&name, &params, &Patch::Apply(&object)).await }
                },
            )
            .await?;
        Ok(serde_json::to_value(result).unwrap_or(Value::Null))
    }

    /// Objects of `kind` in `namespace` matching the label selector.
    pub async fn list(
        &self,
        kind: Kind,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Value>, ApiError> {
        Ok(self.list_versioned(kind, namespace, selector).await?.0)
    }

    /// Objects of `kind` in `namespace` matching the label selector, and the list's
    /// resourceVersion: where a watch of the same objects starts.
    pub async fn list_versioned(
        &self,
        kind: Kind,
        namespace: &str,
        selector: &str,
    ) -> Result<(Vec<Value>, String), ApiError> {
        let api = self.api(kind, Some(namespace));
        let params = ListParams::default().labels(selector);
        let list: ObjectList<DynamicObject> = self
            .with_retries("list", &resource_name(kind), Some(namespace), || {
                let api = api.clone();
                let params = params.clone();
                async move { api.list(&params).await }
            })
            .await?;
        let version = list.metadata.resource_version.unwrap_or_default();
        let items = list
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap_or(Value::Null))
            .collect();
        Ok((items, version))
    }

    /// Watches the objects of `kind` in `namespace` matching the label selector: the events
    /// after `version`, with bookmarks, for at most `timeout` (the server ends the stream).
    pub async fn watch(
        &self,
        kind: Kind,
        namespace: &str,
        selector: &str,
        version: &str,
        timeout: Duration,
    ) -> Result<Events, ApiError> {
        let api = self.api(kind, Some(namespace));
        // The API server caps a watch below 295 s; kube refuses longer ones.
        let seconds = timeout.as_secs_f64().ceil().clamp(1.0, 290.0) as u32;
        let params = WatchParams::default().labels(selector).timeout(seconds);
        self.with_retries("watch", &resource_name(kind), Some(namespace), || {
            let api = api.clone();
            let params = params.clone();
            let version = version.to_string();
            async move { Ok(api.watch(&params, &version).await?.boxed()) }
        })
        .await
    }

    /// Sets `spec.replicas` of a Deployment or StatefulSet: a merge patch as field manager
    /// `berth` (idle reclaim; the next `berth apply` of a plan that places it restores it).
    pub async fn scale(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> Result<(), ApiError> {
        let api = self.api(kind, Some(namespace));
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let body = serde_json::json!({ "spec": { "replicas": replicas } });
        self.with_retries("patch", &resource_name(kind), Some(namespace), || {
            let api = api.clone();
            let params = params.clone();
            let name = name.to_string();
            let body = body.clone();
            async move {
                api.patch(&name, &params, &Patch::Merge(&body))
                    .await
                    .map(|_| ())
            }
        })
        .await
    }

    /// Deletes an object (dependents in the background); a missing object is not an error.
    pub async fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        let api = self.api(kind, Some(namespace));
        let mut params = DeleteParams::background();
        if dry_run {
            params = params.dry_run();
        }
        let result = self
            .with_retries("delete", &resource_name(kind), Some(namespace), || {
                let api = api.clone();
                let params = params.clone();
                let name = name.to_string();
                async move { api.delete(&name, &params).await.map(|_| ()) }
            })
            .await;
        match result {
            Err(ApiError::NotFound { .. }) => Ok(()),
            other => other,
        }
    }

    /// The Lease `name` of `namespace` (apply locks, [`super::lock`]), `None` when absent.
    pub async fn get_lease(&self, namespace: &str, name: &str) -> Result<Option<Lease>, ApiError> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        self.with_retries("get", "leases.coordination.k8s.io", Some(namespace), || {
            let api = api.clone();
            let name = name.to_string();
            async move { api.get_opt(&name).await }
        })
        .await
    }

    /// Creates a Lease; 409 (`Conflict`) when one exists already.
    pub async fn create_lease(&self, namespace: &str, lease: &Lease) -> Result<(), ApiError> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        self.with_retries(
            "create",
            "leases.coordination.k8s.io",
            Some(namespace),
            || {
                let api = api.clone();
                let lease = lease.clone();
                async move { api.create(&PostParams::default(), &lease).await.map(|_| ()) }
            },
        )
        .await
    }

    /// Replaces a Lease as read (its `resourceVersion` a precondition: 409 when another
    /// writer came first).
    pub async fn replace_lease(&self, namespace: &str, lease: &Lease) -> Result<(), ApiError> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        let name = lease.metadata.name.clone().unwrap_or_default();
        self.with_retries(
            "update",
            "leases.coordination.k8s.io",
            Some(namespace),
            || {
                let api = api.clone();
                let lease = lease.clone();
                let name = name.clone();
                async move {
                    api.replace(&name, &PostParams::default(), &lease)
                        .await
                        .map(|_| ())
                }
            },
        )
        .await
    }

    /// Runs `request` until it succeeds, fails for good, or the attempts run out.
    async fn with_retries<T, F, Fut>(
        &self,
        verb: &'static str,
        resource: &str,
        namespace: Option<&str>,
        mut request: F,
    ) -> Result<T, ApiError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        let mut wait = self.retry.base;
        let mut attempt = 1;
        loop {
            let error = match request().await {
                Ok(value) => return Ok(value),
                Err(e) => classify(e, verb, resource, namespace, attempt),
            };
            match error {
                Attempt::Retry { after, .. } if attempt < self.retry.attempts => {
                    tokio::time::sleep(next_wait(wait, after, self.retry.max_retry_after)).await;
                    wait = wait.saturating_mul(2);
                    attempt += 1;
                }
                Attempt::Retry { error, .. } | Attempt::Fail(error) => return Err(error),
            }
        }
    }
}

fn classify(
    error: kube::Error,
    verb: &'static str,
    resource: &str,
    namespace: Option<&str>,
    attempts: u32,
) -> Attempt {
    match error {
        kube::Error::Api(status) => {
            let code = status.code;
            match code {
                409 => Attempt::Fail(conflict(&status)),
                403 => Attempt::Fail(ApiError::Forbidden {
                    verb,
                    resource: resource.to_string(),
                    namespace: namespace.map(str::to_string),
                }),
                401 => Attempt::Fail(ApiError::Unauthorized),
                404 => Attempt::Fail(ApiError::NotFound {
                    message: status.message.clone(),
                }),
                422 if !immutable_fields(&status).is_empty() => {
                    Attempt::Fail(ApiError::Immutable {
                        fields: immutable_fields(&status),
                    })
                }
                400 | 422 => Attempt::Fail(ApiError::Invalid {
                    code,
                    message: status.message.clone(),
                }),
                // Server-side apply answers 500 when the object does not fit its type's schema
                // (`failed to create typed patch object (…): .spec.x: field not declared in
                // schema`): no retry mends that, and the message says what is wrong.
                500 if status.message.contains("typed patch object") => {
                    Attempt::Fail(ApiError::Invalid {
                        code,
                        message: status.message.clone(),
                    })
                }
                // The API server says how long to back off in `details.retryAfterSeconds`
                // (and the `Retry-After` header, which kube does not pass on).
                429 | 500..=599 => Attempt::Retry {
                    error: ApiError::Unavailable { code, attempts },
                    after: status
                        .details
                        .as_ref()
                        .map(|d| d.retry_after_seconds)
                        .filter(|s| *s > 0)
                        .map(|s| Duration::from_secs(u64::from(s))),
                },
                _ => Attempt::Fail(ApiError::Other {
                    code,
                    message: status.message.clone(),
                }),
            }
        }
        // A response that is not a Status document still carries its code in the message;
        // everything else below the API layer is a transport failure, worth retrying.
        other => Attempt::Retry {
            error: ApiError::Connection {
                message: other.to_string(),
                attempts,
            },
            after: None,
        },
    }
}

/// The fields a 422 says are immutable (`spec.template: … field is immutable`).
fn immutable_fields(status: &kube::core::Status) -> Vec<String> {
    status
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|c| c.message.contains("field is immutable"))
        .map(|c| c.field.clone())
        .collect()
}

/// The managers and fields of a 409 from server-side apply. The API server names each in a
/// cause: `conflict with "helm" using apps/v1` with the field path.
fn conflict(status: &kube::core::Status) -> ApiError {
    let mut managers = Vec::new();
    let mut fields = Vec::new();
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    for cause in causes {
        if let Some(manager) = quoted(&cause.message)
            && !managers.contains(&manager)
        {
            managers.push(manager);
        }
        if !cause.field.is_empty() {
            fields.push(format!("`{}`", cause.field));
        }
    }
    if managers.is_empty()
        && let Some(manager) = quoted(&status.message)
    {
        managers.push(manager);
    }
    if managers.is_empty() {
        managers.push("(unnamed)".to_string());
    }
    if fields.is_empty() {
        fields.push("its fields".to_string());
    }
    ApiError::Conflict { managers, fields }
}

/// The first `"…"` in `text`.
fn quoted(text: &str) -> Option<String> {
    let start = text.find('"')? + 1;
    let len = text[start..].find('"')?;
    Some(text[start..start + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_lengthens_the_wait_within_its_bound() {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        assert_eq!(next_wait(ms(200), None, s(10)), ms(200));
        assert_eq!(next_wait(ms(200), Some(s(2)), s(10)), s(2));
        assert_eq!(
            next_wait(s(3), Some(s(1)), s(10)),
            s(3),
            "never shorter than backoff"
        );
        assert_eq!(next_wait(ms(200), Some(s(3600)), s(10)), s(10), "bounded");
    }
}
