//! Lowering: checked items to the IR. Quantities are normalised (bytes, nanoseconds, bits/s,
//! millicores, micro-units), references become indices, defaults are filled in, and the
//! [`SpanTable`] records where every field came from.
//!
//! Lowering goes on after errors (with placeholder values) so that one run reports every
//! mistake; the IR is only handed out when there were none.
//!
//! While lowering, accelerator and service ids are the indices of the constants that define
//! them; [`remap_catalogue`] then numbers the ones actually used densely, in definition order.

// INVARIANT: model, workload, target, placement and const ids are positions in the tables of
// `names` they index, `catalogue` is sized from `names.consts`, and `port_spans` runs beside
// the ports it was collected with.
#![allow(clippy::indexing_slicing)]

use super::body::{Fields, Owner};
use super::checker::{Catalogued, Checker};
use super::error::SemaError;
use super::resolve::{Def, Typo};
use super::schema::{self, BlockSchema};
use super::types::{EnumTy, MapKeyVal, Val};
use crate::ir::*;
use crate::source::Span;
use crate::syntax::ast::ExprKind;
use std::collections::{BTreeMap, BTreeSet};

// ---------------------------------------------------------------- value accessors

pub fn str_of(v: Option<&Val<'_>>) -> Option<String> {
    match v {
        Some(Val::Str(s)) => Some(s.clone()),
        _ => None,
    }
}

pub fn int_of(v: Option<&Val<'_>>) -> Option<i128> {
    match v {
        Some(Val::Int(n) | Val::Qty(_, n) | Val::Rate(n)) => Some(*n),
        _ => None,
    }
}

pub fn u64_of(v: Option<&Val<'_>>) -> Option<u64> {
    int_of(v).and_then(|n| u64::try_from(n).ok())
}

pub fn u32_of(v: Option<&Val<'_>>) -> Option<u32> {
    int_of(v).and_then(|n| u32::try_from(n).ok())
}

/// The member name of an enum value.
pub fn member_of(v: Option<&Val<'_>>) -> Option<&'static str> {
    match v {
        Some(Val::Enum(e, i)) => Some(e.member(*i)),
        _ => None,
    }
}

pub fn fields_of<'v, 'a>(v: Option<&'v Val<'a>>) -> Option<&'v Fields<'a>> {
    match v {
        Some(Val::Fields(f)) => Some(f),
        Some(Val::Ctor(_, Some(f))) => Some(f),
        _ => None,
    }
}

pub fn list_of<'v, 'a>(v: Option<&'v Val<'a>>) -> &'v [(Val<'a>, Span)] {
    match v {
        Some(Val::List(items)) => items,
        _ => &[],
    }
}

