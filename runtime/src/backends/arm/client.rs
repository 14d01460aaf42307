//! Azure Resource Manager over HTTPS: GET, PUT, DELETE and LIST of resources with the conventions every
//! ARM resource provider follows (the `api-version` query, `Authorization: Bearer`, the error
//! body `{ "error": { "code", "message" } }`), retries and long-running operations.
//!
//! - **Retries.** 409 (another operation holds the resource), 429 (throttled) and 5xx are
//!   retried, waiting what `Retry-After` says (seconds, or an HTTP date) or else an
//!   exponential backoff, up to [`RetryPolicy::attempts`] tries; so are connection failures.
//! - **Long-running operations.** A PUT or DELETE answered with `Azure-AsyncOperation` is followed by
//!   polling that URL until its `status` is `Succeeded`, `Failed` or `Canceled`; one answered
//!   `202` with only `Location` by polling the location until it stops answering `202`. Both
//!   wait `Retry-After` between polls, within [`RetryPolicy::operation_timeout`]. The resource
//!   is then read back with a GET.
//! - **Credentials.** A `401` (an expired or revoked token) makes a new credential, whose
//!   cache is empty, and the request is tried once more. A `403` says which permission is
//!   missing and which built-in role grants it. Tokens are only ever put in the
//!   `Authorization` header: no message, log line or error carries one.

use azure_core::credentials::TokenCredential;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Makes the credential (again, after a `401`).
pub type CredentialFactory =
    Arc<dyn Fn() -> Result<Arc<dyn TokenCredential>, String> + Send + Sync>;

/// How hard to try.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// Tries per request (the first included).
    pub attempts: u32,
    /// First backoff when the server gives no `Retry-After`; doubled per try.
    pub base_delay: Duration,
    /// Longest single wait (a `Retry-After` above it is cut to it).
    pub max_delay: Duration,
    /// How long a long-running operation may take.
    pub operation_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 6,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
            operation_timeout: Duration::from_secs(600),
        }
    }
}

/// Why a request failed, for the person running berth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArmError {
    /// No credential could be made or no token obtained.
    Credential(String),
    /// The token was refused (`401`) even after a fresh one.
    Unauthenticated { code: String, message: String },
    /// `403`: the identity lacks an action on the resource.
    Forbidden {
        action: String,
        /// Which role to grant, as advice.
        grant: &'static str,
        message: String,
    },
    /// Any other error answer, after the retries.
    Status {
        status: u16,
        code: String,
        message: String,
    },
    /// A long-running operation that ended `Failed` or `Canceled`.
    OperationFailed {
        status: String,
        code: String,
        message: String,
    },
    /// A long-running operation still running at the deadline.
    OperationTimeout(Duration),
    /// The server could not be reached, or its answer not read.
    Transport(String),
}

impl std::fmt::Display for ArmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArmError::Credential(e) => write!(f, "no Azure token: {e}"),
            ArmError::Unauthenticated { code, message } => write!(
                f,
                "Azure Resource Manager refused the credential ({code}: {message})"
            ),
            ArmError::Forbidden {
                action,
                grant,
                message,
            } => write!(f, "the identity may not `{action}` ({message}); {grant}"),
            ArmError::Status {
                status,
                code,
                message,
            } => write!(
                f,
                "Azure Resource Manager answered {status} ({code}: {message})"
            ),
            ArmError::OperationFailed {
                status,
                code,
                message,
            } => write!(f, "the operation ended `{status}` ({code}: {message})"),
            ArmError::OperationTimeout(after) => write!(
                f,
                "the operation was still running after {} s",
                after.as_secs()
            ),
            ArmError::Transport(e) => write!(f, "cannot reach Azure Resource Manager: {e}"),
        }
    }
}

/// What a write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// The resource as read back after the operation finished.
    Done(Value),
}

/// What a DELETE did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// The resource was deleted (its operation followed to `Succeeded`).
    Done,
    /// There was nothing to delete (`204`, or `404`).
    Absent,
}

/// A client for one ARM endpoint.
pub struct ArmClient {
    http: reqwest::Client,
    endpoint: String,
    scope: String,
    make_credential: CredentialFactory,
    credential: tokio::sync::Mutex<Option<Arc<dyn TokenCredential>>>,
    policy: RetryPolicy,
    calls: AtomicUsize,
}

