//! Rejections rendered for the plan: the human sentence for a [`Verdict`] and the source
//! locations of both sides (the requirement in the workload, placement or policy; the offer
//! in the target). Rendered lazily, only for the rejections a plan lists.

// INVARIANT: every index is a dense id of the IR being placed (workload < `ir.workloads.len()`,
// target < `ir.targets.len()`, a pool < its target's pools) or a position in a table the solver
// sized from those counts when it built it (`EstateIndex`, `EligibilityMatrix`, `Assignment`'s
// options and slots, the ledgers); nothing from user text indexes here. Indexing is the hot
// path; the property tests and planted estates run it over generated estates.
#![allow(clippy::indexing_slicing)]

use super::Solved;
use super::eligibility::gpu_units;
use super::index::Partition;
use super::policy::{CapSource, NotEntitled};
use super::units::{bytes, count, cpus, duration, names};
use super::verdict::{Described, NO_DETAIL, Reason, Verdict};
use crate::ir::{Ir, Selector};
use crate::plan::{Rejection, SourceRef};
use crate::source::{SourceMap, Span};

/// Detail of a `Spread` verdict: which spread rule.
pub const SPREAD_TARGET: u32 = 0;
pub const SPREAD_REGION: u32 = 1;

/// Where a side of a rejection is written.
#[derive(Clone, Debug)]
pub enum Site {
    /// A field of workload `w`, the first of these keys that has a span (else its name).
    Workload(usize, Vec<String>),
    /// A field of target `t`, likewise.
    Target(usize, Vec<String>),
    Span(Option<Span>),
}

