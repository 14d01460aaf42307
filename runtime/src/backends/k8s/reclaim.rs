//! Idle-GPU reclaim on Kubernetes targets, for `berth reclaim`: which of a plan's workload
//! objects a reclaim rule holds ([`objects`]: the rendered Deployment, StatefulSet or Job of
//! each placement, and [`ReclaimContract::of`], the rule an edge bundle carries too), the
//! running pods that hold their GPUs ([`pods`]), a utilisation series per pod and the verdict
//! on each object ([`Tracker`]), and the act ([`reclaim`]: a StatefulSet or Deployment scaled
//! to 0, a Job deleted).
//!
//! Idleness needs a series, not one scrape: the tracker keeps, per pod, the instant since
//! which every sample of every GPU it holds read 0% and the samples seen since. An object is
//! reclaimed once all its GPU pods have been idle for the rule's time. A pod with no
//! utilisation in the exporter's answer, or any sample above 0%, is not idle: absence of
//! evidence is never idleness.

use super::client::{ApiError, Cluster};
use super::kubeconfig::Kubeconfigs;
use super::render::{self, ClusterManifests, Kind, labels};
use super::status::{is_running, pod_request};
use crate::backends::edge::bundle::ReclaimContract;
use berth_compiler::ir::Ir;
use berth_compiler::plan::Plan;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Samples kept per pod: the evidence printed with a reclaim is the latest of them.
pub const MAX_SAMPLES: usize = 64;

/// One placement's workload object on a cluster: what reclaim acts on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Object {
    pub context: String,
    pub target: String,
    pub pool: Option<String>,
    pub workload: String,
    pub namespace: String,
    /// `Deployment`, `StatefulSet` or `Job`.
    pub kind: &'static str,
    pub name: String,
    /// The extended resource of its pool's GPUs (`nvidia.com/gpu`, a MIG resource).
    #[serde(skip)]
    pub resource: Option<String>,
    /// The reclaim rule it is held to; `None`: no rule selects it (exempt).
    pub rule: Option<ReclaimContract>,
}

impl Object {
    fn kind(&self) -> Option<Kind> {
        Kind::from_kind(self.kind)
    }

    /// What reclaiming it does.
    pub fn action(&self) -> &'static str {
        if self.kind == Kind::Job.kind() {
            "delete"
        } else {
            "scale_to_zero"
        }
    }

    /// `StatefulSet lab/idle-notebook`.
    pub fn describe(&self) -> String {
        format!("{} `{}/{}`", self.kind, self.namespace, self.name)
    }
}

/// The workload objects (Deployment, StatefulSet, Job) berth renders into `cluster`, with
/// the reclaim rule of each, in render order.
pub fn objects(ir: &Ir, plan: &Plan, cluster: &ClusterManifests) -> Vec<Object> {
    let mut out = Vec::new();
    for m in &cluster.manifests {
        if !matches!(m.kind, Kind::Deployment | Kind::StatefulSet | Kind::Job) {
            continue;
        }
        let label = |key: &str| {
            m.object["metadata"]["labels"][key]
                .as_str()
                .map(str::to_string)
        };
        let (Some(workload), Some(target)) = (label(labels::WORKLOAD), label(labels::TARGET))
        else {
            continue;
        };
        let pool = label(labels::POOL);
        let resource = ir
            .target_by_name(&target)
            .map(|id| ir.target(id))
            .and_then(|t| t.pools.iter().find(|p| Some(&p.name) == pool.as_ref()))
            .map(|p| render::pool_resource_name(ir, p));
        out.push(Object {
            context: cluster.context.clone(),
            rule: ReclaimContract::of(plan, &workload),
            target,
            pool,
            workload,
            namespace: m.namespace.clone().unwrap_or_default(),
            kind: m.kind.kind(),
            name: m.name.clone(),
            resource,
        });
    }
    out
}

