//! The schema of every block kind, as data: which fields a block may have, of which type,
//! whether they are required, their defaults and their documentation.
//!
//! The checker walks a body against its [`BlockSchema`] (unknown, missing, duplicate and
//! ill-shaped fields are found there, once, for every block kind); the language server reads
//! the same tables for hover and completion. A field's `Presence::Default` text is what the
//! documentation shows; the lowering applies that default.

use super::types::{EnumTy, RefKind, Ty};

/// The fields one kind of block (or record) may contain.
#[derive(Debug)]
pub struct BlockSchema {
    /// The keyword or constructor: `workload`, `resources`, `kubernetes`, `mig`.
    pub name: &'static str,
    pub doc: &'static str,
    pub fields: &'static [Field],
}

impl BlockSchema {
    pub fn field(&self, name: &str) -> Option<(usize, &'static Field)> {
        self.fields.iter().enumerate().find(|(_, f)| f.name == name)
    }

    /// `` `gpu_hour` `` or `` `a`, `b` ``: the field names, for messages.
    pub fn key_listing(&self) -> String {
        let names: Vec<String> = self
            .fields
            .iter()
            .map(|f| format!("`{}`", f.name))
            .collect();
        names.join(", ")
    }
}

/// One field of a block.
#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub shape: Shape,
    pub presence: Presence,
    pub doc: &'static str,
}