impl Solved<'_> {
    /// The rejection of target `t` for workload `w`.
    pub fn rejection(&self, w: usize, t: usize, v: Verdict) -> Rejection {
        let reason = v.reason().unwrap_or(Reason::NotNeeded);
        let (mut message, requirement, offer) = self.describe(w, t, reason, v.detail());
        let workload = &self.ir.workloads[w];
        if reason.stage() != crate::plan::RejectionStage::Assignment
            && workload.placement.fallback.iter().any(|f| f.index() == t)
        {
            message.push_str("; it is listed as a fallback, so the runtime cannot fail over to it");
        }
        Rejection {
            target: self.ir.targets[t].name.clone(),
            stage: reason.stage(),
            reason: reason.key().into(),
            message,
            requirement: self.site(requirement),
            offer: self.site(offer),
            others: 0,
        }
    }

    pub fn site(&self, site: Site) -> Option<SourceRef> {
        source_ref(self.sources, self.site_span(site)?)
    }

    fn site_span(&self, site: Site) -> Option<Span> {
        match site {
            Site::Workload(w, keys) => Some(self.ir.spans.workloads.get(w)?.first_field(&keys)),
            Site::Target(t, keys) => Some(self.ir.spans.targets.get(t)?.first_field(&keys)),
            Site::Span(s) => s,
        }
    }

    /// The sentence for verdict `v` of pair (`w`, `t`) with the spans of its two sides, for
    /// diagnostics (which point at source where a plan names a line).
    pub fn described(&self, w: usize, t: usize, v: Verdict) -> Described {
        let reason = v.reason().unwrap_or(Reason::NotNeeded);
        let (message, requirement, offer) = self.describe(w, t, reason, v.detail());
        Described {
            message,
            requirement: self.site_span(requirement),
            offer: self.site_span(offer),
        }
    }

    /// Why no variant of `w`'s model that fits pool `d` of `t` (or, for `NO_DETAIL`, its CPU
    /// variant) can be staged there.
    fn unreachable_message(&self, w: usize, t: usize, d: u32) -> String {
        let ir = self.ir;
        let target = &ir.targets[t];
        let model = ir.workloads[w]
            .model
            .and_then(|m| ir.models.get(m.index()))
            .map_or("", |m| m.name.as_str());
        let which = if d == NO_DETAIL {
            format!("model `{model}` cannot be staged here")
        } else {
            format!(
                "no variant of `{model}` that fits pool `{}` can be staged here",
                pool_name(ir, t, d)
            )
        };
        if matches!(target.runtime, crate::ir::Runtime::Edge { .. }) {
            return format!(
                "run by an edge agent, which fetches only `oci://`, `http(s)://` and `file://` artifacts, so {which}: `{model}` is not in its `cached_models` and no variant that fits is such an artifact"
            );
        }
        let why = if target.mirrors.is_empty() {
            "it names no registry mirror".to_string()
        } else {
            "its mirrors serve `oci://` artifacts only".to_string()
        };
        format!(
            "disconnected and not run by an edge agent, so {which}: `{model}` is not in its `cached_models` and {why}"
        )
    }

    /// Message and both sites for a reason.
    fn describe(&self, w: usize, t: usize, reason: Reason, d: u32) -> (String, Site, Site) {
        let ir = self.ir;
        let wl = &ir.workloads[w];
        let target = &ir.targets[t];
        let r = &wl.resources;
        let ws = |keys: &[&str]| Site::Workload(w, keys.iter().map(|k| k.to_string()).collect());
        let ts = |keys: &[&str]| Site::Target(t, keys.iter().map(|k| k.to_string()).collect());
        match reason {
            Reason::NotCandidate => (
                format!("not among the targets of `placement {}`", wl.name),
                ws(&["placement.targets", "placement"]),
                ts(&[]),
            ),
            Reason::Environment => (
                format!(
                    "class `{}` is not an approved environment ({})",
                    target.class,
                    names(wl.environments.iter().map(|e| e.as_str()))
                ),
                ws(&["environments"]),
                ts(&["class"]),
            ),
            Reason::Connectivity => (
                format!(
                    "connectivity is `{}`; the workload tolerates `{}` at worst",
                    target.connectivity, wl.connectivity
                ),
                ws(&["connectivity"]),
                ts(&["connectivity"]),
            ),
            Reason::Accelerator | Reason::Mig | Reason::GpuMemory | Reason::NoVariant
                if d == NO_DETAIL =>
            {
                self.describe_no_pool(w, t, reason)
            }
            Reason::Accelerator => (
                format!(
                    "accepts {}; pool `{}` offers {}",
                    names(wl.accelerators.iter().map(|a| accel(ir, *a))),
                    pool_name(ir, t, d),
                    self.pool_accel(t, d)
                ),
                ws(&["accelerators", "resources.gpu"]),
                self.pool_site(t, d, "accelerator"),
            ),
            Reason::Mig => (
                self.mig_message(w, t, d),
                ws(&["resources.mig", "resources.gpu"]),
                self.pool_site(t, d, "mig"),
            ),
            Reason::GpuMemory => (
                format!(
                    "needs {} per GPU; pool `{}` offers {}",
                    bytes(r.gpu_memory.unwrap_or(0)),
                    pool_name(ir, t, d),
                    self.pool_offer(t, d)
                ),
                ws(&["resources.gpu_memory", "resources.gpu"]),
                self.pool_site(t, d, "accelerator"),
            ),
            Reason::NoVariant => (
                self.variant_message(w, t, d),
                ws(&["model"]),
                self.pool_site(t, d, "accelerator"),
            ),
            Reason::ModelUnreachable => (
                self.unreachable_message(w, t, d),
                ws(&["model"]),
                if matches!(target.runtime, crate::ir::Runtime::Edge { .. }) {
                    ts(&["runtime"])
                } else {
                    ts(&["connectivity"])
                },
            ),
            Reason::DataUnavailable => {
                let name = wl.data.get(d as usize).map_or("", |x| x.name.as_str());
                (
                    format!("does not offer data set `{name}`"),
                    Site::Workload(w, vec![format!("data.{name}")]),
                    ts(&["data"]),
                )
            }
            Reason::DataLatency => {
                let req = wl.data.get(d as usize);
                let name = req.map_or("", |x| x.name.as_str());
                let offer = target.data.iter().find(|o| o.name == name);
                (
                    format!(
                        "data set `{name}` is {} away ({}); `max_latency` is {}",
                        duration(offer.map_or(0, |o| o.latency)),
                        offer.map_or("remote", |o| o.locality.as_str()),
                        duration(req.and_then(|x| x.max_latency).unwrap_or(0))
                    ),
                    Site::Workload(w, vec![format!("data.{name}.max_latency")]),
                    Site::Target(t, vec![format!("data.{name}")]),
                )
            }
            Reason::ServiceMaturity => {
                let Some(req) = wl.services.get(d as usize) else {
                    return (
                        String::from("a required service is missing"),
                        ws(&["services"]),
                        ts(&["services"]),
                    );
                };
                let svc = ir
                    .services
                    .get(req.service.index())
                    .map_or("", |s| s.name.as_str());
                let has = self.index.maturity(t, req.service);
                let message = if has == crate::ir::Maturity::Absent {
                    format!("does not offer `{svc}`; needs `{svc} >= {}`", req.min)
                } else {
                    format!("offers `{svc}` at {has}; needs `{svc} >= {}`", req.min)
                };
                let key = vec![format!("services.{svc}"), "services".to_string()];
                (
                    message,
                    Site::Workload(w, key.clone()),
                    Site::Target(t, key),
                )
            }
            Reason::Cpu => (
                format!(
                    "needs {} CPUs per replica; the target has {}",
                    cpus(r.cpu_millis),
                    cpus(target.cpu_millis)
                ),
                ws(&["resources.cpu"]),
                ts(&["cpu"]),
            ),
            Reason::Memory => (
                format!(
                    "needs {} of memory per replica; the target has {}",
                    bytes(r.memory),
                    bytes(target.memory)
                ),
                ws(&["resources.memory"]),
                ts(&["memory"]),
            ),
            Reason::GpuCount => (
                format!(
                    "needs {} per replica from one pool; the largest fitting pool, `{}`, has {}{}",
                    count(u64::from(gpu_units(wl)), "GPU"),
                    pool_name(ir, t, d),
                    self.units_of(t, d),
                    self.live_note(t, d)
                ),
                ws(&["resources.gpu"]),
                self.pool_site(t, d, "count"),
            ),
            Reason::Denied => {
                let rule = ir.policy.denies.get(d as usize);
                (
                    format!(
                        "denied by policy `{}`: {}",
                        rule.map_or("", |r| r.policy.as_str()),
                        rule.map_or("", |r| r.reason.as_str())
                    ),
                    Site::Span(ir.spans.denies.get(d as usize).copied()),
                    ts(&["class"]),
                )
            }
            Reason::NotEntitled => {
                let (why, e) = NotEntitled::from_detail(d);
                self.entitlement_message(w, t, why, e)
            }
            Reason::Quota | Reason::EntitlementLimit | Reason::WindowLimit => {
                let (message, site) = self.cap_message(d as usize);
                (message, site, ts(&[]))
            }
            Reason::Capacity => {
                let ledger = &self.assignment.ledger;
                let flat = self.index.flat_pool(t, d);
                let free = ledger.pool_free.get(flat).copied().unwrap_or(0);
                let cap = self.index.pools.get(flat).map_or(0, |p| p.units);
                let unit = self.unit_noun(t, d);
                (
                    format!(
                        "pool `{}` has {free} of {cap} {unit}s free; needs {} per replica{}",
                        pool_name(ir, t, d),
                        count(u64::from(gpu_units(wl)), unit),
                        self.live_note(t, d)
                    ),
                    ws(&["resources.gpu"]),
                    self.pool_site(t, d, "count"),
                )
            }
            Reason::CpuFull => (
                format!(
                    "{} of {} CPUs free; needs {} per replica",
                    cpus(self.assignment.ledger.cpu_free[t]),
                    cpus(target.cpu_millis),
                    cpus(r.cpu_millis)
                ),
                ws(&["resources.cpu"]),
                ts(&["cpu"]),
            ),
            Reason::MemoryFull => (
                format!(
                    "{} of {} memory free; needs {} per replica",
                    bytes(self.assignment.ledger.memory_free[t]),
                    bytes(target.memory),
                    bytes(r.memory)
                ),
                ws(&["resources.memory"]),
                ts(&["memory"]),
            ),
            Reason::Spread if d == SPREAD_REGION => {
                let n = wl.placement.per_region.unwrap_or(0);
                (
                    format!(
                        "region `{}` already holds {} (`per_region({n})`)",
                        target.region.as_deref().unwrap_or(&target.name),
                        count(u64::from(n), "replica")
                    ),
                    ws(&["placement.per_region", "placement.spread", "placement"]),
                    ts(&["region"]),
                )
            }
            Reason::Spread => {
                let n = wl.placement.per_target.unwrap_or(0);
                (
                    format!(
                        "already holds {} (`spread = per_target({n})`)",
                        count(u64::from(n), "replica")
                    ),
                    ws(&["placement.spread", "placement"]),
                    ts(&[]),
                )
            }
            Reason::Isolation => {
                let partner = ir.workloads.get(d as usize).map_or("", |x| x.name.as_str());
                // The first of the workload's pools on this target that holds the partner.
                let pool = self.assignment.options[w]
                    .iter()
                    .filter(|o| o.target as usize == t && o.flat_pool != super::assign::NO_POOL)
                    .find(|o| {
                        self.assignment.ledger.holders[o.flat_pool as usize]
                            .iter()
                            .any(|(x, _)| *x == d)
                    })
                    .map_or("", |o| pool_name(ir, t, o.pool));
                (
                    format!(
                        "pool `{pool}` holds `{partner}`, which `{}` is isolated from",
                        wl.name
                    ),
                    ws(&["placement.isolate_from", "placement"]),
                    ts(&[]),
                )
            }
            Reason::NotNeeded => (
                self.not_needed_message(w, t),
                ws(&["placement.prefer", "placement"]),
                ts(&[]),
            ),
        }
    }

    fn describe_no_pool(&self, w: usize, t: usize, reason: Reason) -> (String, Site, Site) {
        let wl = &self.ir.workloads[w];
        let message = if reason == Reason::NoVariant {
            let model = wl.model.and_then(|m| self.ir.models.get(m.index()));
            format!(
                "no variant of model `{}` runs without an accelerator",
                model.map_or("", |m| m.name.as_str())
            )
        } else {
            format!(
                "has no GPU pool; needs {} per replica",
                count(u64::from(gpu_units(wl)), "GPU")
            )
        };
        (
            message,
            Site::Workload(w, vec!["resources.gpu".into(), "model".into()]),
            Site::Target(t, Vec::new()),
        )
    }

    fn mig_message(&self, w: usize, t: usize, p: u32) -> String {
        let wl = &self.ir.workloads[w];
        let kind = self.kind_of(t, p);
        let pool = pool_name(self.ir, t, p);
        let pool_profile = self.ir.targets[t]
            .pools
            .get(p as usize)
            .and_then(|x| x.mig.clone())
            .unwrap_or_default();
        match (&wl.resources.mig, kind.map(|k| k.partition)) {
            (_, Some(Partition::UnknownMig)) => format!(
                "pool `{pool}` is partitioned as `{pool_profile}`, which {} does not offer",
                self.pool_accel(t, p)
            ),
            (Some(m), Some(Partition::Mig(_))) => {
                format!("needs MIG `{m}` slices; pool `{pool}` is partitioned as `{pool_profile}`")
            }
            (Some(m), _) => format!(
                "needs MIG `{m}` slices; pool `{pool}` ({}) is not partitioned",
                self.pool_accel(t, p)
            ),
            // A partitioned pool serves only workloads asking for its profile.
            (None, _) => format!(
                "needs whole GPUs; pool `{pool}` is partitioned into MIG `{pool_profile}` instances, \
                 which serve only workloads asking for `mig = \"{pool_profile}\"`"
            ),
        }
    }

    fn variant_message(&self, w: usize, t: usize, p: u32) -> String {
        let ir = self.ir;
        let Some(model) = ir.workloads[w].model.and_then(|m| ir.models.get(m.index())) else {
            return String::from("no model variant fits");
        };
        let kind = self.kind_of(t, p);
        let why: Vec<String> = model
            .variants
            .iter()
            .map(|v| match kind {
                Some(k)
                    if !v.accelerators.is_empty() && !v.accelerators.contains(&k.accelerator) =>
                {
                    format!(
                        "`{}` runs on {}",
                        v.name,
                        v.accelerators
                            .iter()
                            .map(|a| accel(ir, *a))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
                _ => format!("`{}` needs {}", v.name, bytes(v.gpu_memory)),
            })
            .collect();
        format!(
            "no variant of model `{}` fits pool `{}` ({}): {}",
            model.name,
            pool_name(ir, t, p),
            self.pool_offer(t, p),
            why.join("; ")
        )
    }

    fn entitlement_message(
        &self,
        w: usize,
        t: usize,
        why: NotEntitled,
        e: u32,
    ) -> (String, Site, Site) {
        let ir = self.ir;
        let wl = &ir.workloads[w];
        let e = (why != NotEntitled::NoEntitlement).then_some(e);
        let ent = e.and_then(|e| ir.policy.entitlements.get(e as usize));
        let ent_site = Site::Span(e.and_then(|e| ir.spans.entitlements.get(e as usize).copied()));
        match (why, ent) {
            (NotEntitled::Environment, Some(ent)) => (
                format!(
                    "`{}` is not entitled to class `{}` (entitled: {})",
                    wl.identity,
                    ir.targets[t].class,
                    names(ent.environments.iter().flatten().map(|c| c.as_str()))
                ),
                ent_site,
                Site::Target(t, vec!["class".into()]),
            ),
            (NotEntitled::Expired, Some(ent)) => (
                format!(
                    "the entitlement of `{}` expired at `{}`",
                    wl.identity,
                    ent.until.as_deref().unwrap_or("?")
                ),
                ent_site,
                Site::Workload(w, vec!["identity".into()]),
            ),
            (NotEntitled::Accelerator, Some(ent)) => {
                let mut offered: Vec<&str> = ir.targets[t]
                    .pools
                    .iter()
                    .map(|p| accel(ir, p.accelerator))
                    .collect();
                offered.sort_unstable();
                offered.dedup();
                (
                    format!(
                        "`{}` is not entitled to {} (entitled: {})",
                        wl.identity,
                        offered.join(", "),
                        ent.accelerators
                            .iter()
                            .flatten()
                            .map(|a| accel(ir, *a))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    ent_site,
                    Site::Target(t, Vec::new()),
                )
            }
            _ => (
                format!("`{}` has no entitlement, so it gets no GPUs", wl.identity),
                Site::Workload(w, vec!["identity".into()]),
                Site::Target(t, Vec::new()),
            ),
        }
    }

    /// Message for a cap, and where the cap is written.
    pub fn cap_message(&self, cap: usize) -> (String, Site) {
        let ir = self.ir;
        let Some(c) = self.policy.caps.get(cap) else {
            return (String::from("a policy cap is used up"), Site::Span(None));
        };
        let used = self
            .assignment
            .ledger
            .cap_used
            .get(cap)
            .copied()
            .unwrap_or(0);
        match c.source {
            CapSource::Quota(i) => {
                let team = ir
                    .policy
                    .quotas
                    .get(i as usize)
                    .map_or("", |q| q.team.as_str());
                (
                    format!(
                        "team `{team}` quota of {} is used up ({used} in use)",
                        count(c.max, "GPU")
                    ),
                    Site::Span(ir.spans.quotas.get(i as usize).copied()),
                )
            }
            CapSource::Entitlement(i) => {
                let id = ir
                    .policy
                    .entitlements
                    .get(i as usize)
                    .map(|e| e.identity.to_string())
                    .unwrap_or_default();
                (
                    format!(
                        "`{id}` holds {used} of its entitled {}",
                        count(c.max, "GPU")
                    ),
                    Site::Span(ir.spans.entitlements.get(i as usize).copied()),
                )
            }
            CapSource::Limit(i) => {
                let limit = ir.policy.limits.get(i as usize);
                let window = limit
                    .and_then(|l| ir.policy.windows.get(l.window.index()))
                    .map_or("", |x| x.name.as_str());
                (
                    format!(
                        "window `{window}` is in effect: {} may hold {} together and {used} are in use",
                        limit.map_or(String::new(), |l| selector(&l.selector)),
                        count(c.max, "GPU")
                    ),
                    Site::Span(ir.spans.limits.get(i as usize).copied()),
                )
            }
        }
    }

    fn not_needed_message(&self, w: usize, t: usize) -> String {
        let wl = &self.ir.workloads[w];
        let position = super::assign::fallback_position(wl, t);
        if position > 0 {
            return format!(
                "kept for failover: fallback {position} of {}, and every replica is placed on a target ranked before it",
                wl.placement.fallback.len(),
            );
        }
        let prefs = super::assign::preferences(self.ir, w);
        let here: Vec<String> = prefs
            .iter()
            .map(|p| match p {
                crate::ir::Preference::LowestCost => format!(
                    "cost {}/day per replica",
                    super::assign::replica_cost_per_day(self.ir, w, t)
                ),
                crate::ir::Preference::LowestDataLatency => format!(
                    "data latency {}",
                    duration(self.index.worst_data_latency(w, t).unwrap_or(0))
                ),
            })
            .collect();
        format!(
            "not needed: every replica is placed on a target ranked no worse ({} here)",
            here.join(", ")
        )
    }

    fn kind_of(&self, t: usize, p: u32) -> Option<&super::index::PoolKind> {
        let slot = self.index.target_pools(t).get(p as usize)?;
        self.index.kinds.get(slot.kind as usize)
    }

    /// `L4`, or `A100 MIG 1g.10gb`.
    fn pool_accel(&self, t: usize, p: u32) -> String {
        let Some(pool) = self.ir.targets[t].pools.get(p as usize) else {
            return String::from("nothing");
        };
        let name = accel(self.ir, pool.accelerator);
        match &pool.mig {
            Some(m) => format!("{name} MIG {m}"),
            None => name.to_string(),
        }
    }

    /// `16GiB (T4)`.
    fn pool_offer(&self, t: usize, p: u32) -> String {
        let memory = self.kind_of(t, p).map_or(0, |k| k.unit_memory);
        format!("{} ({})", bytes(memory), self.pool_accel(t, p))
    }

    fn units_of(&self, t: usize, p: u32) -> String {
        let units = self
            .index
            .target_pools(t)
            .get(p as usize)
            .map_or(0, |s| s.units);
        count(u64::from(units), self.unit_noun(t, p))
    }

    /// ` (live: 8 allocatable, 6 held by pods berth does not manage)` for a pool whose
    /// capacity was read from its cluster (`berth plan --live`), so that a pool full of
    /// other pods says so; empty otherwise.
    fn live_note(&self, t: usize, p: u32) -> String {
        let read = self.ir.targets[t]
            .pools
            .get(p as usize)
            .and_then(|x| x.live)
            .and_then(|l| l.read);
        match read {
            Some(r) => format!(
                " (live: {} allocatable, {} held by pods berth does not manage)",
                r.allocatable, r.held
            ),
            None => String::new(),
        }
    }

    /// `GPU`, or `MIG slice` for a partitioned pool.
    pub fn unit_noun(&self, t: usize, p: u32) -> &'static str {
        match self.ir.targets[t]
            .pools
            .get(p as usize)
            .and_then(|x| x.mig.as_ref())
        {
            Some(_) => "MIG slice",
            None => "GPU",
        }
    }

    fn pool_site(&self, t: usize, p: u32, field: &str) -> Site {
        let name = pool_name(self.ir, t, p);
        Site::Target(
            t,
            vec![format!("pool.{name}.{field}"), format!("pool.{name}")],
        )
    }
}

/// `kind notebook`, `class experiment`, `team research`.
pub fn selector(s: &Selector) -> String {
    match s {
        Selector::Class(c) => format!("class {c}"),
        Selector::Kind(k) => format!("kind {k}"),
        Selector::Team(t) => format!("team {t}"),
    }
}

pub fn accel(ir: &Ir, a: crate::ir::AcceleratorId) -> &str {
    ir.accelerators
        .get(a.index())
        .map_or("?", |x| x.name.as_str())
}

pub fn pool_name(ir: &Ir, t: usize, p: u32) -> &str {
    ir.targets
        .get(t)
        .and_then(|x| x.pools.get(p as usize))
        .map_or("", |x| x.name.as_str())
}

/// Span → file, line and column.
pub fn source_ref(sources: &SourceMap, span: Span) -> Option<SourceRef> {
    let file = sources.get(span.file)?;
    let lc = file.line_col(span.start);
    Some(SourceRef {
        file: file.name.clone(),
        line: lc.line,
        column: lc.column,
        start: span.start,
        end: span.end,
    })
}