impl ArmClient {
    /// A client for `endpoint` (`https://management.azure.com`), asking tokens for its
    /// `/.default` scope.
    pub fn new(
        http: reqwest::Client,
        endpoint: &str,
        make_credential: CredentialFactory,
        policy: RetryPolicy,
    ) -> ArmClient {
        let endpoint = endpoint.trim_end_matches('/').to_string();
        ArmClient {
            http,
            scope: format!("{endpoint}/.default"),
            endpoint,
            make_credential,
            credential: tokio::sync::Mutex::new(None),
            policy,
            calls: AtomicUsize::new(0),
        }
    }

    /// Requests sent so far (retries and polls included).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    /// The resource at `path`, or `None` when it does not exist.
    pub async fn get(&self, path: &str, api_version: &str) -> Result<Option<Value>, ArmError> {
        let url = self.url(path, api_version);
        match self.send(reqwest::Method::GET, &url, None, "read").await {
            Ok((_, _, body)) => Ok(Some(body)),
            Err(ArmError::Status { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every resource of the collection at `path` (following `nextLink`).
    pub async fn list(&self, path: &str, api_version: &str) -> Result<Vec<Value>, ArmError> {
        let mut url = self.url(path, api_version);
        let mut out = Vec::new();
        loop {
            let (_, _, body) = self.send(reqwest::Method::GET, &url, None, "read").await?;
            if let Some(items) = body["value"].as_array() {
                out.extend(items.iter().cloned());
            }
            match body["nextLink"].as_str() {
                Some(next) if !next.is_empty() => url = next.to_string(),
                _ => return Ok(out),
            }
        }
    }

    /// PUTs `body` at `path` and follows the operation to its end; the resource read back.
    pub async fn put(
        &self,
        path: &str,
        api_version: &str,
        body: &Value,
    ) -> Result<Written, ArmError> {
        let url = self.url(path, api_version);
        let (status, headers, answer) = self
            .send(reqwest::Method::PUT, &url, Some(body), "write")
            .await?;
        let started = Instant::now();
        if let Some(operation) = header(&headers, "azure-asyncoperation") {
            self.follow_async_operation(&operation, &headers, started)
                .await?;
        } else if status == 202 {
            if let Some(location) = header(&headers, "location") {
                self.follow_location(&location, &headers, started).await?;
            }
        } else if status == 200 || status == 201 {
            // Synchronous: the answer is the resource, unless it is still provisioning.
            if !provisioning_running(&answer) {
                return Ok(Written::Done(answer));
            }
        }
        match self.get(path, api_version).await? {
            Some(resource) => Ok(Written::Done(resource)),
            None => Err(ArmError::Status {
                status: 404,
                code: "ResourceNotFound".to_string(),
                message: "the resource was gone after its operation succeeded".to_string(),
            }),
        }
    }

    /// DELETEs the resource at `path` and follows the operation to its end: `200` deleted,
    /// `202` with `Azure-AsyncOperation` (or `Location`) followed, `204` nothing to delete.
    pub async fn delete(&self, path: &str, api_version: &str) -> Result<Deleted, ArmError> {
        let url = self.url(path, api_version);
        let (status, headers, _) = match self
            .send(reqwest::Method::DELETE, &url, None, "delete")
            .await
        {
            Err(ArmError::Status { status: 404, .. }) => return Ok(Deleted::Absent),
            other => other?,
        };
        if status == 204 {
            return Ok(Deleted::Absent);
        }
        let started = Instant::now();
        if let Some(operation) = header(&headers, "azure-asyncoperation") {
            self.follow_async_operation(&operation, &headers, started)
                .await?;
        } else if status == 202
            && let Some(location) = header(&headers, "location")
        {
            self.follow_location(&location, &headers, started).await?;
        }
        Ok(Deleted::Done)
    }

    /// Polls `url` (waiting `Retry-After` between polls) until `finished` says the operation
    /// ended, from the poll's status and body.
    async fn follow(
        &self,
        url: &str,
        first: &reqwest::header::HeaderMap,
        started: Instant,
        finished: impl Fn(u16, &Value) -> Option<Result<(), ArmError>>,
    ) -> Result<(), ArmError> {
        let mut wait = retry_after(first).unwrap_or(Duration::from_secs(1));
        loop {
            self.pause(wait, started).await?;
            let (status, headers, body) =
                self.send(reqwest::Method::GET, url, None, "read").await?;
            if let Some(done) = finished(status, &body) {
                return done;
            }
            wait = retry_after(&headers).unwrap_or(Duration::from_secs(2));
        }
    }

    /// `Azure-AsyncOperation`: the operation resource's `status`.
    async fn follow_async_operation(
        &self,
        url: &str,
        first: &reqwest::header::HeaderMap,
        started: Instant,
    ) -> Result<(), ArmError> {
        self.follow(url, first, started, |_, body| {
            let status = body["status"].as_str().unwrap_or("");
            match status {
                "Succeeded" => Some(Ok(())),
                "Failed" | "Canceled" => Some(Err(ArmError::OperationFailed {
                    status: status.to_string(),
                    code: body["error"]["code"].as_str().unwrap_or("").to_string(),
                    message: body["error"]["message"].as_str().unwrap_or("").to_string(),
                })),
                _ => None,
            }
        })
        .await
    }

    /// `Location`: `202` while the operation runs.
    async fn follow_location(
        &self,
        url: &str,
        first: &reqwest::header::HeaderMap,
        started: Instant,
    ) -> Result<(), ArmError> {
        self.follow(url, first, started, |status, _| {
            (status != 202).then_some(Ok(()))
        })
        .await
    }

    /// Sleeps `wait`, or fails when that would pass the operation's deadline.
    async fn pause(&self, wait: Duration, started: Instant) -> Result<(), ArmError> {
        let timeout = self.policy.operation_timeout;
        if started.elapsed() + wait > timeout {
            return Err(ArmError::OperationTimeout(timeout));
        }
        tokio::time::sleep(wait.min(self.policy.max_delay)).await;
        Ok(())
    }

    fn url(&self, path: &str, api_version: &str) -> String {
        format!("{}{path}?api-version={api_version}", self.endpoint)
    }

    async fn token(&self, fresh: bool) -> Result<String, ArmError> {
        let mut slot = self.credential.lock().await;
        if fresh || slot.is_none() {
            *slot = Some((self.make_credential)().map_err(ArmError::Credential)?);
        }
        let credential = slot.as_ref().expect("set above").clone();
        drop(slot);
        let token = credential
            .get_token(&[self.scope.as_str()], None)
            .await
            .map_err(|e| ArmError::Credential(e.to_string()))?;
        Ok(token.token.secret().to_string())
    }

    /// One request with retries; the status, headers and JSON body of a success.
    async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
        verb: &str,
    ) -> Result<(u16, reqwest::header::HeaderMap, Value), ArmError> {
        let mut fresh_token = false;
        let mut refreshed = false;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let token = self.token(fresh_token).await?;
            fresh_token = false;
            let mut request = self
                .http
                .request(method.clone(), url)
                .bearer_auth(token)
                .header("accept", "application/json");
            if let Some(body) = body {
                request = request
                    .header("content-type", "application/json")
                    .body(body.to_string());
            }
            self.calls.fetch_add(1, Ordering::Relaxed);
            let response = match request.send().await {
                Ok(response) => response,
                Err(e) if attempt < self.policy.attempts => {
                    tracing::debug!("ARM request failed, retrying: {}", without_url(&e));
                    tokio::time::sleep(self.backoff(attempt, None)).await;
                    continue;
                }
                Err(e) => return Err(ArmError::Transport(without_url(&e))),
            };
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let text = response
                .text()
                .await
                .map_err(|e| ArmError::Transport(without_url(&e)))?;
            let json: Value = if text.trim().is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).unwrap_or(Value::Null)
            };
            if (200..300).contains(&status) {
                return Ok((status, headers, json));
            }
            let (code, message) = error_of(&json, status);
            match status {
                401 if !refreshed => {
                    refreshed = true;
                    fresh_token = true;
                }
                401 => return Err(ArmError::Unauthenticated { code, message }),
                403 => {
                    return Err(ArmError::Forbidden {
                        action: action_of(url, verb),
                        grant: grant_for(url),
                        message,
                    });
                }
                409 | 429 | 500..=599 if attempt < self.policy.attempts => {
                    let wait = self.backoff(attempt, retry_after(&headers));
                    tracing::debug!("ARM answered {status} ({code}); retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                }
                _ => {
                    return Err(ArmError::Status {
                        status,
                        code,
                        message,
                    });
                }
            }
        }
    }

    fn backoff(&self, attempt: u32, server: Option<Duration>) -> Duration {
        let computed = self
            .policy
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        server.unwrap_or(computed).min(self.policy.max_delay)
    }
}

/// Whether a resource's `provisioningState` says an operation is still running.
fn provisioning_running(resource: &Value) -> bool {
    matches!(
        resource["properties"]["provisioningState"].as_str(),
        Some("Creating" | "Updating" | "Deleting" | "Accepted" | "Provisioning")
    )
}

fn header(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = header(headers, "retry-after")?;
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = jiff::fmt::rfc2822::parse(value.trim()).ok()?;
    let now = jiff::Timestamp::now();
    let left = at.timestamp().duration_since(now);
    Some(Duration::from_secs_f64(left.as_secs_f64().max(0.0)))
}

/// ARM's error body: `{ "error": { "code", "message" } }` (some services answer without the
/// envelope).
fn error_of(body: &Value, status: u16) -> (String, String) {
    let error = if body["error"].is_object() {
        &body["error"]
    } else {
        body
    };
    let code = error["code"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("HTTP{status}"));
    let message = error["message"].as_str().unwrap_or("").to_string();
    (code, message)
}

/// The permission a request needs, as Azure RBAC writes actions:
/// `Microsoft.KubernetesConfiguration/fluxConfigurations/write`.
fn action_of(url: &str, verb: &str) -> String {
    let path = url.split('?').next().unwrap_or(url);
    let segments: Vec<&str> = path.split('/').collect();
    let provider = segments
        .iter()
        .rposition(|s| s.eq_ignore_ascii_case("providers"))
        .and_then(|i| segments.get(i + 1..i + 3))
        .map(|s| s.join("/"))
        .unwrap_or_else(|| "the resource".to_string());
    format!("{provider}/{verb}")
}

/// What to grant for `Microsoft.KubernetesConfiguration/extensions/*`.
const EXTENSION_GRANT: &str = "grant it the built-in role `Kubernetes Extension \
    Contributor` on the cluster (it covers `Microsoft.KubernetesConfiguration/extensions/*`)";
/// What to grant for `fluxConfigurations/*`: no built-in role is specific to them.
const FLUX_GRANT: &str = "no built-in role is specific to Flux configurations: grant \
    `Contributor` on the cluster, or a custom role with \
    `Microsoft.KubernetesConfiguration/fluxConfigurations/*`";

/// Which role grants what a request to `url` needs, as advice.
fn grant_for(url: &str) -> &'static str {
    if url.contains("/fluxConfigurations") {
        FLUX_GRANT
    } else {
        EXTENSION_GRANT
    }
}

/// A reqwest error without the URL it carries (which may hold a SAS token or user-info).
fn without_url(e: &reqwest::Error) -> String {
    let mut e = e.to_string();
    if let Some(start) = e.find(" for url (")
        && let Some(end) = e[start..].find(')')
    {
        e.replace_range(start..start + end + 1, "");
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_named_as_azure_rbac_writes_them() {
        let url = "https://management.azure.com/subscriptions/s/resourceGroups/g/providers/\
                   Microsoft.Kubernetes/connectedClusters/c/providers/\
                   Microsoft.KubernetesConfiguration/fluxConfigurations/berth?api-version=x";
        assert_eq!(
            action_of(url, "write"),
            "Microsoft.KubernetesConfiguration/fluxConfigurations/write"
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "7".parse().expect("value"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("value"),
        );
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
    }

    #[test]
    fn errors_are_read_with_or_without_the_envelope() {
        let body = serde_json::json!({"error": {"code": "Conflict", "message": "busy"}});
        assert_eq!(
            error_of(&body, 409),
            ("Conflict".to_string(), "busy".to_string())
        );
        assert_eq!(
            error_of(&Value::Null, 502),
            ("HTTP502".to_string(), String::new())
        );
    }
}
