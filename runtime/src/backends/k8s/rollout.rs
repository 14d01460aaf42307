//! `berth apply --wait`: follows each cluster's workload objects with WATCH streams (one per
//! kind and namespace) until every rollout is complete or failed, or the timeout ends, and
//! says for each when it got there.
//!
//! A watch starts at the resourceVersion of a LIST, resumes from the last event or bookmark
//! when the server ends it, and starts over from a new LIST when the server says that version
//! is too old (`410 Expired`) or the stream fails. Nothing polls: the wait ends as soon as
//! the event that completes the last rollout arrives.

use super::client::Cluster;
use super::render::{ClusterManifests, Kind};
use futures::StreamExt;
use kube::api::WatchEvent;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;
use tokio::time::Instant;

/// Where a workload object's rollout ended up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollout {
    /// Rolled out (Deployment, StatefulSet) or complete (Job), `after` the wait began.
    Done { after: Duration },
    /// The Job failed, or the Deployment exceeded its progress deadline.
    Failed { reason: String, after: Duration },
    /// Not there when the wait ended.
    Pending(Progress),
}

impl Rollout {
    pub fn is_done(&self) -> bool {
        matches!(self, Rollout::Done { .. })
    }
}

/// How far an unfinished rollout got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A Deployment's or StatefulSet's replicas.
    Replicas {
        desired: i64,
        updated: i64,
        ready: i64,
        available: i64,
    },
    /// A Job's pods.
    Completions { succeeded: i64, completions: i64 },
    /// A `NIMCache`'s state as the NIM Operator reports it (`None`: no status yet).
    Cache(Option<String>),
    /// The object is not on the server.
    Missing,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Replicas {
                desired,
                updated,
                ready,
                available,
            } => write!(
                f,
                "{ready}/{desired} ready, {updated}/{desired} updated, {available}/{desired} available"
            ),
            Progress::Completions {
                succeeded,
                completions,
            } => write!(f, "{succeeded}/{completions} succeeded"),
            Progress::Cache(Some(state)) => write!(f, "cache `{state}`"),
            Progress::Cache(None) => write!(f, "no cache status"),
            Progress::Missing => write!(f, "not found"),
        }
    }
}

/// A rollout's state from the live object, without the time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum State {
    Done,
    Failed(String),
    Pending(Progress),
}

/// The state of a live workload object (`None`: not found), by the rules `kubectl rollout
/// status` uses: the current generation observed, every replica updated and available (ready
/// for a StatefulSet), no old replica left; a Job by its `Complete` / `Failed` conditions.
pub(super) fn state_of(kind: Kind, live: Option<&Value>) -> State {
    let Some(live) = live else {
        return State::Pending(Progress::Missing);
    };
    let int = |ptr: &str| live.pointer(ptr).and_then(Value::as_i64);
    let condition = |kind: &str| {
        live.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == kind))
    };
    if kind == Kind::NimCache {
        // The NIM Operator's `status.state`: `Ready` once its caching Job has filled the
        // volume, `Failed` when it gave up.
        return match live.pointer("/status/state").and_then(Value::as_str) {
            Some("Ready") => State::Done,
            Some("Failed") => {
                let reason = live
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|c| {
                        c.iter()
                            .filter(|c| c["status"] == "True")
                            .find_map(|c| c["message"].as_str().filter(|m| !m.is_empty()))
                    })
                    .unwrap_or("the NIM Operator could not cache the model");
                State::Failed(reason.to_string())
            }
            state => State::Pending(Progress::Cache(state.map(str::to_string))),
        };
    }
    if kind == Kind::Job {
        let holds = |kind: &str| condition(kind).is_some_and(|c| c["status"] == "True");
        if holds("Failed") {
            let reason = condition("Failed")
                .and_then(|c| c["message"].as_str().or(c["reason"].as_str()))
                .unwrap_or("failed");
            return State::Failed(reason.to_string());
        }
        if holds("Complete") {
            return State::Done;
        }
        return State::Pending(Progress::Completions {
            succeeded: int("/status/succeeded").unwrap_or(0),
            completions: int("/spec/completions").unwrap_or(1),
        });
    }
    if kind == Kind::Deployment
        && condition("Progressing")
            .is_some_and(|c| c["status"] == "False" && c["reason"] == "ProgressDeadlineExceeded")
    {
        return State::Failed("progress deadline exceeded".to_string());
    }
    let desired = int("/spec/replicas").unwrap_or(1);
    let updated = int("/status/updatedReplicas").unwrap_or(0);
    let ready = int("/status/readyReplicas").unwrap_or(0);
    let available = int("/status/availableReplicas").unwrap_or(0);
    let current = int("/status/replicas").unwrap_or(0);
    let observed =
        int("/status/observedGeneration").unwrap_or(0) >= int("/metadata/generation").unwrap_or(1);
    let rolled_out = observed
        && updated >= desired
        && current <= updated
        && match kind {
            Kind::StatefulSet => ready >= desired,
            _ => available >= desired,
        };
    if rolled_out {
        State::Done
    } else {
        State::Pending(Progress::Replicas {
            desired,
            updated,
            ready,
            available,
        })
    }
}