/// A running pod of an object and the GPUs it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PodUse {
    pub pod: String,
    pub gpus: i64,
}

/// For each of `objects` (all of one cluster), its running pods holding GPUs: one LIST of
/// berth's pods on the objects' targets.
pub async fn pods(cluster: &Cluster, objects: &[Object]) -> Result<Vec<Vec<PodUse>>, ApiError> {
    let targets: BTreeSet<String> = objects.iter().map(|o| o.target.clone()).collect();
    let targets: Vec<String> = targets.into_iter().collect();
    let selector = super::prune::selector(&targets);
    let all: Vec<Pod> = cluster
        .list_typed(cluster.typed_all(), "pods", Some(&selector))
        .await?;
    Ok(objects
        .iter()
        .map(|o| {
            let Some(resource) = &o.resource else {
                return Vec::new();
            };
            all.iter()
                .filter(|p| is_running(p) && p.metadata.deletion_timestamp.is_none())
                .filter(|p| p.metadata.namespace.as_deref() == Some(o.namespace.as_str()))
                .filter(|p| {
                    let labels = p.metadata.labels.as_ref();
                    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
                    label(labels::WORKLOAD) == Some(o.workload.as_str())
                        && label(labels::TARGET) == Some(o.target.as_str())
                        && label(labels::POOL) == o.pool.as_deref()
                })
                .map(|p| PodUse {
                    pod: p.metadata.name.clone().unwrap_or_default(),
                    gpus: pod_request(p, resource),
                })
                .filter(|u| u.gpus > 0)
                .collect()
        })
        .collect())
}

/// Connects to the cluster of `context`; the error as text, redacted.
pub async fn connect(kubeconfigs: &Kubeconfigs, context: &str) -> Result<Cluster, String> {
    super::status::connect(kubeconfigs, context)
        .await
        .map_err(|e| kubeconfigs.redact(&e))
}

/// Reclaims `object`: a Job deleted, a StatefulSet or Deployment scaled to 0.
pub async fn reclaim(cluster: &Cluster, object: &Object) -> Result<(), ApiError> {
    match object.kind() {
        Some(Kind::Job) => {
            cluster
                .delete(Kind::Job, &object.namespace, &object.name, false)
                .await
        }
        Some(kind) => {
            cluster
                .scale(kind, &object.namespace, &object.name, 0)
                .await
        }
        None => Ok(()),
    }
}

/// One scrape of one pod: the utilisation (%) of each GPU it holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    pub at: String,
    pub utilization: Vec<f64>,
}

/// A pod's idle series: every sample since `since` read 0% on every GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodEvidence {
    pub pod: String,
    pub gpus: i64,
    pub idle_since: String,
    pub samples: Vec<Sample>,
}

/// Why an object is reclaimed: its pods' idle series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    pub policy: String,
    /// The rule's threshold.
    pub idle_after_s: f64,
    /// How long every GPU of the object has read 0%, at this round.
    pub idle_for_s: f64,
    pub pods: Vec<PodEvidence>,
}

/// Why an object is kept.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum Kept {
    /// No reclaim rule selects its workload.
    Exempt,
    /// A pod has no utilisation in the exporter's answer: not evidence of idleness.
    NoMetrics { pods: Vec<String> },
    /// A GPU of a pod read above 0%.
    Busy { pods: Vec<String>, utilization: f64 },
    /// Idle, not yet for the rule's time.
    IdleNotYet {
        idle_for_s: f64,
        idle_after_s: f64,
        /// One run sees one sample; only `--watch` sees a window.
        one_sample: bool,
    },
}

