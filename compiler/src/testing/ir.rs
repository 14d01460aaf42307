//! Test support: build IRs in code, without sources, for the placement engine's and the
//! verifier's tests and benchmarks (until and beside `.berth` fixtures).
//!
//! [`IrBuilder`] is a small builder over [`Ir`] with a catalogue of standard accelerators and
//! services already in it; names (targets, workloads, models, accelerators, services) are
//! resolved when [`IrBuilder::build`] runs, so items may refer to items declared later.
//! [`estate`] generates a random but deterministic estate of any size from a seed.
//!
//! This is test support, not compiler input: an unknown name is a bug in the test and panics
//! with a message saying which.

mod estate;

pub use estate::{EstateShape, estate, scale_cpu_memory_and_caps, scale_gpu_pools};

use crate::ir::*;
use std::collections::BTreeMap;

/// Monday to Friday, for business-hours windows.
pub const WEEKDAYS: &[Weekday] = &[
    Weekday::Mon,
    Weekday::Tue,
    Weekday::Wed,
    Weekday::Thu,
    Weekday::Fri,
];

const GIB: u64 = 1 << 30;

/// The standard accelerators every builder starts with: name, vendor, family, memory in GiB,
/// MIG profiles (name, memory in GiB, instances per device).
/// A MIG profile: name, memory in GiB, instances per device.
type StdMig = (&'static str, u64, u32);

const STD_ACCELERATORS: &[(&str, &str, &str, u64, &[StdMig])] = &[
    (
        "H200",
        "nvidia",
        "hopper",
        141,
        &[("1g.18gb", 18, 7), ("3g.71gb", 71, 2)],
    ),
    (
        "H100",
        "nvidia",
        "hopper",
        80,
        &[("1g.10gb", 10, 7), ("3g.40gb", 40, 2)],
    ),
    (
        "A100",
        "nvidia",
        "ampere",
        80,
        &[("1g.10gb", 10, 7), ("3g.40gb", 40, 2)],
    ),
    ("L40S", "nvidia", "ada", 48, &[]),
    ("L4", "nvidia", "ada", 24, &[]),
    ("A10", "nvidia", "ampere", 24, &[]),
    ("T4", "nvidia", "turing", 16, &[]),
    ("JetsonAgxOrin", "nvidia", "orin", 64, &[]),
    ("JetsonOrinNano", "nvidia", "orin", 8, &[]),
    ("MI300X", "amd", "cdna3", 192, &[]),
];

const STD_SERVICES: &[&str] = &[
    "object_store",
    "model_cache",
    "online_prediction",
    "vector_db",
    "feature_store",
    "message_bus",
];

/// Builds an [`Ir`] in code.
#[derive(Clone, Debug)]
pub struct IrBuilder {
    ir: Ir,
    models: Vec<ModelBuilder>,
    workloads: Vec<WorkloadBuilder>,
    targets: Vec<TargetBuilder>,
    limits: Vec<(Selector, String, u32)>,
}

impl Default for IrBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl IrBuilder {
    /// An empty spec with the standard accelerators and services.
    pub fn new() -> Self {
        let accelerators = STD_ACCELERATORS
            .iter()
            .map(|(name, vendor, family, mem, migs)| Accelerator {
                name: (*name).into(),
                vendor: (*vendor).into(),
                family: (*family).into(),
                memory: mem * GIB,
                mig_profiles: migs
                    .iter()
                    .map(|(n, m, i)| MigProfile {
                        name: (*n).into(),
                        memory: m * GIB,
                        instances: *i,
                    })
                    .collect(),
            })
            .collect();
        let services = STD_SERVICES
            .iter()
            .map(|s| Service {
                name: (*s).into(),
                doc: String::new(),
            })
            .collect();
        IrBuilder {
            ir: Ir {
                accelerators,
                services,
                ..Ir::default()
            },
            models: Vec::new(),
            workloads: Vec::new(),
            targets: Vec::new(),
            limits: Vec::new(),
        }
    }

    pub fn model(mut self, name: &str, f: impl FnOnce(ModelBuilder) -> ModelBuilder) -> Self {
        self.models.push(f(ModelBuilder {
            name: name.into(),
            version: "1.0.0".into(),
            variants: Vec::new(),
        }));
        self
    }

    pub fn workload(
        mut self,
        name: &str,
        f: impl FnOnce(WorkloadBuilder) -> WorkloadBuilder,
    ) -> Self {
        self.workloads.push(f(WorkloadBuilder::new(name)));
        self
    }

    pub fn target(mut self, name: &str, f: impl FnOnce(TargetBuilder) -> TargetBuilder) -> Self {
        self.targets.push(f(TargetBuilder::new(name)));
        self
    }

    pub fn deny(mut self, reason: &str, condition: PolicyExpr) -> Self {
        self.ir.policy.denies.push(DenyRule {
            policy: "governance".into(),
            reason: reason.into(),
            condition,
        });
        self
    }

    /// `entitle service_account(name) { gpu <= max  accelerators = [...]  environments = [...] }`;
    /// `None` lists mean "any".
    pub fn entitle(
        mut self,
        identity: &str,
        max_gpu: Option<u32>,
        accelerators: Option<&[&str]>,
        environments: Option<&[EnvClass]>,
    ) -> Self {
        let accelerators = accelerators.map(|a| a.iter().map(|n| self.accel(n)).collect());
        self.ir.policy.entitlements.push(Entitlement {
            policy: "governance".into(),
            identity: Identity {
                kind: IdentityKind::ServiceAccount,
                name: identity.into(),
            },
            max_gpu,
            accelerators,
            environments: environments.map(<[EnvClass]>::to_vec),
            until: None,
        });
        self
    }

    pub fn quota(mut self, team: &str, max_gpu: u32) -> Self {
        self.ir.policy.quotas.push(Quota {
            policy: "governance".into(),
            team: team.into(),
            max_gpu,
        });
        self
    }

    /// `window name = days start..end in "zone"` with clock times as `"08:00"`.
    pub fn window(
        mut self,
        name: &str,
        days: &[Weekday],
        start: &str,
        end: &str,
        zone: &str,
    ) -> Self {
        self.ir.policy.windows.push(Window {
            policy: "governance".into(),
            name: name.into(),
            days: days.to_vec(),
            start: clock(start),
            end: clock(end),
            zone: zone.into(),
        });
        self
    }

    /// `limit <selector> during <window> { gpu <= max }`.
    pub fn limit(mut self, selector: Selector, window: &str, max_gpu: u32) -> Self {
        self.limits.push((selector, window.into(), max_gpu));
        self
    }

    /// `approval when cost_per_day > above { approvers = [...] }`, `above` in currency units.
    pub fn approval(mut self, above: &str, approvers: &[&str]) -> Self {
        self.ir.policy.approvals.push(Approval {
            policy: "governance".into(),
            cost_per_day_above: money(above),
            approvers: approvers.iter().map(|s| (*s).into()).collect(),
            trust: None,
        });
        self
    }

    pub fn reclaim(mut self, selector: Selector, idle_after_ns: u64) -> Self {
        self.ir.policy.reclaims.push(Reclaim {
            policy: "governance".into(),
            selector,
            idle_after: idle_after_ns,
        });
        self
    }

    /// The id of a catalogue accelerator.
    pub fn accel(&self, name: &str) -> AcceleratorId {
        match self.ir.accelerators.iter().position(|a| a.name == name) {
            Some(i) => AcceleratorId(i as u32),
            None => panic!("testkit: unknown accelerator `{name}`"),
        }
    }

    /// The id of a catalogue service.
    pub fn service(&self, name: &str) -> ServiceId {
        match self.ir.services.iter().position(|s| s.name == name) {
            Some(i) => ServiceId(i as u32),
            None => panic!("testkit: unknown service `{name}`"),
        }
    }

    /// Resolves every name and returns the IR.
    pub fn build(mut self) -> Ir {
        let models = std::mem::take(&mut self.models);
        let targets = std::mem::take(&mut self.targets);
        let workloads = std::mem::take(&mut self.workloads);
        let limits = std::mem::take(&mut self.limits);
        for m in models {
            let variants = m
                .variants
                .into_iter()
                .map(|v| Variant {
                    accelerators: v.accelerators.iter().map(|a| self.accel(a)).collect(),
                    ..v.variant
                })
                .collect();
            self.ir.models.push(Model {
                name: m.name,
                version: m.version,
                variants,
            });
        }
        for t in targets {
            let mut target = t.target;
            target.pools = t
                .pools
                .into_iter()
                .map(|(accel, pool)| Pool {
                    accelerator: self.accel(&accel),
                    ..pool
                })
                .collect();
            target.services = t
                .services
                .iter()
                .map(|(s, m)| ServiceOffer {
                    service: self.service(s),
                    maturity: *m,
                })
                .collect();
            target.services.sort_by_key(|o| o.service);
            target.data.sort_by(|a, b| a.name.cmp(&b.name));
            target.cached_models = t.cached.iter().map(|m| self.model_id(m)).collect();
            self.ir.targets.push(target);
        }
        let names: Vec<String> = workloads.iter().map(|w| w.workload.name.clone()).collect();
        let workload_id = |n: &str| match names.iter().position(|x| x == n) {
            Some(i) => WorkloadId(i as u32),
            None => panic!("testkit: unknown workload `{n}`"),
        };
        for w in workloads {
            let mut workload = w.workload;
            workload.accelerators = w.accelerators.iter().map(|a| self.accel(a)).collect();
            workload.model = w.model.as_deref().map(|m| self.model_id(m));
            workload.services = w
                .services
                .iter()
                .map(|(s, m)| ServiceRequirement {
                    service: self.service(s),
                    min: *m,
                })
                .collect();
            workload.placement.candidates = w
                .candidates
                .map(|c| c.iter().map(|t| self.target_id(t)).collect());
            workload.placement.fallback = w.fallback.iter().map(|t| self.target_id(t)).collect();
            workload.placement.isolate_from =
                w.isolate_from.iter().map(|n| workload_id(n)).collect();
            self.ir.workloads.push(workload);
        }
        for (selector, window, max_gpu) in limits {
            let Some(i) = self.ir.policy.windows.iter().position(|x| x.name == window) else {
                panic!("testkit: unknown window `{window}`");
            };
            self.ir.policy.limits.push(Limit {
                policy: "governance".into(),
                selector,
                window: WindowId(i as u32),
                max_gpu,
            });
        }
        self.ir
    }

    fn model_id(&self, name: &str) -> ModelId {
        match self.ir.models.iter().position(|m| m.name == name) {
            Some(i) => ModelId(i as u32),
            None => panic!("testkit: unknown model `{name}`"),
        }
    }

    fn target_id(&self, name: &str) -> TargetId {
        match self.ir.target_by_name(name) {
            Some(t) => t,
            None => panic!("testkit: unknown target `{name}`"),
        }
    }
}

/// `"08:00"` → minutes since midnight.
pub fn clock(s: &str) -> u16 {
    let (h, m) = s.split_once(':').unwrap_or((s, "0"));
    h.parse::<u16>().unwrap_or(0) * 60 + m.parse::<u16>().unwrap_or(0)
}

/// `"0.90"` → exact money.
pub fn money(s: &str) -> Money {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut frac = frac.to_string();
    while frac.len() < 6 {
        frac.push('0');
    }
    Money(int.parse::<i64>().unwrap_or(0) * Money::MICROS + frac[..6].parse::<i64>().unwrap_or(0))
}

/// Sizes in GiB, durations in milliseconds: the units tests write most.
pub fn gib(n: u64) -> u64 {
    n * GIB
}

pub fn ms(n: u64) -> u64 {
    n * 1_000_000
}

#[derive(Clone, Debug)]
pub struct ModelBuilder {
    name: String,
    version: String,
    variants: Vec<VariantBuilder>,
}

#[derive(Clone, Debug)]
struct VariantBuilder {
    variant: Variant,
    accelerators: Vec<String>,
}

impl ModelBuilder {
    pub fn version(mut self, v: &str) -> Self {
        self.version = v.into();
        self
    }

    /// A variant needing `gpu_memory` per GPU, runnable on `accelerators` (empty: any).
    pub fn variant(mut self, name: &str, gpu_memory: u64, accelerators: &[&str]) -> Self {
        self.variants.push(VariantBuilder {
            variant: Variant {
                name: name.into(),
                format: "onnx".into(),
                precision: Some(name.into()),
                gpu_memory,
                accelerators: Vec::new(),
                artifact: format!(
                    "oci://models.example.com/{}:{}-{name}",
                    self.name, self.version
                ),
                digest: None,
                size: None,
            },
            accelerators: accelerators.iter().map(|s| (*s).into()).collect(),
        });
        self
    }
}

#[derive(Clone, Debug)]
pub struct WorkloadBuilder {
    workload: Workload,
    accelerators: Vec<String>,
    model: Option<String>,
    services: Vec<(String, Maturity)>,
    candidates: Option<Vec<String>>,
    fallback: Vec<String>,
    isolate_from: Vec<String>,
}

impl WorkloadBuilder {
    fn new(name: &str) -> Self {
        WorkloadBuilder {
            workload: Workload {
                name: name.into(),
                release: "1.0.0".into(),
                image: format!("registry.example.com/{name}:1.0.0"),
                kind: WorkloadKind::Service,
                class: WorkloadClass::Production,
                identity: Identity {
                    kind: IdentityKind::ServiceAccount,
                    name: name.into(),
                },
                team: name.into(),
                replicas: 1,
                resources: Resources {
                    cpu_millis: 1000,
                    memory: GIB,
                    gpu: 0,
                    gpu_memory: None,
                    mig: None,
                },
                accelerators: Vec::new(),
                model: None,
                data: Vec::new(),
                services: Vec::new(),
                connectivity: Connectivity::Connected,
                environments: Vec::new(),
                telemetry: Telemetry::Live,
                ports: Vec::new(),
                placement: PlacementRules::default(),
            },
            accelerators: Vec::new(),
            model: None,
            services: Vec::new(),
            candidates: None,
            fallback: Vec::new(),
            isolate_from: Vec::new(),
        }
    }

    pub fn replicas(mut self, n: u32) -> Self {
        self.workload.replicas = n;
        self
    }
    pub fn kind(mut self, k: WorkloadKind) -> Self {
        self.workload.kind = k;
        self
    }
    pub fn class(mut self, c: WorkloadClass) -> Self {
        self.workload.class = c;
        self
    }
    /// The identity (a service account) and, unless [`Self::team`] says otherwise, the team.
    pub fn identity(mut self, name: &str) -> Self {
        self.workload.identity.name = name.into();
        self.workload.team = name.into();
        self
    }
    pub fn team(mut self, team: &str) -> Self {
        self.workload.team = team.into();
        self
    }
    /// CPUs (whole) and memory (bytes) per replica.
    pub fn cpu_mem(mut self, cpus: u64, memory: u64) -> Self {
        self.workload.resources.cpu_millis = cpus * 1000;
        self.workload.resources.memory = memory;
        self
    }
    pub fn gpu(mut self, n: u32) -> Self {
        self.workload.resources.gpu = n;
        self
    }
    pub fn gpu_memory(mut self, bytes: u64) -> Self {
        self.workload.resources.gpu_memory = Some(bytes);
        self
    }
    pub fn mig(mut self, profile: &str) -> Self {
        self.workload.resources.mig = Some(profile.into());
        self
    }
    pub fn accelerators(mut self, names: &[&str]) -> Self {
        self.accelerators = names.iter().map(|s| (*s).into()).collect();
        self
    }
    pub fn model(mut self, name: &str) -> Self {
        self.model = Some(name.into());
        self
    }
    pub fn data(
        mut self,
        name: &str,
        max_latency: Option<u64>,
        classification: Classification,
    ) -> Self {
        self.workload.data.push(DataRequirement {
            name: name.into(),
            dataset: name.replace('_', "-"),
            access: Access::Read,
            max_latency,
            classification,
        });
        self
    }
    pub fn service(mut self, name: &str, min: Maturity) -> Self {
        self.services.push((name.into(), min));
        self
    }
    pub fn connectivity(mut self, c: Connectivity) -> Self {
        self.workload.connectivity = c;
        self
    }
    pub fn environments(mut self, envs: &[EnvClass]) -> Self {
        self.workload.environments = envs.to_vec();
        self
    }
    pub fn candidates(mut self, targets: &[&str]) -> Self {
        self.candidates = Some(targets.iter().map(|s| (*s).into()).collect());
        self
    }
    pub fn per_target(mut self, n: u32) -> Self {
        self.workload.placement.per_target = Some(n);
        self
    }
    pub fn per_region(mut self, n: u32) -> Self {
        self.workload.placement.per_region = Some(n);
        self
    }
    pub fn prefer(mut self, prefs: &[Preference]) -> Self {
        self.workload.placement.prefer = prefs.to_vec();
        self
    }
    pub fn fallback(mut self, targets: &[&str]) -> Self {
        self.fallback = targets.iter().map(|s| (*s).into()).collect();
        self
    }
    pub fn isolate_from(mut self, workloads: &[&str]) -> Self {
        self.isolate_from = workloads.iter().map(|s| (*s).into()).collect();
        self
    }
}

#[derive(Clone, Debug)]
pub struct TargetBuilder {
    target: Target,
    pools: Vec<(String, Pool)>,
    services: Vec<(String, Maturity)>,
    cached: Vec<String>,
}

impl TargetBuilder {
    fn new(name: &str) -> Self {
        TargetBuilder {
            target: Target {
                name: name.into(),
                class: EnvClass::Datacenter,
                runtime: Runtime::Kubernetes {
                    context: name.into(),
                    namespace: "default".into(),
                    staging: Default::default(),
                },
                region: None,
                jurisdiction: None,
                connectivity: Connectivity::Connected,
                wan_latency: None,
                bandwidth: None,
                cpu_millis: 64_000,
                memory: 256 * GIB,
                pools: Vec::new(),
                data: Vec::new(),
                services: Vec::new(),
                cached_models: Vec::new(),
                mirrors: Vec::new(),
                cost: Cost::default(),
                labels: BTreeMap::new(),
            },
            pools: Vec::new(),
            services: Vec::new(),
            cached: Vec::new(),
        }
    }

    pub fn class(mut self, c: EnvClass) -> Self {
        self.target.class = c;
        self
    }
    pub fn region(mut self, r: &str) -> Self {
        self.target.region = Some(r.into());
        self
    }
    pub fn jurisdiction(mut self, j: &str) -> Self {
        self.target.jurisdiction = Some(j.into());
        self
    }
    pub fn connectivity(mut self, c: Connectivity) -> Self {
        self.target.connectivity = c;
        self
    }
    /// A registry mirror at the site (`oci://HOST…`).
    pub fn mirror(mut self, mirror: &str) -> Self {
        self.target.mirrors.push(mirror.into());
        self
    }
    pub fn edge(mut self) -> Self {
        self.target.runtime = Runtime::Edge {
            agent: format!("https://edge.{}.example.com:7443", self.target.name),
        };
        self
    }
    /// CPUs (whole) and memory (bytes).
    pub fn cpu_mem(mut self, cpus: u64, memory: u64) -> Self {
        self.target.cpu_millis = cpus * 1000;
        self.target.memory = memory;
        self
    }
    pub fn pool(mut self, name: &str, accelerator: &str, count: u32) -> Self {
        self.pools
            .push((accelerator.into(), pool(name, count, None)));
        self
    }
    /// A pool whose every device is partitioned into instances of MIG `profile`.
    pub fn mig_pool(mut self, name: &str, accelerator: &str, count: u32, profile: &str) -> Self {
        self.pools
            .push((accelerator.into(), pool(name, count, Some(profile.into()))));
        self
    }
    pub fn local_data(mut self, name: &str, latency: u64) -> Self {
        self.target.data.push(DataOffer {
            name: name.into(),
            locality: DataLocality::Local,
            endpoint: Some(format!("s3://{}.local/{name}", self.target.name)),
            latency,
        });
        self
    }
    pub fn remote_data(mut self, name: &str, latency: u64) -> Self {
        self.target.data.push(DataOffer {
            name: name.into(),
            locality: DataLocality::Remote,
            endpoint: None,
            latency,
        });
        self
    }
    pub fn service(mut self, name: &str, m: Maturity) -> Self {
        self.services.push((name.into(), m));
        self
    }
    /// `cost = { gpu_hour: … }` in currency units (`"0.90"`).
    pub fn gpu_hour(mut self, price: &str) -> Self {
        self.target.cost.gpu_hour = Some(money(price));
        self
    }
    pub fn cached(mut self, model: &str) -> Self {
        self.cached.push(model.into());
        self
    }
}

fn pool(name: &str, count: u32, mig: Option<String>) -> Pool {
    Pool {
        name: name.into(),
        // Replaced when the builder resolves names.
        accelerator: AcceleratorId(0),
        count,
        mig,
        node_labels: BTreeMap::new(),
        taints: Vec::new(),
        live: None,
    }
}

/// Policy expression helpers: `workload.<f>`, `target.<f>`, constants and operators.
pub mod expr {
    use crate::ir::*;

    pub fn w(f: WorkloadField) -> PolicyExpr {
        PolicyExpr::Workload(f)
    }
    pub fn t(f: TargetField) -> PolicyExpr {
        PolicyExpr::Target(f)
    }
    pub fn val(v: Value) -> PolicyExpr {
        PolicyExpr::Const(v)
    }
    pub fn eq(a: PolicyExpr, b: PolicyExpr) -> PolicyExpr {
        PolicyExpr::Compare(CmpOp::Eq, Box::new(a), Box::new(b))
    }
    pub fn ne(a: PolicyExpr, b: PolicyExpr) -> PolicyExpr {
        PolicyExpr::Compare(CmpOp::Ne, Box::new(a), Box::new(b))
    }
    pub fn and(a: PolicyExpr, b: PolicyExpr) -> PolicyExpr {
        PolicyExpr::And(Box::new(a), Box::new(b))
    }
    pub fn or(a: PolicyExpr, b: PolicyExpr) -> PolicyExpr {
        PolicyExpr::Or(Box::new(a), Box::new(b))
    }
    pub fn any(list: PolicyExpr, body: PolicyExpr) -> PolicyExpr {
        PolicyExpr::Any(Box::new(list), Box::new(body))
    }
    pub fn member(base: PolicyExpr, field: &str) -> PolicyExpr {
        PolicyExpr::Member(Box::new(base), field.into())
    }
    /// The innermost lambda's parameter.
    pub fn param() -> PolicyExpr {
        PolicyExpr::Param(0)
    }

    /// `workload.data.any(d -> d.classification == <c>) and target.class == <class>`.
    pub fn data_classified_on(c: Classification, class: EnvClass) -> PolicyExpr {
        and(
            any(
                w(WorkloadField::Data),
                eq(
                    member(param(), "classification"),
                    val(Value::Classification(c)),
                ),
            ),
            eq(t(TargetField::Class), val(Value::EnvClass(class))),
        )
    }
}
