//! Apply locks: two `berth apply` runs against one cluster serialise on a coordination.k8s.io
//! Lease `berth-apply` in each namespace of the plan there, taken in name order (so two runs
//! wanting the same namespaces cannot deadlock), held while objects are applied, pruned and
//! waited for, renewed every third of its duration, and given back at the end.
//!
//! A Lease held by another run is waited for, up to `--lock-timeout`, naming its holder; it is
//! taken over when its holder stopped renewing it: its `renewTime` plus its duration is past,
//! or (whatever the clocks say) it has not changed for its whole duration while this run
//! watched it, as client-go's leader election judges. `--force-unlock` takes it at once (for
//! a Lease left by a run that died).
//!
//! Every write carries the `resourceVersion` it read, so of two runs racing for a Lease the
//! API server lets exactly one through (409 for the other, which reads again).

use super::client::{ApiError, Cluster};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The name of berth's Lease in each namespace.
pub const LEASE: &str = "berth-apply";
/// Seconds a Lease stays held without renewal, unless `BERTH_LOCK_LEASE_SECONDS` says
/// otherwise (3 at least; a longer lease rides out a slower API server, a shorter one frees
/// the lock of a dead run sooner).
pub const LEASE_SECONDS: i32 = 30;

/// The duration of the Leases this run writes.
pub fn lease_seconds() -> i32 {
    std::env::var("BERTH_LOCK_LEASE_SECONDS")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .map_or(LEASE_SECONDS, |s| s.clamp(3, 3600))
}

/// How to take locks.
#[derive(Clone, Copy, Debug)]
pub struct LockOptions {
    /// How long to wait for a Lease another run holds.
    pub timeout: Duration,
    /// Take the Lease whoever holds it.
    pub force: bool,
}

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "gave up after {waited}s waiting for the apply lock of namespace `{namespace}` (Lease \
         `{LEASE}`), held by `{holder}` since {since}; if that run is dead, `--force-unlock` \
         takes the lock"
    )]
    Timeout {
        namespace: String,
        holder: String,
        since: String,
        waited: u64,
    },
    #[error("the apply lock of namespace `{namespace}`: {error}")]
    Api { namespace: String, error: ApiError },
}

/// A Lease this run holds, renewed in the background until [`Held::release`].
pub struct Held {
    pub namespace: String,
    /// Set when a renewal found the Lease taken by another run.
    pub lost: Arc<AtomicBool>,
    renewal: tokio::task::JoinHandle<()>,
}

/// This run's identity in a Lease: `BERTH_LOCK_HOLDER` (a pipeline's job URL, say), or
/// `berth@HOST pid PID` and the start instant, unique enough across runs and hosts.
pub fn holder() -> &'static str {
    static HOLDER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOLDER.get_or_init(|| {
        if let Ok(h) = std::env::var("BERTH_LOCK_HOLDER")
            && !h.trim().is_empty()
        {
            return h.trim().to_string();
        }
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|h| h.trim().to_string())
            })
            .unwrap_or_else(|| "unknown-host".to_string());
        format!(
            "berth@{host} pid {} started {}",
            std::process::id(),
            Timestamp::now()
        )
    })
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn lease_spec(previous: Option<&LeaseSpec>, ours: &str, acquired: bool) -> LeaseSpec {
    let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(ours.to_string()),
        lease_duration_seconds: Some(lease_seconds()),
        acquire_time: if acquired {
            Some(now())
        } else {
            previous.and_then(|s| s.acquire_time.clone())
        },
        renew_time: Some(now()),
        lease_transitions: Some(if acquired {
            transitions + 1
        } else {
            transitions
        }),
        ..LeaseSpec::default()
    }
}

/// Whether `spec`'s holder stopped renewing it, by its own clock fields.
fn expired_by_time(spec: &LeaseSpec) -> bool {
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
    match &spec.renew_time {
        Some(MicroTime(renewed)) => renewed
            .checked_add(SignedDuration::from_secs(duration))
            .is_ok_and(|until| until < Timestamp::now()),
        None => true,
    }
}