/// How a field is written.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// `key = value`.
    Value(Ty),
    /// `key NAME = value` (repeatable, one per name): a target's `data NAME = local { … }`.
    Labelled(Ty),
    /// `key { … }`.
    Block(&'static BlockSchema),
    /// `key NAME { … }` (repeatable, one per name): `pool l4 { … }`, `variant fp16 { … }`.
    LabelledBlock(&'static BlockSchema),
    /// `key <= value`: a bound in a policy rule.
    Bound(Ty),
}

impl Shape {
    /// How the field is written, for help texts: `replicas = …`, `pool NAME { … }`.
    pub fn example(&self, key: &str) -> String {
        match self {
            Shape::Value(_) => format!("{key} = …"),
            Shape::Labelled(_) => format!("{key} NAME = …"),
            Shape::Block(_) => format!("{key} {{ … }}"),
            Shape::LabelledBlock(_) => format!("{key} NAME {{ … }}"),
            Shape::Bound(_) => format!("{key} <= …"),
        }
    }

    pub fn is_repeatable(&self) -> bool {
        matches!(self, Shape::Labelled(_) | Shape::LabelledBlock(_))
    }
}

/// Whether a field must be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    Required,
    /// May be left out; then it has no value.
    Optional,
    /// May be left out; then it has this default (as documented).
    Default(&'static str),
    /// A labelled field given any number of times (zero included).
    Repeated,
    /// A labelled field given at least once.
    AtLeastOne,
}

/// One alternative of a [`Ty::OneOf`]: `kubernetes { … }`, or a bare `disconnected`.
#[derive(Debug)]
pub struct Ctor {
    pub name: &'static str,
    /// The record's fields. A constructor whose fields are all optional may be written bare.
    pub body: &'static BlockSchema,
    pub doc: &'static str,
}

impl Ctor {
    /// Whether `name` alone (without `{ … }`) is allowed.
    pub fn bare_allowed(&self) -> bool {
        self.body
            .fields
            .iter()
            .all(|f| !matches!(f.presence, Presence::Required | Presence::AtLeastOne))
    }
}

/// A function-like form with one argument: `per_target(1)`, `lowest(cost)`.
#[derive(Debug)]
pub struct CallSchema {
    pub name: &'static str,
    pub arg: Ty,
    pub doc: &'static str,
}

const fn value(name: &'static str, ty: Ty, presence: Presence, doc: &'static str) -> Field {
    Field {
        name,
        shape: Shape::Value(ty),
        presence,
        doc,
    }
}

const REQ: Presence = Presence::Required;
const OPT: Presence = Presence::Optional;

// ---------------------------------------------------------------- workload

pub static WORKLOAD: BlockSchema = BlockSchema {
    name: "workload",
    doc: "A workload: one logical service, batch job, notebook or agent, with what it requires.",
    fields: &[
        value(
            "release",
            Ty::Str,
            REQ,
            "The release of the workload's code, e.g. `\"1.8.4\"`.",
        ),
        value(
            "image",
            Ty::Str,
            REQ,
            "The container image (or executable reference) to run.",
        ),
        value(
            "kind",
            Ty::Enum(EnumTy::Kind),
            Presence::Default("service"),
            "What the workload is: `service`, `batch`, `notebook` or `agent`.",
        ),
        value(
            "class",
            Ty::Enum(EnumTy::Class),
            REQ,
            "Its class: `production`, `staging`, `development` or `experiment` (higher classes are placed first).",
        ),
        value(
            "identity",
            Ty::Identity,
            REQ,
            "The identity it runs as: `service_account(\"…\")`, `agent_identity(\"…\")` or `user(\"…\")`.",
        ),
        value(
            "team",
            Ty::Str,
            Presence::Default("the identity's name"),
            "The team its GPUs are counted against for quotas.",
        ),
        value(
            "replicas",
            Ty::Count,
            Presence::Default("1"),
            "Total replicas across all targets; each needs `resources` on one target.",
        ),
        value(
            "model",
            Ty::Ref(RefKind::Model),
            OPT,
            "The model it serves; placement picks the first variant that fits a target.",
        ),
        Field {
            name: "resources",
            shape: Shape::Block(&RESOURCES),
            presence: REQ,
            doc: "What one replica needs: `cpu`, `memory`, `gpu`, `gpu_memory`, `mig`.",
        },
        value(
            "accelerators",
            Ty::List(&Ty::Ref(RefKind::Accelerator)),
            Presence::Default("[] (any)"),
            "The accelerators it accepts; empty means any (the model's variants may still restrict).",
        ),
        Field {
            name: "data",
            shape: Shape::LabelledBlock(&DATA_REQUIREMENT),
            presence: Presence::Repeated,
            doc: "A data set it reads or writes: `data NAME { dataset access max_latency classification }`.",
        },
        value(
            "services",
            Ty::List(&Ty::ServiceReq),
            Presence::Default("[]"),
            "Platform services it needs, each at a minimum maturity: `[object_store >= ga]`.",
        ),
        value(
            "connectivity",
            Ty::Enum(EnumTy::Connectivity),
            Presence::Default("connected"),
            "The worst link it tolerates: `disconnected < intermittent < connected`.",
        ),
        value(
            "environments",
            Ty::List(&Ty::Enum(EnumTy::EnvClass)),
            Presence::Default("[] (any)"),
            "The environment classes it may run in.",
        ),
        Field {
            name: "telemetry",
            shape: Shape::Block(&TELEMETRY),
            presence: Presence::Default("export = live"),
            doc: "How its telemetry leaves the site: `telemetry { export = live }` or `telemetry { buffer = 24h }`.",
        },
        value(
            "ports",
            Ty::List(&Ty::Port),
            Presence::Default("[]"),
            "Container ports it exposes (a Kubernetes Service is rendered for them).",
        ),
    ],
};

pub static RESOURCES: BlockSchema = BlockSchema {
    name: "resources",
    doc: "What one replica of a workload needs.",
    fields: &[
        value(
            "cpu",
            Ty::Cpu,
            REQ,
            "CPU cores per replica: `4`, or `0.5` for half a core.",
        ),
        value("memory", Ty::Size, REQ, "Memory per replica, e.g. `16GiB`."),
        value(
            "gpu",
            Ty::Count,
            Presence::Default("0"),
            "GPUs per replica, all from one pool (MIG instances when `mig` is set).",
        ),
        value(
            "gpu_memory",
            Ty::Size,
            OPT,
            "The least memory each GPU must have.",
        ),
        value(
            "mig",
            Ty::Str,
            OPT,
            "A MIG profile (`\"1g.10gb\"`): `gpu` then counts instances of it.",
        ),
    ],
};

pub static DATA_REQUIREMENT: BlockSchema = BlockSchema {
    name: "data",
    doc: "A data set a workload uses; a target offers it under the same name.",
    fields: &[
        value("dataset", Ty::Str, REQ, "The data set's identifier."),
        value(
            "access",
            Ty::Enum(EnumTy::Access),
            Presence::Default("read"),
            "`read`, `write` or `read_write`.",
        ),
        value(
            "max_latency",
            Ty::Duration,
            OPT,
            "The highest latency to the data the workload accepts.",
        ),
        value(
            "classification",
            Ty::Enum(EnumTy::Classification),
            REQ,
            "`public < internal < confidential < restricted`.",
        ),
    ],
};

pub static TELEMETRY: BlockSchema = BlockSchema {
    name: "telemetry",
    doc: "How telemetry leaves the site: exactly one of `export = live` or `buffer = DURATION`.",
    fields: &[
        value(
            "export",
            Ty::Enum(EnumTy::Export),
            OPT,
            "`live`: exported as it is produced.",
        ),
        value(
            "buffer",
            Ty::Duration,
            OPT,
            "Buffered locally for up to this long while the link is down.",
        ),
    ],
};

// ---------------------------------------------------------------- model

pub static MODEL: BlockSchema = BlockSchema {
    name: "model",
    doc: "A logical model with a version and its physical variants, tried in the order written.",
    fields: &[
        value(
            "version",
            Ty::Str,
            REQ,
            "The model's version, e.g. `\"3.2.0\"`.",
        ),
        Field {
            name: "variant",
            shape: Shape::LabelledBlock(&VARIANT),
            presence: Presence::AtLeastOne,
            doc: "A build of the model: `variant NAME { format gpu_memory accelerators artifact digest }`.",
        },
    ],
};

pub static VARIANT: BlockSchema = BlockSchema {
    name: "variant",
    doc: "One build of a model; a target uses the first variant that fits one of its pools.",
    fields: &[
        value(
            "format",
            Ty::Enum(EnumTy::Format),
            REQ,
            "`onnx`, `tensorrt`, `safetensors`, `gguf`, …",
        ),
        value(
            "precision",
            Ty::Enum(EnumTy::Precision),
            OPT,
            "`fp32`, `bf16`, `fp16`, `fp8`, `int8`, …",
        ),
        value(
            "gpu_memory",
            Ty::Size,
            Presence::Default("0B"),
            "Memory the variant needs on each GPU.",
        ),
        value(
            "accelerators",
            Ty::List(&Ty::Ref(RefKind::Accelerator)),
            Presence::Default("[] (any)"),
            "The accelerators it runs on.",
        ),
        value(
            "artifact",
            Ty::Str,
            REQ,
            "Where the artifact is: `\"oci://…\"`, `\"s3://…\"`, …",
        ),
        value(
            "digest",
            Ty::Digest,
            OPT,
            "`\"sha256:\"` and 64 lowercase hex digits: the file's, or for `oci://` the manifest's.",
        ),
        value(
            "size",
            Ty::Size,
            OPT,
            "The artifact's size: the volume it is staged on holds two versions of the largest variant.",
        ),
    ],
};

// ---------------------------------------------------------------- target

pub static TARGET: BlockSchema = BlockSchema {
    name: "target",
    doc: "A target profile: a site or cluster and what it provides.",
    fields: &[
        value(
            "class",
            Ty::Enum(EnumTy::EnvClass),
            REQ,
            "Its environment class: `cloud`, `datacenter`, `factory`, `branch`, `edge`, `airgapped`.",
        ),
        value(
            "runtime",
            Ty::OneOf(RUNTIMES),
            REQ,
            "How workloads reach it: `kubernetes { … }`, `arc { … }`, `edge { … }` or `local`.",
        ),
        value("region", Ty::Str, OPT, "Its region, for `spread_region`."),
        value(
            "jurisdiction",
            Ty::Str,
            OPT,
            "The legal jurisdiction of the site, e.g. `\"FR\"`.",
        ),
        value(
            "connectivity",
            Ty::OneOf(LINKS),
            REQ,
            "Its WAN link: `connected`, `intermittent { wan_latency bandwidth }` or `disconnected`.",
        ),
        value("cpu", Ty::Cpu, REQ, "CPU cores available to workloads."),
        value("memory", Ty::Size, REQ, "Memory available to workloads."),
        Field {
            name: "pool",
            shape: Shape::LabelledBlock(&POOL),
            presence: Presence::Repeated,
            doc: "A GPU pool: `pool NAME { accelerator count mig node_labels taints }`.",
        },
        Field {
            name: "data",
            shape: Shape::Labelled(Ty::OneOf(DATA_OFFERS)),
            presence: Presence::Repeated,
            doc: "Where it finds a data set: `data NAME = local { endpoint latency }` or `remote { latency }`.",
        },
        value(
            "services",
            Ty::Map(&Ty::Ref(RefKind::Service), &Ty::Enum(EnumTy::Maturity)),
            Presence::Default("{} (every service absent)"),
            "Its service catalogue: `{ object_store: ga, model_cache: preview }`.",
        ),
        value(
            "cached_models",
            Ty::List(&Ty::Ref(RefKind::Model)),
            Presence::Default("[]"),
            "Models whose artifacts are already cached at the site.",
        ),
        value(
            "mirrors",
            Ty::List(&Ty::Mirror),
            Presence::Default("[]"),
            "OCI registries at the site that mirror model artifacts, tried in order before the artifact's own registry: `[\"oci://registry.plant.local:5000\"]`.",
        ),
        value(
            "cost",
            Ty::MapRecord(&COST),
            OPT,
            "Cost rates: `{ gpu_hour: 0.90 }`.",
        ),
        value(
            "labels",
            Ty::Map(&Ty::Str, &Ty::Str),
            Presence::Default("{}"),
            "Free-form labels.",
        ),
    ],
};

pub static RUNTIMES: &[Ctor] = &[
    Ctor {
        name: "kubernetes",
        body: &KUBERNETES,
        doc: "A Kubernetes cluster reached through a kubeconfig context.",
    },
    Ctor {
        name: "arc",
        body: &ARC,
        doc: "An Azure Arc-attached cluster, reconciled by Flux from a GitOps repository.",
    },
    Ctor {
        name: "edge",
        body: &EDGE,
        doc: "A site run by the berth edge agent.",
    },
    Ctor {
        name: "local",
        body: &EMPTY_LOCAL,
        doc: "Processes on the machine running berth.",
    },
];

// Model staging, the same in `kubernetes { … }` and `arc { … }`.
const FETCH_IMAGE: Field = value(
    "fetch_image",
    Ty::Str,
    Presence::Default("\"berth:VERSION\""),
    "The image with the `berth` binary that stages model artifacts (`berth fetch`).",
);
const MODEL_STORAGE_CLASS: Field = value(
    "model_storage_class",
    Ty::Str,
    Presence::Default("the cluster's default"),
    "The storage class of the volumes models are staged on (`ReadWriteMany` for several replicas).",
);
const REGISTRY_SECRET: Field = value(
    "registry_secret",
    Ty::Str,
    OPT,
    "A Secret in the namespace with `.dockerconfigjson` and optionally `ca.crt`, for private registries.",
);
// Models cached by the NIM Operator (`NIMCache`), where the target offers `nim_operator`.
const NIM_AUTH_SECRET: Field = value(
    "nim_auth_secret",
    Ty::Str,
    Presence::Default("\"ngc-api-secret\""),
    "The Secret with `NGC_API_KEY` (`ngc://`) or `HF_TOKEN` (`hf://`) a `NIMCache` pulls with.",
);
const NIM_MODEL_PULLER: Field = value(
    "nim_model_puller",
    Ty::Str,
    Presence::Default("the workload's image"),
    "The image a `NIMCache` runs to pull the model (a NIM container).",
);
const NIM_PULL_SECRET: Field = value(
    "nim_pull_secret",
    Ty::Str,
    Presence::Default("\"ngc-secret\""),
    "The image pull Secret of the model puller's registry.",
);

pub static KUBERNETES: BlockSchema = BlockSchema {
    name: "kubernetes",
    doc: "A Kubernetes cluster.",
    fields: &[
        value("context", Ty::Str, REQ, "The kubeconfig context."),
        value(
            "namespace",
            Ty::Str,
            Presence::Default("\"default\""),
            "The namespace workloads go to.",
        ),
        FETCH_IMAGE,
        MODEL_STORAGE_CLASS,
        REGISTRY_SECRET,
        NIM_AUTH_SECRET,
        NIM_MODEL_PULLER,
        NIM_PULL_SECRET,
    ],
};

pub static ARC: BlockSchema = BlockSchema {
    name: "arc",
    doc: "An Azure Arc-attached cluster, desired state in Git.",
    fields: &[
        value(
            "cluster",
            Ty::Str,
            REQ,
            "The Azure resource id of the connected cluster.",
        ),
        value("repo", Ty::Str, REQ, "The GitOps repository URL."),
        value(
            "branch",
            Ty::Str,
            Presence::Default("\"main\""),
            "The branch Flux follows.",
        ),
        value(
            "path",
            Ty::Str,
            Presence::Default("\"clusters/TARGET\""),
            "The folder of this cluster's kustomization.",
        ),
        value(
            "namespace",
            Ty::Str,
            Presence::Default("\"default\""),
            "The namespace workloads go to.",
        ),
        value(
            "context",
            Ty::Str,
            Presence::Default("the cluster's name"),
            "The kubeconfig context `berth status` reads replicas through (`az connectedk8s proxy`).",
        ),
        FETCH_IMAGE,
        MODEL_STORAGE_CLASS,
        REGISTRY_SECRET,
        NIM_AUTH_SECRET,
        NIM_MODEL_PULLER,
        NIM_PULL_SECRET,
    ],
};

pub static EDGE: BlockSchema = BlockSchema {
    name: "edge",
    doc: "A site run by the berth edge agent.",
    fields: &[value("agent", Ty::Str, REQ, "The agent's base URL.")],
};

pub static EMPTY_LOCAL: BlockSchema = BlockSchema {
    name: "local",
    doc: "No settings.",
    fields: &[],
};

pub static LINKS: &[Ctor] = &[
    Ctor {
        name: "connected",
        body: &LINK,
        doc: "A WAN link that is always up.",
    },
    Ctor {
        name: "intermittent",
        body: &LINK,
        doc: "A WAN link that drops now and then.",
    },
    Ctor {
        name: "disconnected",
        body: &NO_LINK,
        doc: "No WAN link at all.",
    },
];

pub static LINK: BlockSchema = BlockSchema {
    name: "link",
    doc: "A WAN link.",
    fields: &[
        value(
            "wan_latency",
            Ty::Duration,
            OPT,
            "Latency to the control plane when the link is up.",
        ),
        value("bandwidth", Ty::Bandwidth, OPT, "Bandwidth of the link."),
    ],
};

pub static NO_LINK: BlockSchema = BlockSchema {
    name: "disconnected",
    doc: "No settings.",
    fields: &[],
};

pub static POOL: BlockSchema = BlockSchema {
    name: "pool",
    doc: "A pool of identical accelerators in a target.",
    fields: &[
        value(
            "accelerator",
            Ty::Ref(RefKind::Accelerator),
            REQ,
            "The accelerator, e.g. `L4` from `std.gpu`.",
        ),
        value("count", Ty::Count, REQ, "How many devices the pool has."),
        value(
            "mig",
            Ty::Str,
            OPT,
            "A MIG profile every device is partitioned into; the pool then offers that many instances per device.",
        ),
        value(
            "node_labels",
            Ty::Map(&Ty::Str, &Ty::Str),
            Presence::Default("{}"),
            "Kubernetes node labels that select the pool's nodes.",
        ),
        value(
            "taints",
            Ty::List(&Ty::Taint),
            Presence::Default("[]"),
            "Taints of the pool's nodes, tolerated by workloads placed there: `\"key=value:NoSchedule\"`.",
        ),
    ],
};

pub static DATA_OFFERS: &[Ctor] = &[
    Ctor {
        name: "local",
        body: &LOCAL_DATA,
        doc: "A replica of the data set at the site.",
    },
    Ctor {
        name: "remote",
        body: &REMOTE_DATA,
        doc: "The data set reached over the network.",
    },
];

pub static LOCAL_DATA: BlockSchema = BlockSchema {
    name: "local",
    doc: "A replica of the data set at the site.",
    fields: &[
        value(
            "endpoint",
            Ty::Str,
            REQ,
            "Where the replica is: `\"s3://…\"`, `\"file:///…\"`.",
        ),
        value(
            "latency",
            Ty::Duration,
            REQ,
            "Latency from the site's workloads to it.",
        ),
    ],
};

pub static REMOTE_DATA: BlockSchema = BlockSchema {
    name: "remote",
    doc: "The data set reached over the network.",
    fields: &[
        value(
            "latency",
            Ty::Duration,
            REQ,
            "Latency from the site to the data.",
        ),
        value("endpoint", Ty::Str, OPT, "Where the data is, when known."),
    ],
};

pub static COST: BlockSchema = BlockSchema {
    name: "cost",
    doc: "Cost rates of a target.",
    fields: &[value(
        "gpu_hour",
        Ty::Rate,
        REQ,
        "Price of one GPU for one hour: `0.90` or `0.90/gpu_hour`.",
    )],
};

// ---------------------------------------------------------------- placement

pub static PLACEMENT: BlockSchema = BlockSchema {
    name: "placement",
    doc: "How one workload is placed: candidates, spread, preferences, fallbacks, isolation.",
    fields: &[
        value(
            "targets",
            Ty::List(&Ty::Ref(RefKind::Target)),
            Presence::Default("every target"),
            "The candidate targets.",
        ),
        value(
            "spread",
            Ty::Call(&PER_TARGET),
            OPT,
            "`per_target(n)`: at most n replicas on any one target.",
        ),
        value(
            "spread_region",
            Ty::Call(&PER_REGION),
            OPT,
            "`per_region(n)`: at most n replicas in any one region.",
        ),
        value(
            "prefer",
            Ty::List(&Ty::Call(&LOWEST)),
            Presence::Default("[lowest(cost)]"),
            "Objectives in order: `lowest(cost)`, `lowest(data_latency)`.",
        ),
        value(
            "fallback",
            Ty::List(&Ty::Ref(RefKind::Target)),
            Presence::Default("[]"),
            "Targets the runtime may fail over to; they get replicas only if needed.",
        ),
        value(
            "isolate_from",
            Ty::List(&Ty::Ref(RefKind::Workload)),
            Presence::Default("[]"),
            "Workloads that must not share a GPU pool with this one.",
        ),
    ],
};

pub static PER_TARGET: CallSchema = CallSchema {
    name: "per_target",
    arg: Ty::Count,
    doc: "At most this many replicas on any one target.",
};

pub static PER_REGION: CallSchema = CallSchema {
    name: "per_region",
    arg: Ty::Count,
    doc: "At most this many replicas in any one region.",
};

pub static LOWEST: CallSchema = CallSchema {
    name: "lowest",
    arg: Ty::Enum(EnumTy::Objective),
    doc: "Prefer targets with the lowest `cost` or `data_latency`.",
};

// ---------------------------------------------------------------- policy rule bodies

pub static ENTITLE: BlockSchema = BlockSchema {
    name: "entitle",
    doc: "What an identity may use.",
    fields: &[
        Field {
            name: "gpu",
            shape: Shape::Bound(Ty::Count),
            presence: OPT,
            doc: "Most GPUs the identity's workloads may hold in total: `gpu <= 16`.",
        },
        value(
            "accelerators",
            Ty::List(&Ty::Ref(RefKind::Accelerator)),
            Presence::Default("any"),
            "The accelerators it may use.",
        ),
        value(
            "environments",
            Ty::List(&Ty::Enum(EnumTy::EnvClass)),
            Presence::Default("any"),
            "The environment classes it may use.",
        ),
        value(
            "until",
            Ty::Str,
            OPT,
            "When it expires (RFC 3339, `2026-12-31T00:00:00Z`): from then on, at the plan \
             instant, the identity has no entitlement.",
        ),
    ],
};

pub static QUOTA: BlockSchema = BlockSchema {
    name: "quota",
    doc: "A cap on a team's GPUs.",
    fields: &[Field {
        name: "gpu",
        shape: Shape::Bound(Ty::Count),
        presence: REQ,
        doc: "Most GPUs the team's workloads hold together: `gpu <= 8`.",
    }],
};

pub static LIMIT: BlockSchema = BlockSchema {
    name: "limit",
    doc: "A cap on GPUs while a window is in effect.",
    fields: &[Field {
        name: "gpu",
        shape: Shape::Bound(Ty::Count),
        presence: REQ,
        doc: "Most GPUs the matching workloads hold together while the window is in effect.",
    }],
};

pub static APPROVAL: BlockSchema = BlockSchema {
    name: "approval",
    doc: "Who approves a workload above a cost.",
    fields: &[
        value(
            "approvers",
            Ty::List(&Ty::Str),
            REQ,
            "Who may approve: public keys (`berth-ed25519-public:…`, a `berth keys generate` \
             `.pub` file's text) or names listed in the `trust` file.",
        ),
        value(
            "trust",
            Ty::Str,
            OPT,
            "A file, relative to the spec's directory, of lines `NAME PUBLIC-KEY`: the keys \
             of the approvers named.",
        ),
    ],
};

// ---------------------------------------------------------------- catalogue records (std library)

pub static ACCELERATOR: BlockSchema = BlockSchema {
    name: "accelerator",
    doc: "An accelerator of the catalogue (`const H100 = accelerator { … }`).",
    fields: &[
        value(
            "vendor",
            Ty::Str,
            REQ,
            "`\"nvidia\"`, `\"amd\"`, `\"intel\"`.",
        ),
        value(
            "family",
            Ty::Str,
            REQ,
            "`\"hopper\"`, `\"ada\"`, `\"ampere\"`, `\"orin\"`, …",
        ),
        value(
            "memory",
            Ty::Size,
            REQ,
            "Memory of one device, as the vendor states it.",
        ),
        value(
            "mig_profiles",
            Ty::List(&Ty::Record(&MIG)),
            Presence::Default("[] (no MIG)"),
            "MIG profiles.",
        ),
    ],
};

pub static MIG: BlockSchema = BlockSchema {
    name: "mig_profile",
    doc: "A MIG profile of an accelerator.",
    fields: &[
        value("name", Ty::Str, REQ, "The profile, e.g. `\"1g.10gb\"`."),
        value("memory", Ty::Size, REQ, "Memory of one instance."),
        value(
            "instances",
            Ty::Count,
            REQ,
            "How many instances of this profile fit on one device.",
        ),
    ],
};

pub static SERVICE: BlockSchema = BlockSchema {
    name: "service",
    doc: "A platform service (`const object_store = service {}`), documented by its doc comment.",
    fields: &[value(
        "doc",
        Ty::Str,
        Presence::Default("the constant's doc comment"),
        "What the service is.",
    )],
};

/// Records that define catalogue entries when they are a `const`'s value.
pub static CATALOGUE_RECORDS: &[&BlockSchema] = &[&ACCELERATOR, &SERVICE];

#[cfg(any(test, feature = "testing"))]
/// Every block schema, for the language server.
pub static ALL_BLOCKS: &[&BlockSchema] = &[
    &WORKLOAD,
    &RESOURCES,
    &DATA_REQUIREMENT,
    &TELEMETRY,
    &MODEL,
    &VARIANT,
    &TARGET,
    &KUBERNETES,
    &ARC,
    &EDGE,
    &EMPTY_LOCAL,
    &LINK,
    &NO_LINK,
    &POOL,
    &LOCAL_DATA,
    &REMOTE_DATA,
    &COST,
    &PLACEMENT,
    &ENTITLE,
    &QUOTA,
    &LIMIT,
    &APPROVAL,
    &ACCELERATOR,
    &MIG,
    &SERVICE,
];

/// Every record constructor usable in expressions, with the type it belongs to (a record
/// found in a `const` is checked against the one type whose constructor it names).
pub fn ctor_types() -> Vec<(&'static str, Ty)> {
    let mut out = Vec::new();
    for (ctors, ty) in [
        (RUNTIMES, Ty::OneOf(RUNTIMES)),
        (LINKS, Ty::OneOf(LINKS)),
        (DATA_OFFERS, Ty::OneOf(DATA_OFFERS)),
    ] {
        for c in ctors {
            out.push((c.name, ty));
        }
    }
    out.push((MIG.name, Ty::Record(&MIG)));
    out
}

/// The schema of a top-level declaration keyword.
pub fn decl_schema(kind: crate::syntax::ast::DeclKind) -> &'static BlockSchema {
    use crate::syntax::ast::DeclKind;
    match kind {
        DeclKind::Model => &MODEL,
        DeclKind::Workload => &WORKLOAD,
        DeclKind::Target => &TARGET,
        DeclKind::Placement => &PLACEMENT,
    }
}

