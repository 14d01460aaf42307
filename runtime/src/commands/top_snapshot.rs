//! What `berth top` shows at one instant: live GPU allocation across every target of a plan
//! — per target and pool allocated of total GPUs (MIG slices counted as slices), per
//! workload and per identity, idle allocations flagged with their utilisation — read from the
//! clusters (pods' GPU requests on the pools' nodes; utilisation from a DCGM exporter) and
//! from the edge agents (`/v1/status`: their GPUs and the workloads holding them). A source
//! that cannot be read is named with why; the rest is read all the same.

use crate::backends::edge::status::{EdgeStatusArgs, Report, TOKEN_ENV};
use crate::backends::k8s;
use crate::backends::k8s::kubeconfig::Kubeconfigs;
use berth_compiler::ir::{Ir, Runtime};
use berth_compiler::plan::Plan;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Where figures came from, and whether it answered.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Source {
    /// `cluster` (a kubeconfig context), `agent` (an edge target) or `dcgm`.
    pub kind: &'static str,
    pub name: String,
    /// `reachable`, or why not.
    pub state: String,
}

/// A pool's GPUs.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PoolRow {
    pub target: String,
    pub pool: String,
    pub resource: String,
    pub allocated: i64,
    pub total: i64,
}

/// GPUs one workload (or one pod berth did not place) holds on one pool.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AllocationRow {
    pub target: String,
    pub pool: String,
    /// The workload; `namespace/pod` for a pod berth did not place.
    pub workload: String,
    /// As the spec names it (`service_account("search")`); `None` outside the spec.
    pub identity: Option<String>,
    pub gpus: i64,
    /// Mean utilisation of its GPUs, percent, when a source measured it.
    pub utilization: Option<f64>,
    pub idle: bool,
}

/// GPUs per identity, all targets together.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct IdentityRow {
    pub identity: String,
    pub gpus: i64,
    pub idle_gpus: i64,
}

/// Everything `berth top` shows at one instant.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Snapshot {
    pub plan_id: String,
    pub sources: Vec<Source>,
    pub pools: Vec<PoolRow>,
    pub allocations: Vec<AllocationRow>,
    pub identities: Vec<IdentityRow>,
}

impl Snapshot {
    pub fn unreachable(&self) -> bool {
        self.sources.iter().any(|s| s.state != "reachable")
    }
}