impl Kept {
    /// The reason for people.
    pub fn message(&self) -> String {
        match self {
            Kept::Exempt => "exempt: no reclaim rule selects it".into(),
            Kept::NoMetrics { pods } => format!(
                "no GPU utilisation for {}: missing metrics are never idleness",
                ticked(pods)
            ),
            Kept::Busy { pods, utilization } => {
                format!("busy: {} at {utilization:.0}%", ticked(pods))
            }
            Kept::IdleNotYet {
                idle_for_s,
                idle_after_s,
                one_sample,
            } => {
                let mut m = format!("idle for {} of {}", secs(*idle_for_s), secs(*idle_after_s));
                if *one_sample {
                    m.push_str(": one sample is no window, run with `--watch`");
                }
                m
            }
        }
    }
}

fn ticked(pods: &[String]) -> String {
    let ticked: Vec<String> = pods.iter().map(|p| format!("`{p}`")).collect();
    format!("pod {}", ticked.join(", "))
}

/// Seconds for people: `4.2s`, `30m`, `2h`.
pub fn secs(s: f64) -> String {
    if s >= 3600.0 && (s % 3600.0).abs() < 1e-9 {
        format!("{}h", (s / 3600.0) as u64)
    } else if s >= 60.0 && (s % 60.0).abs() < 1e-9 {
        format!("{}m", (s / 60.0) as u64)
    } else {
        format!("{s:.1}s")
    }
}

/// The verdict on one object at one round.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Reclaim(Evidence),
    Keep(Kept),
}

#[derive(Clone, Debug)]
struct Series {
    since: Timestamp,
    samples: VecDeque<Sample>,
}

/// Per-pod idle series across rounds (in memory: a `--watch` loop's state).
#[derive(Debug, Default)]
pub struct Tracker {
    series: BTreeMap<(String, String, String), Series>,
}