#[cfg(any(test, feature = "testing"))]
/// The reference of every block kind as Markdown (`docs/schema.md` is this text; a test keeps
/// it current).
pub fn reference_markdown() -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "# Block schemas\n\n\
         Generated from `compiler/src/sema/schema.rs` (the tables the checker and the language \
         server use); a test fails when this file is out of date \
         (regenerate with `UPDATE_DOCS=1 cargo test -p berth-compiler --test sema`).\n",
    );
    for b in ALL_BLOCKS {
        let _ = write!(out, "\n## `{}`\n\n{}\n\n", b.name, b.doc);
        if b.fields.is_empty() {
            out.push_str("No fields.\n");
            continue;
        }
        out.push_str("| Field | Written | Type | Presence | Meaning |\n|---|---|---|---|---|\n");
        for f in b.fields {
            let ty = match &f.shape {
                Shape::Value(t) | Shape::Labelled(t) | Shape::Bound(t) => t.describe(),
                Shape::Block(s) | Shape::LabelledBlock(s) => format!("block `{}`", s.name),
            };
            let presence = match f.presence {
                Presence::Required => "required".to_string(),
                Presence::Optional => "optional".to_string(),
                Presence::Default(d) => format!("default: {d}"),
                Presence::Repeated => "any number".to_string(),
                Presence::AtLeastOne => "at least one".to_string(),
            };
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} | {} | {} |",
                f.name,
                f.shape.example(f.name),
                ty.replace('|', "\\|"),
                presence,
                f.doc.replace('|', "\\|"),
            );
        }
    }
    let _ = write!(
        out,
        "\n## Constructors\n\n| Where | Constructor | Meaning |\n|---|---|---|\n"
    );
    for (what, ctors) in [
        ("`runtime`", RUNTIMES),
        ("`connectivity` of a target", LINKS),
        ("`data NAME =` of a target", DATA_OFFERS),
    ] {
        for c in ctors {
            let _ = writeln!(out, "| {what} | `{}` | {} |", c.name, c.doc);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_are_unique_and_documented() {
        for b in ALL_BLOCKS {
            assert!(!b.doc.is_empty(), "{}", b.name);
            for (i, f) in b.fields.iter().enumerate() {
                assert!(!f.doc.is_empty(), "{}.{}", b.name, f.name);
                assert!(
                    b.fields[..i].iter().all(|g| g.name != f.name),
                    "{}.{} twice",
                    b.name,
                    f.name
                );
            }
        }
    }
}