/// Reads every source once.
pub fn snapshot(
    ir: &Ir,
    plan: &Plan,
    edge_args: &EdgeStatusArgs,
    dcgm: &BTreeMap<String, String>,
    idle_below: f64,
) -> Result<Snapshot, String> {
    let identity = |workload: &str| {
        ir.workload_by_name(workload)
            .map(|id| ir.workload(id).identity.to_string())
    };
    let mut snap = Snapshot {
        plan_id: plan.plan_id.clone(),
        ..Snapshot::default()
    };
    // Clusters: one context at a time, each with its targets.
    let rendered = k8s::render::render(ir, plan);
    let kubeconfigs = Kubeconfigs::load();
    let runtime = crate::tasks::runtime_with(2)?;
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    for cluster in &rendered.clusters {
        let read = runtime.block_on(k8s::top::read_cluster(&kubeconfigs, cluster, ir));
        let (pools, holders) = match read {
            Ok(found) => {
                snap.sources.push(Source {
                    kind: "cluster",
                    name: cluster.context.clone(),
                    state: "reachable".into(),
                });
                found
            }
            Err(e) => {
                snap.sources.push(Source {
                    kind: "cluster",
                    name: cluster.context.clone(),
                    state: e,
                });
                continue;
            }
        };
        let utilization = match dcgm.get(&cluster.context) {
            None => BTreeMap::new(),
            // An exporter URL may carry credentials (`http://user:token@host/`): shown
            // without them.
            Some(url) => match runtime.block_on(k8s::top::scrape_dcgm(&http, url)) {
                Ok(found) => {
                    snap.sources.push(Source {
                        kind: "dcgm",
                        name: crate::backends::arc::redact_url(url, url),
                        state: "reachable".into(),
                    });
                    found
                }
                Err(e) => {
                    snap.sources.push(Source {
                        kind: "dcgm",
                        name: crate::backends::arc::redact_url(url, url),
                        state: crate::backends::arc::redact_url(&e, url),
                    });
                    BTreeMap::new()
                }
            },
        };
        snap.pools.extend(pools.into_iter().map(|p| PoolRow {
            target: p.target,
            pool: p.pool,
            resource: p.resource,
            allocated: p.allocated,
            total: p.allocatable,
        }));
        // One row per (target, pool, workload); pods outside berth one row each.
        let mut rows: BTreeMap<(String, String, String), Held> = BTreeMap::new();
        for h in holders {
            let (name, berths) = match &h.workload {
                Some(w) => (w.clone(), true),
                None => (format!("{}/{}", h.namespace, h.pod), false),
            };
            let entry = rows
                .entry((h.target.clone(), h.pool.clone(), name))
                .or_insert((0, Vec::new(), berths));
            entry.0 += h.gpus;
            if let Some(values) = utilization.get(&(h.namespace.clone(), h.pod.clone())) {
                entry.1.extend(values);
            }
        }
        for ((target, pool, workload), (gpus, values, berths)) in rows {
            let utilization = mean(&values);
            snap.allocations.push(AllocationRow {
                identity: berths.then(|| identity(&workload)).flatten(),
                target,
                pool,
                workload,
                gpus,
                utilization,
                idle: utilization.is_some_and(|u| u < idle_below),
            });
        }
    }
    // Edge agents: their GPUs, and the workloads whose processes hold them.
    let agents = if ir
        .targets
        .iter()
        .any(|t| matches!(t.runtime, Runtime::Edge { .. }))
    {
        Report::collect(ir, plan, edge_args)
            .map_err(|e| format!("{e} (the agents' token: --agent-token-file or {TOKEN_ENV})"))?
    } else {
        Report::default()
    };
    for site in &agents.0 {
        let reachable = site.error.is_none() && site.gpus.is_some();
        snap.sources.push(Source {
            kind: "agent",
            name: site.target.clone(),
            state: if reachable {
                "reachable".into()
            } else {
                site.error.clone().unwrap_or_else(|| "no answer".into())
            },
        });
        let Some(gpus) = &site.gpus else { continue };
        let devices: Vec<&serde_json::Value> =
            gpus["devices"].as_array().into_iter().flatten().collect();
        let pool = ir
            .target_by_name(&site.target)
            .map(|id| ir.target(id))
            .and_then(|t| t.pools.first().map(|p| (p.name.clone(), p.count)));
        let (pool_name, count) = pool.unwrap_or_else(|| ("-".into(), 0));
        let mut per_workload: BTreeMap<String, (i64, Vec<f64>)> = BTreeMap::new();
        let mut held = 0;
        for d in &devices {
            let mut owners: Vec<&str> = d["processes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["workload"].as_str())
                .collect();
            owners.sort_unstable();
            owners.dedup();
            if !owners.is_empty() {
                held += 1;
            }
            for owner in owners {
                let entry = per_workload.entry(owner.to_string()).or_default();
                entry.0 += 1;
                if let Some(u) = d["utilization"].as_f64() {
                    entry.1.push(u);
                }
            }
        }
        snap.pools.push(PoolRow {
            target: site.target.clone(),
            pool: pool_name.clone(),
            resource: "gpu".into(),
            allocated: held,
            total: if devices.is_empty() {
                i64::from(count)
            } else {
                devices.len() as i64
            },
        });
        for (workload, (gpus, values)) in per_workload {
            let utilization = mean(&values);
            snap.allocations.push(AllocationRow {
                target: site.target.clone(),
                pool: pool_name.clone(),
                identity: identity(&workload),
                workload,
                gpus,
                utilization,
                idle: utilization.is_some_and(|u| u < idle_below),
            });
        }
    }
    let mut identities: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for a in &snap.allocations {
        let key = a
            .identity
            .clone()
            .unwrap_or_else(|| "(outside the spec)".into());
        let entry = identities.entry(key).or_default();
        entry.0 += a.gpus;
        if a.idle {
            entry.1 += a.gpus;
        }
    }
    snap.identities = identities
        .into_iter()
        .map(|(identity, (gpus, idle_gpus))| IdentityRow {
            identity,
            gpus,
            idle_gpus,
        })
        .collect();
    Ok(snap)
}

/// GPUs one workload holds on a pool, the utilisation of each that was measured, and
/// whether the workload is berth's.
type Held = (i64, Vec<f64>, bool);

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn percent(u: Option<f64>) -> String {
    u.map_or_else(|| "-".into(), |u| format!("{u:.0}%"))
}

/// The tables for people: sources, pools, allocations (idle ones flagged), identities.
pub fn render(snap: &Snapshot) -> String {
    let mut out = String::new();
    for s in &snap.sources {
        if s.state != "reachable" {
            let _ = writeln!(out, "{} `{}`: unreachable: {}", s.kind, s.name, s.state);
        }
    }
    let mut pools = vec![[
        "TARGET".to_string(),
        "POOL".into(),
        "RESOURCE".into(),
        "ALLOCATED".into(),
    ]];
    pools.extend(snap.pools.iter().map(|p| {
        [
            p.target.clone(),
            p.pool.clone(),
            p.resource.clone(),
            format!("{}/{}", p.allocated, p.total),
        ]
    }));
    super::table::table(&mut out, &pools);
    out.push('\n');
    let mut rows = vec![[
        "WORKLOAD".to_string(),
        "IDENTITY".into(),
        "TARGET/POOL".into(),
        "GPUS".into(),
        "UTIL".into(),
        String::new(),
    ]];
    rows.extend(snap.allocations.iter().map(|a| {
        [
            a.workload.clone(),
            a.identity.clone().unwrap_or_else(|| "-".into()),
            format!("{}/{}", a.target, a.pool),
            a.gpus.to_string(),
            percent(a.utilization),
            if a.idle { "idle".into() } else { String::new() },
        ]
    }));
    super::table::table(&mut out, &rows);
    out.push('\n');
    let mut ids = vec![["IDENTITY".to_string(), "GPUS".into(), "IDLE".into()]];
    ids.extend(snap.identities.iter().map(|i| {
        [
            i.identity.clone(),
            i.gpus.to_string(),
            i.idle_gpus.to_string(),
        ]
    }));
    super::table::table(&mut out, &ids);
    out
}
