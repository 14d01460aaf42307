//! The typed intermediate representation: what the placement engine, the verifier and the
//! plan consume. Produced by semantics (`sema`) from a spec that checked clean.
//!
//! Plain data: every quantity normalised to integers in base units (bytes, nanoseconds,
//! bits/s, millicores, micro-units of money), every reference resolved to an index, lists in
//! a deterministic order. No spans in the hot fields: [`SpanTable`] maps back to source for
//! diagnostics, `explain` and the plan's rejection reasons.

pub mod eval;
mod window;

use crate::source::Span;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

pub use window::UnknownZone;

macro_rules! id {
    ($($(#[doc = $d:literal])* $name:ident;)*) => {$(
        $(#[doc = $d])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize { self.0 as usize }
        }
    )*};
}

id! {
    /// Index into [`Ir::accelerators`].
    AcceleratorId;
    /// Index into [`Ir::services`].
    ServiceId;
    /// Index into [`Ir::models`].
    ModelId;
    /// Index into [`Ir::workloads`].
    WorkloadId;
    /// Index into [`Ir::targets`].
    TargetId;
    /// Index into [`Policy::windows`].
    WindowId;
}

/// A pool: index `pool` in `Ir::targets[target].pools`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PoolRef {
    pub target: TargetId,
    pub pool: u32,
}

/// An amount of money in millionths of the currency unit (exact; `0.90` is 900_000).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Money(pub i64);

impl Money {
    pub const MICROS: i64 = 1_000_000;
}

impl fmt::Display for Money {
    /// Two decimals at least, more only if needed: `21.60`, `0.125`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let int = abs / Money::MICROS as u64;
        let mut frac = format!("{:06}", abs % Money::MICROS as u64);
        while frac.len() > 2 && frac.ends_with('0') {
            frac.pop();
        }
        write!(f, "{sign}{int}.{frac}")
    }
}

/// The whole compiled spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ir {
    pub accelerators: Vec<Accelerator>,
    pub services: Vec<Service>,
    pub models: Vec<Model>,
    pub workloads: Vec<Workload>,
    pub targets: Vec<Target>,
    pub policy: Policy,
    /// Back to source; not part of the IR's meaning (skipped by `--emit ir`).
    #[serde(skip)]
    pub spans: SpanTable,
}

// INVARIANT: these accessors take ids issued for this IR's own tables (`WorkloadId(i)` for
// `workloads[i]`, …); an id of another IR is a bug in the caller.
#[allow(clippy::indexing_slicing)]
impl Ir {
    pub fn workload(&self, id: WorkloadId) -> &Workload {
        &self.workloads[id.index()]
    }
    pub fn target(&self, id: TargetId) -> &Target {
        &self.targets[id.index()]
    }
    pub fn pool(&self, p: PoolRef) -> &Pool {
        &self.targets[p.target.index()].pools[p.pool as usize]
    }
    pub fn accelerator(&self, id: AcceleratorId) -> &Accelerator {
        &self.accelerators[id.index()]
    }
    pub fn model(&self, id: ModelId) -> &Model {
        &self.models[id.index()]
    }
    pub fn workload_by_name(&self, name: &str) -> Option<WorkloadId> {
        self.workloads
            .iter()
            .position(|w| w.name == name)
            .map(|i| WorkloadId(i as u32))
    }
    pub fn target_by_name(&self, name: &str) -> Option<TargetId> {
        self.targets
            .iter()
            .position(|t| t.name == name)
            .map(|i| TargetId(i as u32))
    }
}