impl Tracker {
    /// Takes one round's samples of one cluster (`utilization`: `(namespace, pod)` → one
    /// value per GPU, [`super::top::scrape_dcgm`]) and judges each object with GPU pods;
    /// objects holding no GPUs now are left out. `one_sample`: a run that sees only this round.
    pub fn observe(
        &mut self,
        now: Timestamp,
        objects: &[Object],
        pods: &[Vec<PodUse>],
        utilization: &BTreeMap<(String, String), Vec<f64>>,
        one_sample: bool,
    ) -> Vec<(Object, i64, Verdict)> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for (object, pods) in objects.iter().zip(pods) {
            if pods.is_empty() {
                continue;
            }
            let gpus: i64 = pods.iter().map(|p| p.gpus).sum();
            let mut missing = Vec::new();
            let mut busy = Vec::new();
            let mut peak: f64 = 0.0;
            for p in pods {
                let key = (
                    object.context.clone(),
                    object.namespace.clone(),
                    p.pod.clone(),
                );
                seen.insert(key.clone());
                let values = utilization.get(&(object.namespace.clone(), p.pod.clone()));
                match values {
                    None => {
                        missing.push(p.pod.clone());
                        self.series.remove(&key);
                    }
                    Some(v) if v.is_empty() || v.iter().any(|u| *u > 0.0 || u.is_nan()) => {
                        busy.push(p.pod.clone());
                        peak = v
                            .iter()
                            .copied()
                            .filter(|u| !u.is_nan())
                            .fold(peak, f64::max);
                        self.series.remove(&key);
                    }
                    Some(v) => {
                        let series = self.series.entry(key).or_insert_with(|| Series {
                            since: now,
                            samples: VecDeque::new(),
                        });
                        if series.samples.len() == MAX_SAMPLES {
                            series.samples.pop_front();
                        }
                        series.samples.push_back(Sample {
                            at: now.to_string(),
                            utilization: v.clone(),
                        });
                    }
                }
            }
            let verdict = match &object.rule {
                None => Verdict::Keep(Kept::Exempt),
                Some(_) if !missing.is_empty() => Verdict::Keep(Kept::NoMetrics { pods: missing }),
                Some(_) if !busy.is_empty() => Verdict::Keep(Kept::Busy {
                    pods: busy,
                    utilization: peak,
                }),
                Some(rule) => self.judge(now, object, pods, rule, one_sample),
            };
            out.push((object.clone(), gpus, verdict));
        }
        self.series.retain(|k, _| seen.contains(k));
        out
    }

    fn judge(
        &self,
        now: Timestamp,
        object: &Object,
        pods: &[PodUse],
        rule: &ReclaimContract,
        one_sample: bool,
    ) -> Verdict {
        let mut evidence = Vec::new();
        let mut since = None::<Timestamp>;
        for p in pods {
            let key = (
                object.context.clone(),
                object.namespace.clone(),
                p.pod.clone(),
            );
            let Some(series) = self.series.get(&key) else {
                continue;
            };
            // The object is idle since its last pod to become idle.
            since = Some(since.map_or(series.since, |s| s.max(series.since)));
            evidence.push(PodEvidence {
                pod: p.pod.clone(),
                gpus: p.gpus,
                idle_since: series.since.to_string(),
                samples: series.samples.iter().cloned().collect(),
            });
        }
        let idle_ns = since.map_or(0, |s| now.duration_since(s).as_nanos().max(0));
        let idle_for_s = idle_ns as f64 / 1e9;
        let idle_after_s = rule.idle_after_ns as f64 / 1e9;
        if idle_ns >= i128::from(rule.idle_after_ns) {
            Verdict::Reclaim(Evidence {
                policy: rule.policy.clone(),
                idle_after_s,
                idle_for_s,
                pods: evidence,
            })
        } else {
            Verdict::Keep(Kept::IdleNotYet {
                idle_for_s,
                idle_after_s,
                one_sample,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, rule: Option<u64>) -> Object {
        Object {
            context: "c".into(),
            target: "t".into(),
            pool: Some("p".into()),
            workload: name.into(),
            namespace: "ns".into(),
            kind: "StatefulSet",
            name: name.into(),
            resource: Some("nvidia.com/gpu".into()),
            rule: rule.map(|ns| ReclaimContract {
                policy: "hygiene".into(),
                idle_after_ns: ns,
            }),
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_750_000_000 + s).expect("instant")
    }

    /// An idle pod is reclaimed once idle for the rule's time, not before; a busy sample
    /// starts the series again; missing metrics keep it.
    #[test]
    fn idleness_is_a_series() {
        let objects = [object("nb", Some(10_000_000_000))];
        let pods = [vec![PodUse {
            pod: "nb-0".into(),
            gpus: 1,
        }]];
        let util = |u: Option<f64>| {
            u.map(|u| BTreeMap::from([(("ns".to_string(), "nb-0".to_string()), vec![u])]))
                .unwrap_or_default()
        };
        let mut t = Tracker::default();
        let verdict = |t: &mut Tracker, s, u| {
            t.observe(at(s), &objects, &pods, &util(u), false)[0]
                .2
                .clone()
        };
        assert!(matches!(
            verdict(&mut t, 0, Some(0.0)),
            Verdict::Keep(Kept::IdleNotYet { .. })
        ));
        assert!(matches!(
            verdict(&mut t, 9, Some(0.0)),
            Verdict::Keep(Kept::IdleNotYet { .. })
        ));
        assert!(matches!(
            verdict(&mut t, 10, Some(3.0)),
            Verdict::Keep(Kept::Busy { .. })
        ));
        assert!(matches!(
            verdict(&mut t, 11, Some(0.0)),
            Verdict::Keep(Kept::IdleNotYet { .. })
        ));
        assert!(matches!(
            verdict(&mut t, 15, None),
            Verdict::Keep(Kept::NoMetrics { .. })
        ));
        assert!(matches!(
            verdict(&mut t, 16, Some(0.0)),
            Verdict::Keep(Kept::IdleNotYet { .. })
        ));
        let Verdict::Reclaim(e) = verdict(&mut t, 26, Some(0.0)) else {
            panic!("idle for 10s");
        };
        assert_eq!(e.idle_for_s, 10.0);
        assert_eq!(e.pods[0].samples.len(), 2);
    }
}
