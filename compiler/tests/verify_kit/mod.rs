//! A hand-built estate for the verifier's tests: a small IR written out in Rust, built
//! without the parser or semantics so that the verifier is tested on its own.
//!
//! The estate (`estate()`) has four targets and seven workloads exercising every rule the
//! verifier checks; `tests/data/verify/base.plan.json` is a valid plan for it, written by hand.

#![allow(dead_code)]

use berth_compiler::ir::*;
use std::collections::BTreeMap;

pub const GIB: u64 = 1 << 30;
pub const MS: u64 = 1_000_000;

pub fn money(units: f64) -> Money {
    Money((units * Money::MICROS as f64).round() as i64)
}

fn accelerator(name: &str, family: &str, memory: u64, mig: &[(&str, u64, u32)]) -> Accelerator {
    Accelerator {
        name: name.into(),
        vendor: "nvidia".into(),
        family: family.into(),
        memory,
        mig_profiles: mig
            .iter()
            .map(|&(name, memory, instances)| MigProfile {
                name: name.into(),
                memory,
                instances,
            })
            .collect(),
    }
}

pub fn pool(name: &str, accelerator: u32, count: u32, mig: Option<&str>) -> Pool {
    Pool {
        name: name.into(),
        accelerator: AcceleratorId(accelerator),
        count,
        mig: mig.map(Into::into),
        node_labels: BTreeMap::new(),
        taints: Vec::new(),
        live: None,
    }
}

/// A target with no pools, data or services; callers fill in what they need.
pub fn target(name: &str, class: EnvClass, connectivity: Connectivity) -> Target {
    Target {
        name: name.into(),
        class,
        runtime: Runtime::Local,
        region: None,
        jurisdiction: None,
        connectivity,
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
    }
}

/// A one-replica CPU-only service with no requirements beyond 1 core and 1GiB.
pub fn workload(name: &str, class: WorkloadClass, identity: &str) -> Workload {
    Workload {
        name: name.into(),
        release: "1.0.0".into(),
        image: format!("registry.example.com/{name}:1.0.0"),
        kind: WorkloadKind::Service,
        class,
        identity: Identity {
            kind: IdentityKind::ServiceAccount,
            name: identity.into(),
        },
        team: identity.into(),
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
        connectivity: Connectivity::Disconnected,
        environments: Vec::new(),
        telemetry: Telemetry::Live,
        ports: Vec::new(),
        placement: PlacementRules::default(),
    }
}

// Indices into the estate's lists.
pub const L4: u32 = 0;
pub const H100: u32 = 1;
pub const ORIN: u32 = 2;
pub const OBJECT_STORE: u32 = 0;
pub const MODEL_CACHE: u32 = 1;
pub const LYON: u32 = 0;
pub const TURIN: u32 = 1;
pub const CLOUD_EU: u32 = 2;
pub const FRANKFURT: u32 = 3;
pub const VISION: u32 = 0;
pub const TRAINER: u32 = 1;
pub const CHAT: u32 = 2;
pub const EMBEDDER: u32 = 3;
pub const NOTEBOOK: u32 = 4;
pub const SWEEP: u32 = 5;
pub const PROBE: u32 = 6;

fn local_data(latency_ms: u64, endpoint: &str) -> DataOffer {
    DataOffer {
        name: "line_images".into(),
        locality: DataLocality::Local,
        endpoint: Some(endpoint.into()),
        latency: latency_ms * MS,
    }
}

fn services(object_store: Maturity, model_cache: Maturity) -> Vec<ServiceOffer> {
    vec![
        ServiceOffer {
            service: ServiceId(OBJECT_STORE),
            maturity: object_store,
        },
        ServiceOffer {
            service: ServiceId(MODEL_CACHE),
            maturity: model_cache,
        },
    ]
}

fn variant(name: &str, precision: &str, gpu_memory: u64, accelerators: &[u32]) -> Variant {
    Variant {
        name: name.into(),
        format: if name == "int8" { "tensorrt" } else { "onnx" }.into(),
        precision: Some(precision.into()),
        gpu_memory,
        accelerators: accelerators.iter().map(|&a| AcceleratorId(a)).collect(),
        artifact: format!("oci://models.example.com/defect-detector:3.2.0-{name}"),
        digest: Some(format!(
            "sha256:{}",
            if name == "int8" { "41" } else { "9f" }.repeat(32)
        )),
        size: None,
    }
}

