//! Simulated nodes generated from a spec's GPU pools, for KWOK to run: each pool becomes
//! nodes of [`DEVICES_PER_NODE`] devices carrying the pool's node labels and taints and the
//! extended resource the GPU operator advertises for them (`nvidia.com/gpu`, or
//! `nvidia.com/mig-<profile>` under its mixed MIG strategy). Every target also gets one
//! untainted node without GPUs, for CPU-only workloads; the target's CPU and memory are
//! spread evenly over its nodes.
//!
//! The resource names here are the GPU operator's and device plugins', written from their
//! documentation, not taken from berth's renderer: a renderer that asks for the wrong
//! resource must leave its pods Pending here, as on a real cluster.

use berth_compiler::ir::{Ir, Runtime, Target};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Devices per GPU node (the common 8-GPU server).
pub const DEVICES_PER_NODE: u32 = 8;

/// The label every generated node carries: `<target>.<pool>`, or `<target>.cpu`.
pub const POOL_LABEL: &str = "berth.test/pool";

#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `(key, value, effect)`.
    pub taints: Vec<(String, String, String)>,
    pub cpu_millis: u64,
    pub memory: u64,
    /// Extended resources: name → count.
    pub extended: BTreeMap<String, u64>,
}

impl NodeSpec {
    /// A node with only CPU and memory.
    pub fn cpu(name: &str, cpu_millis: u64, memory: u64) -> NodeSpec {
        NodeSpec {
            name: name.to_string(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            cpu_millis,
            memory,
            extended: BTreeMap::new(),
        }
    }

    /// The Node object, status included (the API server accepts status on create), marked
    /// for KWOK to manage.
    pub fn to_json(&self) -> Value {
        let mut resources = serde_json::Map::new();
        resources.insert("cpu".into(), json!(format!("{}m", self.cpu_millis)));
        resources.insert("memory".into(), json!(self.memory.to_string()));
        resources.insert("pods".into(), json!("110"));
        for (name, count) in &self.extended {
            resources.insert(name.clone(), json!(count.to_string()));
        }
        let mut labels = self.labels.clone();
        labels.insert("kubernetes.io/hostname".into(), self.name.clone());
        labels.insert("kubernetes.io/os".into(), "linux".into());
        labels.insert("kubernetes.io/arch".into(), "amd64".into());
        labels.insert("type".into(), "kwok".into());
        let taints: Vec<Value> = self
            .taints
            .iter()
            .map(|(key, value, effect)| json!({"key": key, "value": value, "effect": effect}))
            .collect();
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"taints": taints},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                    "kubeletVersion": "fake", "kubeProxyVersion": "fake"},
            },
        })
    }
}

/// The extended resource a node offers for a pool's devices, as the vendor's device plugin
/// names it.
pub fn device_resource(vendor: &str, mig: Option<&str>) -> String {
    match (vendor, mig) {
        ("nvidia", Some(profile)) => format!("nvidia.com/mig-{profile}"),
        ("nvidia", None) => "nvidia.com/gpu".to_string(),
        ("amd", _) => "amd.com/gpu".to_string(),
        ("intel", _) => "gpu.intel.com/i915".to_string(),
        (other, _) => format!("{other}.com/gpu"),
    }
}

/// The nodes of every Kubernetes target of `ir` whose context is `context`.
pub fn nodes_for_context(ir: &Ir, context: &str) -> Vec<NodeSpec> {
    ir.targets
        .iter()
        .filter(|t| matches!(&t.runtime, Runtime::Kubernetes { context: c, .. } if c == context))
        .flat_map(|t| nodes_for_target(ir, t))
        .collect()
}

/// The Kubernetes contexts of `ir`'s targets, sorted, without duplicates.
pub fn contexts(ir: &Ir) -> Vec<String> {
    let mut out: Vec<String> = ir
        .targets
        .iter()
        .filter_map(|t| match &t.runtime {
            Runtime::Kubernetes { context, .. } => Some(context.clone()),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn nodes_for_target(ir: &Ir, target: &Target) -> Vec<NodeSpec> {
    let mut out = Vec::new();
    let base = dns(&target.name);
    for pool in &target.pools {
        let accelerator = ir.accelerator(pool.accelerator);
        let per_device = match &pool.mig {
            Some(profile) => accelerator
                .mig_profiles
                .iter()
                .find(|p| &p.name == profile)
                .map_or(1, |p| u64::from(p.instances)),
            None => 1,
        };
        let resource = device_resource(&accelerator.vendor, pool.mig.as_deref());
        let mut left = pool.count;
        let mut index = 0;
        while left > 0 {
            let devices = left.min(DEVICES_PER_NODE);
            left -= devices;
            let mut labels = pool.node_labels.clone();
            labels.insert(POOL_LABEL.into(), format!("{}.{}", target.name, pool.name));
            out.push(NodeSpec {
                name: format!("{base}-{}-{index}", dns(&pool.name)),
                labels,
                taints: pool
                    .taints
                    .iter()
                    .map(|t| (t.key.clone(), t.value.clone(), t.effect.clone()))
                    .collect(),
                cpu_millis: 0,
                memory: 0,
                extended: BTreeMap::from([(resource.clone(), u64::from(devices) * per_device)]),
            });
            index += 1;
        }
    }
    let mut cpu = NodeSpec::cpu(&format!("{base}-cpu-0"), 0, 0);
    cpu.labels
        .insert(POOL_LABEL.into(), format!("{}.cpu", target.name));
    out.push(cpu);
    let n = out.len() as u64;
    for node in &mut out {
        node.cpu_millis = target.cpu_millis / n;
        node.memory = target.memory / n;
    }
    out
}

fn dns(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}