/// Takes the Lease of `namespace`, waiting for another holder as `options` allow;
/// `waiting(holder, since)` is called once when it has to wait.
pub async fn acquire(
    cluster: &Cluster,
    namespace: &str,
    options: LockOptions,
    waiting: &(dyn Fn(&str, &str) + Sync),
) -> Result<Held, LockError> {
    let api_error = |error| LockError::Api {
        namespace: namespace.to_string(),
        error,
    };
    let ours = holder();
    let started = Instant::now();
    // The resource version last seen held by another, and since when (this run's clock).
    let mut observed: Option<(String, Instant)> = None;
    let mut announced = false;
    loop {
        let live = cluster
            .get_lease(namespace, LEASE)
            .await
            .map_err(api_error)?;
        let attempt = match &live {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(LEASE.to_string()),
                        namespace: Some(namespace.to_string()),
                        labels: Some(
                            [(
                                super::MANAGED_BY.0.to_string(),
                                super::MANAGED_BY.1.to_string(),
                            )]
                            .into(),
                        ),
                        ..ObjectMeta::default()
                    },
                    spec: Some(lease_spec(None, ours, true)),
                };
                Some(cluster.create_lease(namespace, &lease).await)
            }
            Some(lease) => {
                let spec = lease.spec.clone().unwrap_or_default();
                let holder = spec.holder_identity.clone().unwrap_or_default();
                let version = lease.metadata.resource_version.clone().unwrap_or_default();
                let duration = Duration::from_secs(
                    u64::try_from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS))
                        .unwrap_or(30),
                );
                let unchanged_long = match &observed {
                    Some((seen, since)) if *seen == version => since.elapsed() >= duration,
                    _ => {
                        observed = Some((version.clone(), Instant::now()));
                        false
                    }
                };
                let free = holder.is_empty() || holder == ours;
                if free || options.force || expired_by_time(&spec) || unchanged_long {
                    let mut next = lease.clone();
                    next.spec = Some(lease_spec(Some(&spec), ours, holder != ours));
                    Some(cluster.replace_lease(namespace, &next).await)
                } else {
                    let since = spec
                        .acquire_time
                        .as_ref()
                        .map_or_else(|| "an unknown time".to_string(), |t| t.0.to_string());
                    if !announced {
                        waiting(&holder, &since);
                        announced = true;
                    }
                    if started.elapsed() >= options.timeout {
                        return Err(LockError::Timeout {
                            namespace: namespace.to_string(),
                            holder,
                            since,
                            waited: started.elapsed().as_secs(),
                        });
                    }
                    None
                }
            }
        };
        match attempt {
            Some(Ok(())) => break,
            // Another run wrote first: read again.
            Some(Err(ApiError::Conflict { .. })) => continue,
            Some(Err(e)) => return Err(api_error(e)),
            None => {
                let left = options.timeout.saturating_sub(started.elapsed());
                tokio::time::sleep(left.clamp(Duration::from_millis(50), Duration::from_secs(1)))
                    .await;
            }
        }
    }
    let lost = Arc::new(AtomicBool::new(false));
    let renewal = tokio::spawn(renew(cluster.clone(), namespace.to_string(), lost.clone()));
    Ok(Held {
        namespace: namespace.to_string(),
        lost,
        renewal,
    })
}

/// Renews the Lease every third of its duration until stopped, or until another run holds it.
async fn renew(cluster: Cluster, namespace: String, lost: Arc<AtomicBool>) {
    let every = Duration::from_millis(u64::try_from(lease_seconds()).unwrap_or(30) * 1000 / 3);
    loop {
        tokio::time::sleep(every).await;
        let Ok(Some(mut lease)) = cluster.get_lease(&namespace, LEASE).await else {
            continue;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(holder()) {
            lost.store(true, Ordering::SeqCst);
            return;
        }
        lease.spec = Some(lease_spec(Some(&spec), holder(), false));
        // A conflict is a write by another reader: the next round reads again.
        let _ = cluster.replace_lease(&namespace, &lease).await;
    }
}

impl Held {
    /// Stops renewing and gives the Lease back (its holder cleared), if this run still holds
    /// it. A failure leaves it to expire.
    pub async fn release(self, cluster: &Cluster) {
        self.renewal.abort();
        for _ in 0..3 {
            let Ok(Some(mut lease)) = cluster.get_lease(&self.namespace, LEASE).await else {
                return;
            };
            let Some(spec) = lease.spec.as_mut() else {
                return;
            };
            if spec.holder_identity.as_deref() != Some(holder()) {
                return;
            }
            spec.holder_identity = None;
            spec.renew_time = Some(now());
            match cluster.replace_lease(&self.namespace, &lease).await {
                Err(ApiError::Conflict { .. }) => continue,
                _ => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_expires_when_its_renewal_is_older_than_its_duration() {
        let mut spec = LeaseSpec {
            holder_identity: Some("other".into()),
            lease_duration_seconds: Some(30),
            renew_time: Some(now()),
            ..LeaseSpec::default()
        };
        assert!(!expired_by_time(&spec));
        spec.renew_time = Some(MicroTime(
            Timestamp::now()
                .checked_sub(SignedDuration::from_secs(31))
                .expect("instant"),
        ));
        assert!(expired_by_time(&spec));
        spec.renew_time = None;
        assert!(expired_by_time(&spec));
    }

    #[test]
    fn taking_a_lease_counts_a_transition_and_renewing_does_not() {
        let taken = lease_spec(None, "me", true);
        assert_eq!(taken.lease_transitions, Some(1));
        let renewed = lease_spec(Some(&taken), "me", false);
        assert_eq!(renewed.lease_transitions, Some(1));
        assert_eq!(renewed.acquire_time, taken.acquire_time);
        assert_eq!(
            lease_spec(Some(&taken), "you", true).lease_transitions,
            Some(2)
        );
    }
}