/// The base estate: see the module docs.
pub fn estate() -> Ir {
    use Connectivity::*;
    use EnvClass::*;
    use WorkloadClass::*;

    let accelerators = vec![
        accelerator("L4", "ada", 24 * GIB, &[]),
        accelerator(
            "H100",
            "hopper",
            80 * GIB,
            &[("1g.10gb", 10 * GIB, 7), ("3g.40gb", 40 * GIB, 2)],
        ),
        accelerator("JetsonOrinNano", "orin", 8 * GIB, &[]),
    ];
    let catalogue = vec![
        Service {
            name: "object_store".into(),
            doc: String::new(),
        },
        Service {
            name: "model_cache".into(),
            doc: String::new(),
        },
    ];
    let models = vec![Model {
        name: "defect_detector".into(),
        version: "3.2.0".into(),
        variants: vec![
            variant("fp16", "fp16", 12 * GIB, &[]),
            variant("int8", "int8", 4 * GIB, &[L4, ORIN]),
        ],
    }];

    let lyon = Target {
        region: Some("eu-west".into()),
        jurisdiction: Some("FR".into()),
        pools: vec![pool("l4", L4, 8, None)],
        data: vec![local_data(2, "s3://minio.lyon.local/line-images")],
        services: services(Maturity::Ga, Maturity::Ga),
        cost: Cost {
            gpu_hour: Some(money(0.90)),
        },
        ..target("lyon", Factory, Intermittent)
    };
    let turin = Target {
        cpu_millis: 16_000,
        memory: 64 * GIB,
        pools: vec![pool("orin", ORIN, 2, None)],
        data: vec![local_data(1, "file:///srv/line-images")],
        services: services(Maturity::Ga, Maturity::Ga),
        // Run by an edge agent: a disconnected site that is carried its models.
        runtime: Runtime::Edge {
            agent: "https://edge.turin.example.com:7443".into(),
        },
        ..target("turin", Factory, Disconnected)
    };
    let cloud_eu = Target {
        region: Some("eu-west".into()),
        jurisdiction: Some("DE".into()),
        cpu_millis: 512_000,
        memory: 2048 * GIB,
        pools: vec![
            pool("h100", H100, 16, None),
            pool("h100_infer", H100, 4, None),
            pool("h100_mig", H100, 2, Some("1g.10gb")),
        ],
        data: vec![DataOffer {
            name: "line_images".into(),
            locality: DataLocality::Remote,
            endpoint: None,
            latency: 85 * MS,
        }],
        services: services(Maturity::Ga, Maturity::Preview),
        cost: Cost {
            gpu_hour: Some(money(4.10)),
        },
        ..target("cloud_eu", Cloud, Connected)
    };
    let frankfurt = Target {
        region: Some("eu-central".into()),
        cpu_millis: 256_000,
        memory: 1024 * GIB,
        pools: vec![pool("h100", H100, 8, None)],
        cost: Cost {
            gpu_hour: Some(money(3.00)),
        },
        ..target("frankfurt_dc", Datacenter, Connected)
    };

    let vision = Workload {
        replicas: 2,
        resources: Resources {
            cpu_millis: 4000,
            memory: 16 * GIB,
            gpu: 1,
            gpu_memory: None,
            mig: None,
        },
        model: Some(ModelId(0)),
        data: vec![DataRequirement {
            name: "line_images".into(),
            dataset: "plant-line-images".into(),
            access: Access::Read,
            max_latency: Some(20 * MS),
            classification: Classification::Confidential,
        }],
        services: vec![
            ServiceRequirement {
                service: ServiceId(OBJECT_STORE),
                min: Maturity::Ga,
            },
            ServiceRequirement {
                service: ServiceId(MODEL_CACHE),
                min: Maturity::Preview,
            },
        ],
        environments: vec![Factory, Datacenter, Cloud],
        placement: PlacementRules {
            candidates: Some(vec![TargetId(LYON), TargetId(TURIN), TargetId(CLOUD_EU)]),
            per_target: Some(1),
            prefer: vec![Preference::LowestDataLatency, Preference::LowestCost],
            ..PlacementRules::default()
        },
        ..workload("vision", Production, "vision")
    };
    let gpu_job = |gpu, gpu_memory: Option<u64>| Resources {
        cpu_millis: 8000,
        memory: 64 * GIB,
        gpu,
        gpu_memory,
        mig: None,
    };
    let trainer = Workload {
        kind: WorkloadKind::Batch,
        replicas: 4,
        resources: gpu_job(2, Some(40 * GIB)),
        accelerators: vec![AcceleratorId(H100)],
        connectivity: Connected,
        placement: PlacementRules {
            fallback: vec![TargetId(FRANKFURT)],
            ..PlacementRules::default()
        },
        team: "research".into(),
        ..workload("trainer", Experiment, "research")
    };
    let chat = Workload {
        replicas: 2,
        resources: Resources {
            cpu_millis: 2000,
            memory: 8 * GIB,
            ..gpu_job(1, Some(40 * GIB))
        },
        accelerators: vec![AcceleratorId(H100)],
        environments: vec![Cloud],
        placement: PlacementRules {
            isolate_from: vec![WorkloadId(TRAINER)],
            ..PlacementRules::default()
        },
        ..workload("chat", Production, "chat")
    };
    let embedder = Workload {
        replicas: 3,
        resources: Resources {
            cpu_millis: 1000,
            memory: 4 * GIB,
            gpu: 1,
            gpu_memory: Some(8 * GIB),
            mig: Some("1g.10gb".into()),
        },
        environments: vec![Cloud],
        placement: PlacementRules {
            per_region: Some(3),
            ..PlacementRules::default()
        },
        team: "chat".into(),
        ..workload("embedder", Production, "chat")
    };
    let notebook = Workload {
        kind: WorkloadKind::Notebook,
        identity: Identity {
            kind: IdentityKind::User,
            name: "alice".into(),
        },
        team: "research".into(),
        resources: Resources {
            cpu_millis: 1000,
            memory: 4 * GIB,
            ..Resources::default()
        },
        ..workload("notebook", Development, "alice")
    };
    let sweep = Workload {
        kind: WorkloadKind::Batch,
        replicas: 4,
        resources: gpu_job(1, None),
        accelerators: vec![AcceleratorId(H100)],
        connectivity: Connected,
        team: "sweeps".into(),
        ..workload("sweep", Experiment, "research")
    };
    let probe = Workload {
        team: "probes".into(),
        ..Workload {
            name: "probe".into(),
            image: "registry.example.com/probe:1.0.0".into(),
            ..sweep.clone()
        }
    };

    let confidential_on_cloud = PolicyExpr::And(
        Box::new(PolicyExpr::Any(
            Box::new(PolicyExpr::Workload(WorkloadField::Data)),
            Box::new(PolicyExpr::Compare(
                CmpOp::Eq,
                Box::new(PolicyExpr::Member(
                    Box::new(PolicyExpr::Param(0)),
                    "classification".into(),
                )),
                Box::new(PolicyExpr::Const(Value::Classification(
                    Classification::Confidential,
                ))),
            )),
        )),
        Box::new(PolicyExpr::Compare(
            CmpOp::Eq,
            Box::new(PolicyExpr::Target(TargetField::Class)),
            Box::new(PolicyExpr::Const(Value::EnvClass(Cloud))),
        )),
    );
    let notebook_on_connected = PolicyExpr::And(
        Box::new(PolicyExpr::Compare(
            CmpOp::Eq,
            Box::new(PolicyExpr::Workload(WorkloadField::Kind)),
            Box::new(PolicyExpr::Const(Value::Kind(WorkloadKind::Notebook))),
        )),
        Box::new(PolicyExpr::Compare(
            CmpOp::Eq,
            Box::new(PolicyExpr::Target(TargetField::Connectivity)),
            Box::new(PolicyExpr::Const(Value::Connectivity(Connected))),
        )),
    );
    let sa = |name: &str| Identity {
        kind: IdentityKind::ServiceAccount,
        name: name.into(),
    };
    let g = "governance".to_owned();
    let policy = Policy {
        denies: vec![
            DenyRule {
                policy: g.clone(),
                reason: "confidential data never leaves the premises".into(),
                condition: confidential_on_cloud,
            },
            DenyRule {
                policy: g.clone(),
                reason: "notebooks stay on the factory network".into(),
                condition: notebook_on_connected,
            },
        ],
        entitlements: vec![
            Entitlement {
                policy: g.clone(),
                identity: sa("vision"),
                max_gpu: Some(4),
                accelerators: Some(vec![AcceleratorId(L4), AcceleratorId(ORIN)]),
                environments: Some(vec![Factory]),
                until: None,
            },
            Entitlement {
                policy: g.clone(),
                identity: sa("research"),
                max_gpu: Some(12),
                accelerators: Some(vec![AcceleratorId(H100)]),
                environments: None,
                until: None,
            },
            Entitlement {
                policy: g.clone(),
                identity: sa("chat"),
                max_gpu: Some(8),
                accelerators: None,
                environments: None,
                until: None,
            },
        ],
        quotas: vec![Quota {
            policy: g.clone(),
            team: "sweeps".into(),
            max_gpu: 2,
        }],
        windows: vec![
            Window {
                policy: g.clone(),
                name: "peak".into(),
                days: berth_compiler::testing::ir::WEEKDAYS.to_vec(),
                start: 8 * 60,
                end: 18 * 60,
                zone: "Europe/Paris".into(),
            },
            Window {
                policy: g.clone(),
                name: "night".into(),
                days: vec![Weekday::Fri, Weekday::Sat],
                start: 22 * 60,
                end: 6 * 60,
                zone: "UTC".into(),
            },
        ],
        limits: vec![Limit {
            policy: g.clone(),
            selector: Selector::Class(Experiment),
            window: WindowId(0),
            max_gpu: 4,
        }],
        approvals: vec![Approval {
            policy: g.clone(),
            cost_per_day_above: money(500.0),
            approvers: vec!["platform-leads".into()],
            trust: None,
        }],
        reclaims: vec![Reclaim {
            policy: g,
            selector: Selector::Kind(WorkloadKind::Notebook),
            idle_after: 30 * 60 * 1_000_000_000,
        }],
    };

    Ir {
        accelerators,
        services: catalogue,
        models,
        workloads: vec![vision, trainer, chat, embedder, notebook, sweep, probe],
        targets: vec![lyon, turin, cloud_eu, frankfurt],
        policy,
        spans: SpanTable::default(),
    }
}