fn string_map(v: Option<&Val<'_>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(Val::Map(items)) = v {
        for item in items {
            if let (MapKeyVal::Str(k), Val::Str(v)) = (&item.key, &item.value) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// The constant index behind an accelerator or service reference.
fn const_of(v: &Val<'_>) -> Option<u32> {
    match v {
        Val::Item(Def::Const(c), _) => Some(*c),
        _ => None,
    }
}

impl<'a> Checker<'a> {
    /// Checks a declaration's body, collecting its field spans.
    fn decl_body(
        &mut self,
        body: &'a crate::syntax::ast::Body,
        schema: &'static BlockSchema,
        sc: super::resolve::ScopeRef,
        name: &crate::syntax::ast::Ident,
    ) -> Fields<'a> {
        self.path.clear();
        self.check_body(
            body,
            schema,
            sc,
            Owner::Named(schema.name, &name.name),
            name.span,
        )
    }

    /// A list of references; reports duplicates. Returns the definitions with their spans.
    fn refs(&mut self, v: Option<&Val<'a>>, what: &str) -> Vec<(Def, Span)> {
        let mut out: Vec<(Def, Span)> = Vec::new();
        for (item, span) in list_of(v) {
            let Val::Item(def, id) = item else { continue };
            let def = match def {
                Def::Const(c) => match self.canonical_const(*c) {
                    Some(c) => Def::Const(c),
                    None => continue,
                },
                other => *other,
            };
            if let Some((_, first)) = out.iter().find(|(d, _)| *d == def) {
                self.error(SemaError::DuplicateEntry {
                    what: what.into(),
                    name: id.name.clone(),
                    first: *first,
                    second: *span,
                });
                continue;
            }
            out.push((def, *span));
        }
        out
    }

    fn accelerator_ids(&mut self, v: Option<&Val<'a>>) -> Vec<AcceleratorId> {
        self.refs(v, "accelerator")
            .into_iter()
            .filter_map(|(d, _)| match d {
                Def::Const(c) => Some(AcceleratorId(c)),
                _ => None,
            })
            .collect()
    }

    fn enum_list<T>(
        &mut self,
        v: Option<&Val<'a>>,
        what: &str,
        conv: impl Fn(&str) -> Option<T>,
    ) -> Vec<T> {
        let mut seen: Vec<(&'static str, Span)> = Vec::new();
        let mut out = Vec::new();
        for (item, span) in list_of(v) {
            let Some(m) = member_of(Some(item)) else {
                continue;
            };
            if let Some((_, first)) = seen.iter().find(|(s, _)| *s == m) {
                self.error(SemaError::DuplicateEntry {
                    what: what.into(),
                    name: m.into(),
                    first: *first,
                    second: *span,
                });
                continue;
            }
            seen.push((m, *span));
            out.extend(conv(m));
        }
        out
    }

    fn nonzero(&mut self, n: Option<u32>, field: &str, span: Span) -> Option<u32> {
        if n == Some(0) {
            self.error(SemaError::ZeroCount {
                field: field.into(),
                span,
            });
        }
        n
    }
}

/// Lowers the whole spec. Errors go to the checker; the IR is meaningful only without them.
pub fn lower(ck: &mut Checker<'_>) -> (Ir, SpanTable) {
    register_catalogue(ck);
    for c in 0..ck.names.consts.len() as u32 {
        ck.resolve_const(c);
    }
    let mut spans = SpanTable::default();
    let mut ir = Ir::default();
    for m in 0..ck.names.models.len() {
        let (model, s) = lower_model(ck, m);
        ir.models.push(model);
        spans.models.push(s);
    }
    for w in 0..ck.names.workloads.len() {
        let (workload, s) = lower_workload(ck, w);
        ir.workloads.push(workload);
        spans.workloads.push(s);
    }
    for t in 0..ck.names.targets.len() {
        let (target, s) = lower_target(ck, t);
        ir.targets.push(target);
        spans.targets.push(s);
    }
    lower_placements(ck, &mut ir, &mut spans);
    super::policy::lower_policies(ck, &mut ir, &mut spans);
    ck.spans = None;
    (ir, spans)
}

// ---------------------------------------------------------------- catalogue

/// Finds the constants whose value is a catalogue record (`accelerator { … }`, `service { … }`,
/// …) and checks them. Kinds are marked first, so that records may refer to each other.
fn register_catalogue(ck: &mut Checker<'_>) {
    let mut found = Vec::new();
    for (c, def) in ck.names.consts.iter().enumerate() {
        if let ExprKind::Record { ctor, body } = &def.value.kind
            && let Some(s) = schema::CATALOGUE_RECORDS
                .iter()
                .find(|s| s.name == ctor.name)
        {
            found.push((c, *s, ctor, body, def.scope, def.name, &def.item.docs));
        }
    }
    for (c, s, ..) in &found {
        ck.catalogue[*c] = Some(placeholder(s));
    }
    for (c, s, ctor, body, scope, name, docs) in found {
        ck.path.clear();
        let f = ck.check_record(body, s, ctor, scope);
        let entry = match s.name {
            "accelerator" => {
                let mut mig_profiles = Vec::new();
                for (m, _) in list_of(f.get("mig_profiles")) {
                    let Some(mf) = fields_of(Some(m)) else {
                        continue;
                    };
                    mig_profiles.push(MigProfile {
                        name: str_of(mf.get("name")).unwrap_or_default(),
                        memory: u64_of(mf.get("memory")).unwrap_or(0),
                        instances: u32_of(mf.get("instances")).unwrap_or(0),
                    });
                }
                Catalogued::Accelerator(Accelerator {
                    name: name.name.clone(),
                    vendor: str_of(f.get("vendor")).unwrap_or_default(),
                    family: str_of(f.get("family")).unwrap_or_default(),
                    memory: u64_of(f.get("memory")).unwrap_or(0),
                    mig_profiles,
                })
            }
            _ => Catalogued::Service(Service {
                name: name.name.clone(),
                doc: str_of(f.get("doc")).unwrap_or_else(|| docs.join(" ")),
            }),
        };
        ck.catalogue[c] = Some(entry);
    }
}

fn placeholder(s: &BlockSchema) -> Catalogued {
    match s.name {
        "accelerator" => Catalogued::Accelerator(Accelerator {
            name: String::new(),
            vendor: String::new(),
            family: String::new(),
            memory: 0,
            mig_profiles: Vec::new(),
        }),
        _ => Catalogued::Service(Service {
            name: String::new(),
            doc: String::new(),
        }),
    }
}

/// The accelerator defined by constant `c` (during lowering, ids are constant indices).
pub fn accelerator<'c>(ck: &'c Checker<'_>, id: AcceleratorId) -> Option<&'c Accelerator> {
    match ck.catalogue.get(id.index())? {
        Some(Catalogued::Accelerator(a)) => Some(a),
        _ => None,
    }
}

// ---------------------------------------------------------------- models

fn lower_model(ck: &mut Checker<'_>, m: usize) -> (Model, ItemSpans) {
    let def = &ck.names.models[m];
    let (name, item, body, sc) = (def.name, def.item, &def.decl.body, def.scope);
    ck.spans = Some(BTreeMap::new());
    let f = ck.decl_body(body, &schema::MODEL, sc, name);
    let mut variants = Vec::new();
    for slot in f.all("variant") {
        let Some(vf) = fields_of(slot.value.as_ref()) else {
            continue;
        };
        let accelerators = ck.accelerator_ids(vf.get("accelerators"));
        variants.push(Variant {
            name: slot.label.map(|l| l.name.clone()).unwrap_or_default(),
            format: member_of(vf.get("format")).unwrap_or("").to_string(),
            precision: member_of(vf.get("precision")).map(String::from),
            gpu_memory: u64_of(vf.get("gpu_memory")).unwrap_or(0),
            accelerators,
            artifact: str_of(vf.get("artifact")).unwrap_or_default(),
            digest: str_of(vf.get("digest")),
            size: u64_of(vf.get("size")),
        });
    }
    let model = Model {
        name: name.name.clone(),
        version: str_of(f.get("version")).unwrap_or_default(),
        variants,
    };
    let spans = ItemSpans {
        item: item.span,
        name: name.span,
        fields: ck.spans.take().unwrap_or_default(),
    };
    (model, spans)
}

// ---------------------------------------------------------------- workloads

fn lower_workload(ck: &mut Checker<'_>, w: usize) -> (Workload, ItemSpans) {
    let def = &ck.names.workloads[w];
    let (name, item, body, sc) = (def.name, def.item, &def.decl.body, def.scope);
    ck.spans = Some(BTreeMap::new());
    let f = ck.decl_body(body, &schema::WORKLOAD, sc, name);

    let identity = match f.get("identity") {
        Some(Val::Identity(kind, n)) => Identity {
            kind: *kind,
            name: n.clone(),
        },
        _ => Identity {
            kind: IdentityKind::ServiceAccount,
            name: String::new(),
        },
    };
    let replicas = u32_of(f.get("replicas")).unwrap_or(1);
    ck.nonzero(Some(replicas), "replicas", f.span("replicas"));

    let resources = match fields_of(f.get("resources")) {
        Some(r) => Resources {
            cpu_millis: u64_of(r.get("cpu")).unwrap_or(0),
            memory: u64_of(r.get("memory")).unwrap_or(0),
            gpu: u32_of(r.get("gpu")).unwrap_or(0),
            gpu_memory: u64_of(r.get("gpu_memory")),
            mig: str_of(r.get("mig")),
        },
        None => Resources::default(),
    };
    let accelerators = ck.accelerator_ids(f.get("accelerators"));
    let model = match f.get("model") {
        Some(Val::Item(Def::Model(m), _)) => Some(ModelId(*m)),
        _ => None,
    };

    let mut data = Vec::new();
    for slot in f.all("data") {
        let Some(df) = fields_of(slot.value.as_ref()) else {
            continue;
        };
        data.push(DataRequirement {
            name: slot.label.map(|l| l.name.clone()).unwrap_or_default(),
            dataset: str_of(df.get("dataset")).unwrap_or_default(),
            access: member_of(df.get("access"))
                .and_then(Access::from_name)
                .unwrap_or(Access::Read),
            max_latency: u64_of(df.get("max_latency")),
            classification: member_of(df.get("classification"))
                .and_then(Classification::from_name)
                .unwrap_or(Classification::Internal),
        });
    }

    let mut services: Vec<ServiceRequirement> = Vec::new();
    let mut seen: Vec<(u32, Span)> = Vec::new();
    for (v, span) in list_of(f.get("services")) {
        let Val::Req {
            service: Def::Const(c),
            min,
        } = v
        else {
            continue;
        };
        let Some(c) = ck.canonical_const(*c) else {
            continue;
        };
        let svc_name = ck.names.consts[c as usize].name.name.clone();
        if let Some((_, first)) = seen.iter().find(|(s, _)| *s == c) {
            ck.error(SemaError::DuplicateEntry {
                what: "service".into(),
                name: svc_name,
                first: *first,
                second: *span,
            });
            continue;
        }
        seen.push((c, *span));
        ck.record_span(&format!("services.{svc_name}"), *span);
        services.push(ServiceRequirement {
            service: ServiceId(c),
            min: Maturity::from_name(EnumTy::Maturity.member(*min)).unwrap_or(Maturity::Ga),
        });
    }

    let environments = ck.enum_list(f.get("environments"), "environment", EnvClass::from_name);

    let telemetry = match fields_of(f.get("telemetry")) {
        None => Telemetry::Live,
        Some(t) => {
            let (export, buffer) = (t.has("export"), t.has("buffer"));
            if export == buffer {
                ck.error(SemaError::TelemetryChoice {
                    span: f.span("telemetry"),
                    both: export,
                });
            }
            match u64_of(t.get("buffer")) {
                Some(ns) if !export => Telemetry::Buffer(ns),
                _ => Telemetry::Live,
            }
        }
    };

    let mut ports: Vec<u16> = Vec::new();
    let mut port_spans: Vec<Span> = Vec::new();
    for (v, span) in list_of(f.get("ports")) {
        let Some(p) = int_of(Some(v)).and_then(|n| u16::try_from(n).ok()) else {
            continue;
        };
        if let Some(i) = ports.iter().position(|q| *q == p) {
            ck.error(SemaError::DuplicateEntry {
                what: "port".into(),
                name: p.to_string(),
                first: port_spans[i],
                second: *span,
            });
            continue;
        }
        ports.push(p);
        port_spans.push(*span);
    }

    let workload = Workload {
        name: name.name.clone(),
        release: str_of(f.get("release")).unwrap_or_default(),
        image: str_of(f.get("image")).unwrap_or_default(),
        kind: member_of(f.get("kind"))
            .and_then(WorkloadKind::from_name)
            .unwrap_or(WorkloadKind::Service),
        class: member_of(f.get("class"))
            .and_then(WorkloadClass::from_name)
            .unwrap_or(WorkloadClass::Production),
        team: str_of(f.get("team")).unwrap_or_else(|| identity.name.clone()),
        identity,
        replicas,
        resources,
        accelerators,
        model,
        data,
        services,
        connectivity: member_of(f.get("connectivity"))
            .and_then(Connectivity::from_name)
            .unwrap_or(Connectivity::Connected),
        environments,
        telemetry,
        ports,
        placement: PlacementRules::default(),
    };
    let spans = ItemSpans {
        item: item.span,
        name: name.span,
        fields: ck.spans.take().unwrap_or_default(),
    };
    (workload, spans)
}

// ---------------------------------------------------------------- targets

/// The model-staging settings of a `kubernetes { … }` or `arc { … }` runtime.
fn staging(get: &dyn Fn(&str) -> Option<String>) -> Staging {
    Staging {
        fetch_image: get("fetch_image"),
        storage_class: get("model_storage_class"),
        registry_secret: get("registry_secret"),
        nim_auth_secret: get("nim_auth_secret"),
        nim_model_puller: get("nim_model_puller"),
        nim_pull_secret: get("nim_pull_secret"),
    }
}

fn lower_target(ck: &mut Checker<'_>, t: usize) -> (Target, ItemSpans) {
    let def = &ck.names.targets[t];
    let (name, item, body, sc) = (def.name, def.item, &def.decl.body, def.scope);
    ck.spans = Some(BTreeMap::new());
    let f = ck.decl_body(body, &schema::TARGET, sc, name);

    let runtime = match f.get("runtime") {
        Some(Val::Ctor(c, rf)) => {
            let get = |k: &str| rf.as_deref().and_then(|r| str_of(r.get(k)));
            match c.name {
                "kubernetes" => Runtime::Kubernetes {
                    context: get("context").unwrap_or_default(),
                    namespace: get("namespace").unwrap_or_else(|| "default".into()),
                    staging: staging(&get),
                },
                "arc" => Runtime::Arc {
                    cluster: get("cluster").unwrap_or_default(),
                    repo: get("repo").unwrap_or_default(),
                    branch: get("branch").unwrap_or_else(|| "main".into()),
                    path: get("path").unwrap_or_else(|| format!("clusters/{}", name.name)),
                    namespace: get("namespace").unwrap_or_else(|| "default".into()),
                    context: get("context"),
                    staging: staging(&get),
                },
                "edge" => Runtime::Edge {
                    agent: get("agent").unwrap_or_default(),
                },
                _ => Runtime::Local,
            }
        }
        _ => Runtime::Local,
    };

    let (connectivity, wan_latency, bandwidth) = match f.get("connectivity") {
        Some(Val::Ctor(c, lf)) => (
            Connectivity::from_name(c.name).unwrap_or(Connectivity::Connected),
            lf.as_deref().and_then(|l| u64_of(l.get("wan_latency"))),
            lf.as_deref().and_then(|l| u64_of(l.get("bandwidth"))),
        ),
        _ => (Connectivity::Connected, None, None),
    };

    let mut pools = Vec::new();
    for slot in f.all("pool") {
        let Some(pf) = fields_of(slot.value.as_ref()) else {
            continue;
        };
        let pool_name = slot.label.map(|l| l.name.clone()).unwrap_or_default();
        let accelerator = pf
            .get("accelerator")
            .and_then(const_of)
            .and_then(|c| ck.canonical_const(c))
            .map(AcceleratorId);
        let count = ck.nonzero(u32_of(pf.get("count")), "count", pf.span("count"));
        let mig = str_of(pf.get("mig"));
        if let (Some(profile), Some(acc)) = (&mig, accelerator) {
            check_mig_profile(ck, profile, &[acc], pf.span("mig"));
        }
        let mut taints = Vec::new();
        for (v, _) in list_of(pf.get("taints")) {
            if let Val::Taint(t) = v {
                taints.push(t.clone());
            }
        }
        pools.push(Pool {
            name: pool_name,
            accelerator: accelerator.unwrap_or(AcceleratorId(0)),
            count: count.unwrap_or(0),
            mig,
            node_labels: string_map(pf.get("node_labels")),
            taints,
            live: None,
        });
    }

    let mut data = Vec::new();
    for slot in f.all("data") {
        let Some(Val::Ctor(c, df)) = &slot.value else {
            continue;
        };
        let df = df.as_deref();
        let get_str = |k: &str| df.and_then(|d| str_of(d.get(k)));
        data.push(DataOffer {
            name: slot.label.map(|l| l.name.clone()).unwrap_or_default(),
            locality: DataLocality::from_name(c.name).unwrap_or(DataLocality::Remote),
            endpoint: get_str("endpoint"),
            latency: df.and_then(|d| u64_of(d.get("latency"))).unwrap_or(0),
        });
    }
    data.sort_by(|a, b| a.name.cmp(&b.name));

    let mut services = Vec::new();
    if let Some(Val::Map(items)) = f.get("services") {
        for m in items {
            let (MapKeyVal::Item(Def::Const(c)), Some(level)) = (&m.key, member_of(Some(&m.value)))
            else {
                continue;
            };
            let Some(c) = ck.canonical_const(*c) else {
                continue;
            };
            ck.record_span(&format!("services.{}", m.key_text), m.span);
            services.push(ServiceOffer {
                service: ServiceId(c),
                maturity: Maturity::from_name(level).unwrap_or(Maturity::Absent),
            });
        }
    }

    let mut cached_models = Vec::new();
    for (d, _) in ck.refs(f.get("cached_models"), "model") {
        if let Def::Model(m) = d {
            cached_models.push(ModelId(m));
        }
    }

    let cost = Cost {
        gpu_hour: fields_of(f.get("cost"))
            .and_then(|c| int_of(c.get("gpu_hour")))
            .and_then(|m| i64::try_from(m).ok())
            .map(Money),
    };

    let target = Target {
        name: name.name.clone(),
        class: member_of(f.get("class"))
            .and_then(EnvClass::from_name)
            .unwrap_or(EnvClass::Cloud),
        runtime,
        region: str_of(f.get("region")),
        jurisdiction: str_of(f.get("jurisdiction")),
        connectivity,
        wan_latency,
        bandwidth,
        cpu_millis: u64_of(f.get("cpu")).unwrap_or(0),
        memory: u64_of(f.get("memory")).unwrap_or(0),
        pools,
        data,
        services,
        cached_models,
        mirrors: list_of(f.get("mirrors"))
            .iter()
            .filter_map(|(v, _)| str_of(Some(v)))
            .collect(),
        cost,
        labels: string_map(f.get("labels")),
    };
    let spans = ItemSpans {
        item: item.span,
        name: name.span,
        fields: ck.spans.take().unwrap_or_default(),
    };
    (target, spans)
}

/// Reports a MIG profile that none of `accelerators` has.
pub fn check_mig_profile(
    ck: &mut Checker<'_>,
    profile: &str,
    accelerators: &[AcceleratorId],
    span: Span,
) {
    let mut available: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for id in accelerators {
        let Some(acc) = accelerator(ck, *id) else {
            continue;
        };
        if acc.mig_profiles.iter().any(|p| p.name == profile) {
            return;
        }
        names.push(acc.name.clone());
        for p in &acc.mig_profiles {
            if !available.contains(&p.name) {
                available.push(p.name.clone());
            }
        }
    }
    if names.is_empty() {
        return;
    }
    let of = if names.len() == 1 {
        names.remove(0)
    } else {
        "any accepted accelerator".to_string()
    };
    ck.error(SemaError::UnknownMigProfile {
        profile: profile.into(),
        span,
        suggestion: super::resolve::suggest(profile, available.iter().map(String::as_str)),
        of,
        available,
    });
}

// ---------------------------------------------------------------- placements

fn lower_placements(ck: &mut Checker<'_>, ir: &mut Ir, spans: &mut SpanTable) {
    let mut placed: BTreeMap<u32, Span> = BTreeMap::new();
    for p in 0..ck.names.placements.len() {
        let def = &ck.names.placements[p];
        let (name, body, sc) = (def.name, &def.decl.body, def.scope);
        let workload = match ck.names.lookup(sc, &name.name) {
            Some((Def::Workload(w), _)) => Some(w),
            Some((other, def_span)) => {
                ck.error(SemaError::WrongKindOfReference {
                    name: name.name.clone(),
                    span: name.span,
                    expected: "a workload".into(),
                    found: other.noun().into(),
                    def: def_span,
                });
                None
            }
            None => {
                let typo = Typo::new(&name.name);
                let candidates = ck
                    .names
                    .visible_where(sc, |n, d| matches!(d, Def::Workload(_)) && typo.could_be(n));
                ck.error(SemaError::UnknownName {
                    name: name.name.clone(),
                    span: name.span,
                    expected: "a workload".into(),
                    suggestion: typo.best(candidates.into_iter()),
                    in_module: None,
                    suggestion_module: None,
                });
                None
            }
        };
        if let Some(w) = workload {
            if let Some(first) = placed.get(&w) {
                ck.error(SemaError::DuplicatePlacement {
                    workload: name.name.clone(),
                    first: *first,
                    second: name.span,
                });
            } else {
                placed.insert(w, name.span);
            }
        }
        // Spans go into the workload's table under `placement.`.
        ck.spans = Some(BTreeMap::new());
        ck.path.clear();
        let owner = Owner::Named("placement", &name.name);
        ck.path = "placement".into();
        let f = ck.check_body(body, &schema::PLACEMENT, sc, owner, name.span);
        ck.path.clear();

        let targets: Option<Vec<(TargetId, Span)>> = f.has("targets").then(|| {
            ck.refs(f.get("targets"), "target")
                .into_iter()
                .filter_map(|(d, s)| match d {
                    Def::Target(t) => Some((TargetId(t), s)),
                    _ => None,
                })
                .collect()
        });
        let per = |ck: &mut Checker<'_>, key: &str, what: &str| match f.get(key) {
            Some(Val::Call(_, arg)) => ck.nonzero(u32_of(Some(arg)), what, f.span(key)),
            _ => None,
        };
        let per_target = per(ck, "spread", "per_target");
        let per_region = per(ck, "spread_region", "per_region");
        let mut prefer = Vec::new();
        let mut seen: Vec<(&'static str, Span)> = Vec::new();
        for (v, span) in list_of(f.get("prefer")) {
            let Val::Call(_, arg) = v else { continue };
            let Some(m) = member_of(Some(arg)) else {
                continue;
            };
            if let Some((_, first)) = seen.iter().find(|(s, _)| *s == m) {
                ck.error(SemaError::DuplicateEntry {
                    what: "preference".into(),
                    name: format!("lowest({m})"),
                    first: *first,
                    second: *span,
                });
                continue;
            }
            seen.push((m, *span));
            prefer.extend(Preference::from_name(m));
        }
        // Each listed target's own span, under `placement.targets.NAME` and
        // `placement.fallback.NAME` (the fleet analysis points at the element).
        let mut elements: Vec<(String, Span)> = targets
            .iter()
            .flatten()
            .filter_map(|(t, s)| {
                let name = &ck.names.targets.get(t.index())?.name.name;
                Some((format!("placement.targets.{name}"), *s))
            })
            .collect();
        let mut fallback = Vec::new();
        for (d, span) in ck.refs(f.get("fallback"), "fallback target") {
            let Def::Target(t) = d else { continue };
            if let Some(def) = ck.names.targets.get(t as usize) {
                elements.push((format!("placement.fallback.{}", def.name.name), span));
            }
            if let Some(cands) = &targets
                && !cands.iter().any(|(c, _)| c.0 == t)
            {
                ck.error(SemaError::FallbackNotCandidate {
                    target: ck.names.targets[t as usize].name.name.clone(),
                    span,
                    targets: f.span("targets"),
                });
            }
            fallback.push(TargetId(t));
        }
        let mut isolate_from = Vec::new();
        for (d, span) in ck.refs(f.get("isolate_from"), "workload") {
            let Def::Workload(o) = d else { continue };
            if Some(o) == workload {
                ck.error(SemaError::IsolateFromSelf {
                    workload: name.name.clone(),
                    span,
                });
                continue;
            }
            isolate_from.push(WorkloadId(o));
        }
        let table = ck.spans.take().unwrap_or_default();
        let Some(w) = workload else { continue };
        if let Some(s) = spans.workloads.get_mut(w as usize) {
            s.fields.insert("placement".into(), name.span);
            for (k, v) in table.into_iter().chain(elements) {
                s.fields.entry(k).or_insert(v);
            }
        }
        if let Some(wl) = ir.workloads.get_mut(w as usize) {
            wl.placement = PlacementRules {
                candidates: targets.map(|t| t.into_iter().map(|(id, _)| id).collect()),
                per_target,
                per_region,
                prefer,
                fallback,
                isolate_from,
            };
        }
    }
}

// ---------------------------------------------------------------- catalogue ids

/// Renumbers accelerator and service ids (constant indices while lowering) densely, in
/// definition order, keeping only those the spec uses, and fills the catalogue lists.
pub fn remap_catalogue(ck: &Checker<'_>, ir: &mut Ir) {
    let mut accs: BTreeSet<u32> = BTreeSet::new();
    for m in &ir.models {
        for v in &m.variants {
            accs.extend(v.accelerators.iter().map(|a| a.0));
        }
    }
    for w in &ir.workloads {
        accs.extend(w.accelerators.iter().map(|a| a.0));
    }
    for t in &ir.targets {
        accs.extend(t.pools.iter().map(|p| p.accelerator.0));
    }
    for e in &ir.policy.entitlements {
        accs.extend(e.accelerators.iter().flatten().map(|a| a.0));
    }
    let mut svcs: BTreeSet<u32> = BTreeSet::new();
    for w in &ir.workloads {
        svcs.extend(w.services.iter().map(|s| s.service.0));
    }
    for t in &ir.targets {
        svcs.extend(t.services.iter().map(|s| s.service.0));
    }
    let acc_map: BTreeMap<u32, u32> = accs
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, i as u32))
        .collect();
    let svc_map: BTreeMap<u32, u32> = svcs
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, i as u32))
        .collect();
    let a = |id: &mut AcceleratorId| id.0 = acc_map.get(&id.0).copied().unwrap_or(0);
    let s = |id: &mut ServiceId| id.0 = svc_map.get(&id.0).copied().unwrap_or(0);
    for m in &mut ir.models {
        for v in &mut m.variants {
            v.accelerators.iter_mut().for_each(a);
        }
    }
    for w in &mut ir.workloads {
        w.accelerators.iter_mut().for_each(a);
        w.services.iter_mut().for_each(|r| s(&mut r.service));
    }
    for t in &mut ir.targets {
        t.pools.iter_mut().for_each(|p| a(&mut p.accelerator));
        t.services.iter_mut().for_each(|o| s(&mut o.service));
        t.services.sort_by_key(|o| o.service);
    }
    for e in &mut ir.policy.entitlements {
        if let Some(list) = &mut e.accelerators {
            list.iter_mut().for_each(a);
        }
    }
    ir.accelerators = accs
        .iter()
        .filter_map(|c| match &ck.catalogue[*c as usize] {
            Some(Catalogued::Accelerator(acc)) => Some(acc.clone()),
            _ => None,
        })
        .collect();
    ir.services = svcs
        .iter()
        .filter_map(|c| match &ck.catalogue[*c as usize] {
            Some(Catalogued::Service(svc)) => Some(svc.clone()),
            _ => None,
        })
        .collect();
}