// ---------------------------------------------------------------- catalogue (std library)

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accelerator {
    /// `H100`, `L4`, `JetsonOrinNano`.
    pub name: String,
    /// `nvidia`, `amd`, `intel`.
    pub vendor: String,
    /// `hopper`, `ampere`, `ada`, `orin`, `cdna3`, …
    pub family: String,
    /// Memory of one device, bytes.
    pub memory: u64,
    /// MIG profiles, empty when the device has none.
    pub mig_profiles: Vec<MigProfile>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigProfile {
    /// `1g.10gb`.
    pub name: String,
    /// Memory of one instance, bytes.
    pub memory: u64,
    /// How many instances of this profile fit on one device.
    pub instances: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    pub name: String,
    pub doc: String,
}

// ---------------------------------------------------------------- enums

macro_rules! ir_enum {
    ($(#[doc = $d:literal])* $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        $(#[doc = $d])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant,)* }

        impl $name {
            /// Every member in declaration order (for ordered enums: lowest first).
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The member as written in source.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            pub fn from_name(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)* _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

ir_enum! {
    /// Environment class of a target (unordered).
    EnvClass { Cloud = "cloud", Datacenter = "datacenter", Factory = "factory", Branch = "branch", Edge = "edge", Airgapped = "airgapped" }
}
ir_enum! {
    /// Connectivity, ordered: `disconnected < intermittent < connected`.
    Connectivity { Disconnected = "disconnected", Intermittent = "intermittent", Connected = "connected" }
}
ir_enum! {
    /// Service maturity, ordered: `absent < preview < ga`.
    Maturity { Absent = "absent", Preview = "preview", Ga = "ga" }
}
ir_enum! {
    /// What a workload is (unordered).
    WorkloadKind { Service = "service", Batch = "batch", Notebook = "notebook", Agent = "agent" }
}
ir_enum! {
    /// Workload class, ordered by priority: `experiment < development < staging < production`.
    /// Higher classes are placed first.
    WorkloadClass { Experiment = "experiment", Development = "development", Staging = "staging", Production = "production" }
}
ir_enum! {
    /// How a workload uses a data set (unordered).
    Access { Read = "read", Write = "write", ReadWrite = "read_write" }
}
ir_enum! {
    /// Data classification, ordered: `public < internal < confidential < restricted`.
    Classification { Public = "public", Internal = "internal", Confidential = "confidential", Restricted = "restricted" }
}
ir_enum! {
    /// Where a target finds a data set (unordered).
    DataLocality { Local = "local", Remote = "remote" }
}
ir_enum! {
    /// What placement optimises, in order (unordered).
    Preference { LowestCost = "cost", LowestDataLatency = "data_latency" }
}
ir_enum! {
    /// Kind of identity a workload runs as (unordered).
    IdentityKind { ServiceAccount = "service_account", AgentIdentity = "agent_identity", User = "user" }
}
ir_enum! {
    /// Days of the week, Monday first.
    Weekday { Mon = "mon", Tue = "tue", Wed = "wed", Thu = "thu", Fri = "fri", Sat = "sat", Sun = "sun" }
}

// ---------------------------------------------------------------- models

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    pub name: String,
    pub version: String,
    /// In the order written: placement uses the first that fits (normative).
    pub variants: Vec<Variant>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    pub name: String,
    /// `onnx`, `tensorrt`, `safetensors`, `gguf`, …
    pub format: String,
    /// `fp16`, `int8`, … when given.
    pub precision: Option<String>,
    /// Memory the variant needs on each GPU, bytes.
    pub gpu_memory: u64,
    /// Accelerators it runs on; empty means any.
    pub accelerators: Vec<AcceleratorId>,
    pub artifact: String,
    /// `sha256:` + 64 hex, when given.
    pub digest: Option<String>,
    /// The artifact's size in bytes, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

// ---------------------------------------------------------------- workloads

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub kind: IdentityKind,
    pub name: String,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(\"{}\")", self.kind, self.name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub release: String,
    pub image: String,
    pub kind: WorkloadKind,
    pub class: WorkloadClass,
    pub identity: Identity,
    /// The `team` field, by default the identity's name.
    pub team: String,
    /// Total across all targets (normative).
    pub replicas: u32,
    /// Per replica.
    pub resources: Resources,
    /// Accepted accelerators; empty means any (the model's variants may still restrict).
    pub accelerators: Vec<AcceleratorId>,
    pub model: Option<ModelId>,
    pub data: Vec<DataRequirement>,
    pub services: Vec<ServiceRequirement>,
    /// The worst link the workload tolerates.
    pub connectivity: Connectivity,
    /// Approved environment classes; empty means any.
    pub environments: Vec<EnvClass>,
    pub telemetry: Telemetry,
    /// Container ports the workload exposes (a Kubernetes Service is rendered for them).
    pub ports: Vec<u16>,
    pub placement: PlacementRules,
}

/// Per-replica resources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// Millicores (`cpu = 4` is 4000).
    pub cpu_millis: u64,
    /// Bytes.
    pub memory: u64,
    /// Whole GPUs per replica, all from one pool (or MIG instances when `mig` is set).
    pub gpu: u32,
    /// Minimum memory per GPU, bytes, when the workload states one.
    pub gpu_memory: Option<u64>,
    /// A MIG profile name (`1g.10gb`) when the workload asks for GPU slices.
    pub mig: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataRequirement {
    /// The block's label (`data line_images { … }`); a target offers data under this name.
    pub name: String,
    /// The data set's identifier (`dataset = …`).
    pub dataset: String,
    pub access: Access,
    /// Nanoseconds; `None` means any latency will do.
    pub max_latency: Option<u64>,
    pub classification: Classification,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceRequirement {
    pub service: ServiceId,
    pub min: Maturity,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Telemetry {
    /// Exported live; needs no local buffer.
    Live,
    /// Buffered locally up to this many nanoseconds of data while the link is down.
    Buffer(u64),
}

/// What the `placement W { … }` block says (defaults when there is none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementRules {
    /// Candidate targets; `None` means every target.
    pub candidates: Option<Vec<TargetId>>,
    /// `spread = per_target(n)`: at most n replicas on any one target.
    pub per_target: Option<u32>,
    /// `spread_region = per_region(n)`: at most n replicas in any one region.
    pub per_region: Option<u32>,
    /// Objectives in order; empty means `[lowest(cost)]`.
    pub prefer: Vec<Preference>,
    /// Targets the runtime may fail over to: eligible, and given replicas only if needed.
    pub fallback: Vec<TargetId>,
    /// `isolate_from = [w, …]`: no pool may hold replicas of this workload and of any of these.
    pub isolate_from: Vec<WorkloadId>,
}

// ---------------------------------------------------------------- targets

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum Runtime {
    Kubernetes {
        context: String,
        namespace: String,
        #[serde(default, skip_serializing_if = "Staging::is_default")]
        staging: Staging,
    },
    Arc {
        /// Azure resource id of the connected cluster.
        cluster: String,
        /// GitOps repository URL.
        repo: String,
        branch: String,
        /// Folder in the repository for this cluster's kustomization.
        path: String,
        namespace: String,
        /// The kubeconfig context `berth status` reads the cluster through (through Arc's
        /// cluster connect); none: the cluster's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
        #[serde(default, skip_serializing_if = "Staging::is_default")]
        staging: Staging,
    },
    Edge {
        /// The agent's base URL.
        agent: String,
    },
    /// Processes on the machine running `berth` (embedded agent).
    Local,
}

/// How model artifacts are staged on a cluster before its workloads start (a volume per
/// placement, filled by a `berth fetch` Job): what the runtime block says, `None` where it
/// says nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staging {
    /// The image with the `berth` binary (`fetch_image`).
    pub fetch_image: Option<String>,
    /// The storage class of the staging volumes (`model_storage_class`).
    pub storage_class: Option<String>,
    /// A Secret with registry credentials and roots (`registry_secret`).
    pub registry_secret: Option<String>,
    /// The Secret a `NIMCache` pulls with (`nim_auth_secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nim_auth_secret: Option<String>,
    /// The image a `NIMCache` runs to pull the model (`nim_model_puller`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nim_model_puller: Option<String>,
    /// The image pull Secret of the model puller (`nim_pull_secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nim_pull_secret: Option<String>,
}

impl Staging {
    pub fn is_default(&self) -> bool {
        *self == Staging::default()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub name: String,
    pub class: EnvClass,
    pub runtime: Runtime,
    pub region: Option<String>,
    pub jurisdiction: Option<String>,
    pub connectivity: Connectivity,
    /// Nanoseconds.
    pub wan_latency: Option<u64>,
    /// Bits per second.
    pub bandwidth: Option<u64>,
    /// Millicores available to workloads.
    pub cpu_millis: u64,
    /// Bytes.
    pub memory: u64,
    pub pools: Vec<Pool>,
    /// Sorted by name.
    pub data: Vec<DataOffer>,
    /// Sorted by service id; a service not listed is `absent`.
    pub services: Vec<ServiceOffer>,
    /// Models whose artifacts are already cached at the site.
    pub cached_models: Vec<ModelId>,
    /// OCI registries at the site mirroring model artifacts (`oci://HOST[:PORT][/PATH]`), in
    /// the order they are tried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
    pub cost: Cost,
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    pub name: String,
    pub accelerator: AcceleratorId,
    /// Number of devices.
    pub count: u32,
    /// When set, every device is partitioned into instances of this MIG profile and the pool
    /// offers `count × instances` slices of that profile.
    pub mig: Option<String>,
    pub node_labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// The capacity the pool has for this plan as read from its cluster (`berth plan
    /// --live`), or as a saved plan made so records it; `None`: the declared capacity. Never
    /// written in a spec: the driver sets it (`driver::LivePools`). Placement and the
    /// verifier both take the smaller of this and the declared capacity ([`Pool::capped`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveCapacity>,
}

impl Pool {
    /// `declared` (devices, or MIG slices of a partitioned pool) as far as the live
    /// capacity allows: a live reading can lower a pool's capacity, never raise it.
    pub fn capped(&self, declared: u64) -> u64 {
        self.live.map_or(declared, |l| declared.min(l.free))
    }
}

/// A pool's capacity read live (`docs/operations.md`, "Planning against live allocation").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCapacity {
    /// Devices (or MIG slices) free for this plan: what the pool's nodes allocate less what
    /// pods berth does not manage hold, or the capacity a saved plan records.
    pub free: u64,
    /// The figures read from the cluster, for messages; `None` when the capacity comes from
    /// a saved plan's ledger.
    pub read: Option<LiveRead>,
}

/// What a cluster said of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveRead {
    /// Devices (or MIG slices) the pool's nodes can allocate.
    pub allocatable: u64,
    /// Of those, held by running pods berth does not manage for this spec.
    pub held: u64,
}

impl LiveCapacity {
    /// The capacity free for berth given what a cluster said.
    pub fn read(allocatable: u64, held: u64) -> LiveCapacity {
        LiveCapacity {
            free: allocatable.saturating_sub(held),
            read: Some(LiveRead { allocatable, held }),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataOffer {
    /// Matches [`DataRequirement::name`].
    pub name: String,
    pub locality: DataLocality,
    pub endpoint: Option<String>,
    /// Nanoseconds from the target to the data.
    pub latency: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceOffer {
    pub service: ServiceId,
    pub maturity: Maturity,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// Price of one GPU for one hour.
    pub gpu_hour: Option<Money>,
}

// ---------------------------------------------------------------- policy

/// All `policy` items of the spec merged, rules in source order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub denies: Vec<DenyRule>,
    pub entitlements: Vec<Entitlement>,
    pub quotas: Vec<Quota>,
    pub windows: Vec<Window>,
    pub limits: Vec<Limit>,
    pub approvals: Vec<Approval>,
    pub reclaims: Vec<Reclaim>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DenyRule {
    /// The policy item's name.
    pub policy: String,
    pub reason: String,
    pub condition: PolicyExpr,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entitlement {
    pub policy: String,
    pub identity: Identity,
    /// Most GPUs the identity's workloads may hold in total.
    pub max_gpu: Option<u32>,
    /// Allowed accelerators; `None` means any.
    pub accelerators: Option<Vec<AcceleratorId>>,
    /// Allowed environment classes; `None` means any.
    pub environments: Option<Vec<EnvClass>>,
    /// When it expires (RFC 3339, UTC): at a plan instant at or after it, it grants nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

impl Entitlement {
    /// Whether it has expired at `at` (an unreadable `until`, which semantics refuses, counts
    /// as expired: nothing is granted on a time nobody can read).
    pub fn expired_at(&self, at: jiff::Timestamp) -> bool {
        self.until
            .as_deref()
            .is_some_and(|u| u.parse::<jiff::Timestamp>().ok().is_none_or(|u| u <= at))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    pub policy: String,
    pub team: String,
    pub max_gpu: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub policy: String,
    pub name: String,
    /// Days on which the window opens, Monday first.
    pub days: Vec<Weekday>,
    /// Minutes since midnight, local time in `zone`.
    pub start: u16,
    /// Minutes since midnight; `end <= start` means the range crosses midnight.
    pub end: u16,
    /// IANA zone name, validated by semantics.
    pub zone: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by", content = "value")]
pub enum Selector {
    Class(WorkloadClass),
    Kind(WorkloadKind),
    Team(String),
}

impl Selector {
    pub fn matches(&self, w: &Workload) -> bool {
        match self {
            Selector::Class(c) => w.class == *c,
            Selector::Kind(k) => w.kind == *k,
            Selector::Team(t) => w.team == *t,
        }
    }
}

/// `class experiment`, `kind notebook`, `team research`: how plans, reasons and violations
/// write a selector.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Class(c) => write!(f, "class {c}"),
            Selector::Kind(k) => write!(f, "kind {k}"),
            Selector::Team(t) => write!(f, "team {t}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    pub policy: String,
    pub selector: Selector,
    pub window: WindowId,
    /// While the window is in effect, matching workloads hold at most this many GPUs together.
    pub max_gpu: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub policy: String,
    /// A workload whose `cost_per_day` is above this awaits approval.
    pub cost_per_day_above: Money,
    /// Public keys (`berth-ed25519-public:HEX`) or names the `trust` file maps to keys.
    pub approvers: Vec<String>,
    /// The trust file naming approvers' keys, relative to the spec's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reclaim {
    pub policy: String,
    pub selector: Selector,
    /// Nanoseconds of GPU idleness after which the runtime stops the workload.
    pub idle_after: u64,
}

/// A type-checked policy condition over one (workload, target) pair. Evaluated by
/// [`eval::eval`]; both the placement engine and the verifier use that one definition of
/// the language's meaning.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyExpr {
    Const(Value),
    /// `workload.<field>`.
    Workload(WorkloadField),
    /// `target.<field>`.
    Target(TargetField),
    /// A lambda parameter: 0 is the innermost enclosing lambda's.
    Param(u32),
    /// `<expr>.<field>` on a record value (e.g. `d.classification` for a data set).
    Member(Box<PolicyExpr>, String),
    /// `list.any(x -> body)`.
    Any(Box<PolicyExpr>, Box<PolicyExpr>),
    /// `list.all(x -> body)`.
    All(Box<PolicyExpr>, Box<PolicyExpr>),
    Not(Box<PolicyExpr>),
    And(Box<PolicyExpr>, Box<PolicyExpr>),
    Or(Box<PolicyExpr>, Box<PolicyExpr>),
    Compare(CmpOp, Box<PolicyExpr>, Box<PolicyExpr>),
    /// `elem in list`.
    In(Box<PolicyExpr>, Box<PolicyExpr>),
    List(Vec<PolicyExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Fields of `workload.` usable in policy expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadField {
    Name,
    Release,
    Image,
    Kind,
    Class,
    Team,
    /// The identity's name.
    Identity,
    Replicas,
    /// GPUs per replica.
    Gpu,
    Connectivity,
    /// List of records with `name`, `dataset`, `access`, `classification`, `max_latency`.
    Data,
    Environments,
}

/// Fields of `target.` usable in policy expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetField {
    Name,
    Class,
    Region,
    Jurisdiction,
    Connectivity,
    /// `cost.gpu_hour`, money (0 when not set).
    GpuHour,
    /// Names of the accelerators of its pools.
    Accelerators,
}

/// A run-time value of a policy expression.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    Bool(bool),
    Int(i64),
    Str(String),
    /// Bytes.
    Size(u64),
    /// Nanoseconds.
    Duration(u64),
    /// Bits per second.
    Bandwidth(u64),
    Money(Money),
    EnvClass(EnvClass),
    Connectivity(Connectivity),
    Maturity(Maturity),
    Kind(WorkloadKind),
    Class(WorkloadClass),
    Access(Access),
    Classification(Classification),
    List(Vec<Value>),
    /// Fields sorted by name.
    Record(Vec<(String, Value)>),
    /// A missing optional value (`target.region` of a target without one).
    None,
}

// ---------------------------------------------------------------- spans

/// Source spans of IR elements, for diagnostics, `explain` and rejection reasons.
///
/// Field keys are dotted paths as written: `replicas`, `resources.gpu`,
/// `data.line_images.max_latency`, `services.object_store`, `pool.l4.accelerator`,
/// `data.line_images` (a target's offer), `connectivity`, `class`, `environments`.
/// Models use `variant.fp16` and `variant.fp16.gpu_memory`; a workload's `placement` block is
/// under `placement` and `placement.spread`, `placement.targets`, …, with each listed target
/// under `placement.targets.NAME` and `placement.fallback.NAME`; records nest the same
/// way (`runtime.context`, `connectivity.wan_latency`). Spans cover the whole entry
/// (`gpu = 1`), or the list element for `services.NAME`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanTable {
    pub workloads: Vec<ItemSpans>,
    pub targets: Vec<ItemSpans>,
    pub models: Vec<ItemSpans>,
    /// Per policy rule kind, in the same order as the `Policy` vectors.
    pub denies: Vec<Span>,
    pub entitlements: Vec<Span>,
    pub quotas: Vec<Span>,
    pub windows: Vec<Span>,
    pub limits: Vec<Span>,
    pub approvals: Vec<Span>,
    pub reclaims: Vec<Span>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ItemSpans {
    /// The whole item.
    pub item: Span,
    /// Its name.
    pub name: Span,
    pub fields: BTreeMap<String, Span>,
}

impl ItemSpans {
    /// The span of `key`, else of the item's name.
    pub fn field(&self, key: &str) -> Span {
        self.fields.get(key).copied().unwrap_or(self.name)
    }

    /// The span of the first of `keys` that has one, else of the item's name.
    pub fn first_field(&self, keys: &[String]) -> Span {
        keys.iter()
            .find_map(|k| self.fields.get(k).copied())
            .unwrap_or(self.name)
    }
}