/// Told of each rollout as it completes or fails: `(Kind namespace/name, rollout)`.
pub type OnSettled<'a> = &'a (dyn Fn(&str, &Rollout) + Sync);

/// Waits for every Deployment, StatefulSet, Job and `NIMCache` of `planned` on `cluster`, at
/// most `timeout`; one result per object (`Kind namespace/name`), in the rendering's order.
pub async fn wait(
    cluster: &Cluster,
    planned: &ClusterManifests,
    timeout: Duration,
    on_settled: OnSettled<'_>,
) -> Vec<(String, Rollout)> {
    let start = Instant::now();
    let deadline = start + timeout;
    let workloads: Vec<_> = planned
        .manifests
        .iter()
        .filter(|m| {
            matches!(
                m.kind,
                Kind::Deployment | Kind::StatefulSet | Kind::Job | Kind::NimCache
            )
        })
        .collect();
    let mut groups: BTreeMap<(Kind, String), Vec<String>> = BTreeMap::new();
    for m in &workloads {
        groups
            .entry((m.kind, m.namespace.clone().unwrap_or_default()))
            .or_default()
            .push(m.name.clone());
    }
    let followed = futures::future::join_all(groups.into_iter().map(
        |((kind, namespace), names)| async move {
            let tracker = Tracker::new(kind, &namespace, &names, start, on_settled);
            let rollouts = follow(cluster, tracker, &namespace, &names, deadline).await;
            ((kind, namespace), rollouts)
        },
    ))
    .await;
    let followed: BTreeMap<_, _> = followed.into_iter().collect();
    workloads
        .iter()
        .map(|m| {
            let rollout = followed
                .get(&(m.kind, m.namespace.clone().unwrap_or_default()))
                .and_then(|r| r.get(&m.name))
                .cloned()
                .unwrap_or(Rollout::Pending(Progress::Missing));
            (m.display_name(), rollout)
        })
        .collect()
}

/// The rollouts of `names` (objects of `kind` in `namespace`) as they settle.
struct Tracker<'a> {
    kind: Kind,
    namespace: String,
    start: Instant,
    on_settled: OnSettled<'a>,
    /// The latest state of each object not settled yet.
    open: BTreeMap<String, State>,
    settled: BTreeMap<String, Rollout>,
}

impl<'a> Tracker<'a> {
    fn new(
        kind: Kind,
        namespace: &str,
        names: &[String],
        start: Instant,
        on_settled: OnSettled<'a>,
    ) -> Tracker<'a> {
        Tracker {
            kind,
            namespace: namespace.to_string(),
            start,
            on_settled,
            open: names
                .iter()
                .map(|n| (n.clone(), State::Pending(Progress::Missing)))
                .collect(),
            settled: BTreeMap::new(),
        }
    }

    fn update(&mut self, name: &str, live: Option<&Value>) {
        if !self.open.contains_key(name) {
            return;
        }
        let after = self.start.elapsed();
        let rollout = match state_of(self.kind, live) {
            State::Done => Rollout::Done { after },
            State::Failed(reason) => Rollout::Failed { reason, after },
            pending => {
                self.open.insert(name.to_string(), pending);
                return;
            }
        };
        self.open.remove(name);
        let object = format!("{} {}/{name}", self.kind.kind(), self.namespace);
        (self.on_settled)(&object, &rollout);
        self.settled.insert(name.to_string(), rollout);
    }

    fn finished(&self) -> bool {
        self.open.is_empty()
    }

    fn into_rollouts(self) -> BTreeMap<String, Rollout> {
        let mut out = self.settled;
        for (name, state) in self.open {
            let progress = match state {
                State::Pending(progress) => progress,
                State::Done | State::Failed(_) => Progress::Missing,
            };
            out.insert(name, Rollout::Pending(progress));
        }
        out
    }
}

/// How long to wait before listing again after a failed list or watch.
const RELIST_PAUSE: Duration = Duration::from_millis(200);

/// LIST, then WATCH from the list's version until every object settled or `deadline`.
async fn follow(
    cluster: &Cluster,
    mut tracker: Tracker<'_>,
    namespace: &str,
    names: &[String],
    deadline: Instant,
) -> BTreeMap<String, Rollout> {
    let kind = tracker.kind;
    let selector = super::managed_selector();
    'list: while !tracker.finished() && Instant::now() < deadline {
        let mut version = match cluster.list_versioned(kind, namespace, &selector).await {
            Ok((objects, version)) => {
                let by_name: BTreeMap<&str, &Value> = objects
                    .iter()
                    .filter_map(|o| Some((o.pointer("/metadata/name")?.as_str()?, o)))
                    .collect();
                for name in names {
                    tracker.update(name, by_name.get(name.as_str()).copied());
                }
                version
            }
            Err(_) => {
                pause(deadline).await;
                continue;
            }
        };
        while !tracker.finished() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break 'list;
            }
            let mut events = match cluster
                .watch(kind, namespace, &selector, &version, remaining)
                .await
            {
                Ok(events) => events,
                Err(_) => {
                    pause(deadline).await;
                    continue 'list;
                }
            };
            // Until the server ends this watch (then resume from `version`).
            loop {
                let event = match tokio::time::timeout_at(deadline, events.next()).await {
                    Err(_elapsed) => break 'list,
                    Ok(None) => break,
                    Ok(Some(Ok(event))) => event,
                    // A 410 as an HTTP status, a broken stream: start over from a LIST.
                    Ok(Some(Err(_))) => {
                        pause(deadline).await;
                        continue 'list;
                    }
                };
                match event {
                    WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                        version = object.metadata.resource_version.clone().unwrap_or(version);
                        let name = object.metadata.name.clone().unwrap_or_default();
                        let live = serde_json::to_value(object).ok();
                        tracker.update(&name, live.as_ref());
                    }
                    WatchEvent::Deleted(object) => {
                        version = object.metadata.resource_version.clone().unwrap_or(version);
                        tracker.update(&object.metadata.name.unwrap_or_default(), None);
                    }
                    WatchEvent::Bookmark(bookmark) => version = bookmark.metadata.resource_version,
                    // `410 Expired`: the version is older than the server's history.
                    WatchEvent::Error(status) if status.code == 410 => continue 'list,
                    WatchEvent::Error(_) => {
                        pause(deadline).await;
                        continue 'list;
                    }
                }
                if tracker.finished() {
                    break 'list;
                }
            }
        }
    }
    tracker.into_rollouts()
}

async fn pause(deadline: Instant) {
    tokio::time::sleep_until(deadline.min(Instant::now() + RELIST_PAUSE)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(generation: i64, status: Value) -> Value {
        json!({"metadata": {"generation": generation}, "spec": {"replicas": 2}, "status": status})
    }

    #[test]
    fn a_deployment_is_rolled_out_when_every_replica_is_updated_and_available() {
        let all = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                         "readyReplicas": 2, "availableReplicas": 2});
        assert_eq!(
            state_of(Kind::Deployment, Some(&deployment(2, all.clone()))),
            State::Done
        );
        // The controller has not seen generation 3 yet.
        assert!(matches!(
            state_of(Kind::Deployment, Some(&deployment(3, all))),
            State::Pending(_)
        ));
        // An old replica is still there.
        let surge = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2,
                           "readyReplicas": 3, "availableReplicas": 3});
        assert_eq!(
            state_of(Kind::Deployment, Some(&deployment(2, surge))),
            State::Pending(Progress::Replicas {
                desired: 2,
                updated: 2,
                ready: 3,
                available: 3
            })
        );
        let stuck = json!({"observedGeneration": 2, "conditions": [{"type": "Progressing",
            "status": "False", "reason": "ProgressDeadlineExceeded"}]});
        assert!(matches!(
            state_of(Kind::Deployment, Some(&deployment(2, stuck))),
            State::Failed(_)
        ));
        assert_eq!(
            state_of(Kind::StatefulSet, None),
            State::Pending(Progress::Missing)
        );
    }

    #[test]
    fn a_job_is_settled_by_its_conditions() {
        let job = |status: Value| json!({"spec": {"completions": 3}, "status": status});
        assert_eq!(
            state_of(Kind::Job, Some(&job(json!({"succeeded": 1})))),
            State::Pending(Progress::Completions {
                succeeded: 1,
                completions: 3
            })
        );
        let complete =
            json!({"succeeded": 3, "conditions": [{"type": "Complete", "status": "True"}]});
        assert_eq!(state_of(Kind::Job, Some(&job(complete))), State::Done);
        let failed = json!({"conditions": [{"type": "Failed", "status": "True",
            "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]});
        assert_eq!(
            state_of(Kind::Job, Some(&job(failed))),
            State::Failed("Job has reached the specified backoff limit".to_string())
        );
    }

    #[test]
    fn a_nim_cache_is_settled_by_the_operators_state() {
        let cache = |status: Value| json!({"status": status});
        assert_eq!(
            state_of(Kind::NimCache, Some(&json!({}))),
            State::Pending(Progress::Cache(None))
        );
        assert_eq!(
            state_of(Kind::NimCache, Some(&cache(json!({"state": "InProgress"})))),
            State::Pending(Progress::Cache(Some("InProgress".to_string())))
        );
        assert_eq!(
            state_of(Kind::NimCache, Some(&cache(json!({"state": "Ready"})))),
            State::Done
        );
        let failed = json!({"state": "Failed", "conditions": [{"type": "NIM_CACHE_JOB_FAILED",
            "status": "True", "message": "the caching job failed"}]});
        assert_eq!(
            state_of(Kind::NimCache, Some(&cache(failed))),
            State::Failed("the caching job failed".to_string())
        );
    }
}
