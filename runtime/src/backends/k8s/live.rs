//! What `berth plan --live` places against: for every Kubernetes target of a spec, per pool,
//! the GPUs (or MIG slices) its nodes can allocate and those held by running pods that this
//! spec's plan would not replace; the compiler takes the figures as
//! [`berth_compiler::driver::LivePools`] and never reads a cluster itself.
//!
//! **What counts as held** (`docs/operations.md`, "Planning against live allocation"): every
//! running pod bound to one of the pool's nodes and requesting the pool's resource, except
//! berth's own pods of this spec — labelled `app.kubernetes.io/managed-by: berth`, with a
//! `berth.dev/target` that is one of the spec's targets and a `berth.dev/workload` that is one
//! of its workloads. Those are what the new plan replaces (apply updates them in place, or
//! `--prune` deletes those the plan no longer has), so they are capacity the plan may use.
//! Another team's pods, pods of another spec's targets and berth's pods of workloads the spec
//! no longer has hold their GPUs until someone else frees them.

use super::kubeconfig::Kubeconfigs;
use super::status::connect;
use super::top::{Holder, gpu_use};
use berth_compiler::driver::LivePools;
use berth_compiler::ir::{Ir, LiveCapacity, Runtime};
use std::collections::BTreeMap;

/// A kubeconfig context that could not be read: its targets keep their declared capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unread {
    pub context: String,
    /// The spec's targets on it, in spec order.
    pub targets: Vec<String>,
    /// Why, redacted.
    pub why: String,
}

/// What [`read`] found.
#[derive(Debug, Default)]
pub struct Read {
    /// Every pool of a cluster that could be read.
    pub pools: LivePools,
    pub unread: Vec<Unread>,
    /// Pools of clusters that were read but whose nodes cannot be told apart (no
    /// `node_labels` in the spec), `(target, pool)`: they keep their declared capacity.
    pub unlabelled: Vec<(String, String)>,
}

/// Whether a pod holding a pool's GPUs is one the plan of this spec replaces (see the module
/// documentation): it does not reduce the capacity the plan may use.
pub fn replaced_by_plan(holder: &Holder, ir: &Ir) -> bool {
    holder
        .berth_target
        .as_deref()
        .is_some_and(|t| ir.target_by_name(t).is_some())
        && holder
            .workload
            .as_deref()
            .is_some_and(|w| ir.workload_by_name(w).is_some())
}

/// Reads every Kubernetes target's pools of `ir`, one kubeconfig context at a time (in name
/// order), resolved as `apply` and `status` resolve them.
pub fn read(ir: &Ir, kubeconfigs: &Kubeconfigs) -> Read {
    let mut contexts: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for target in &ir.targets {
        if let Runtime::Kubernetes { context, .. } = &target.runtime {
            contexts
                .entry(context.as_str())
                .or_default()
                .push(target.name.clone());
        }
    }
    let mut out = Read::default();
    if contexts.is_empty() {
        return out;
    }
    let runtime = match crate::tasks::runtime_with(2) {
        Ok(rt) => rt,
        Err(why) => {
            for (context, targets) in contexts {
                out.unread.push(Unread {
                    context: context.to_string(),
                    targets,
                    why: why.clone(),
                });
            }
            return out;
        }
    };
    for (context, targets) in contexts {
        let found = runtime.block_on(async {
            let cluster = connect(kubeconfigs, context).await?;
            gpu_use(&cluster, ir, &targets)
                .await
                .map_err(|e| e.to_string())
        });
        let (pools, holders) = match found {
            Ok(found) => found,
            Err(why) => {
                out.unread.push(Unread {
                    context: context.to_string(),
                    targets,
                    why: kubeconfigs.redact(&why),
                });
                continue;
            }
        };
        for pool in pools {
            let labelled = ir
                .target_by_name(&pool.target)
                .and_then(|t| ir.target(t).pools.iter().find(|p| p.name == pool.pool))
                .is_some_and(|p| !p.node_labels.is_empty());
            if !labelled {
                out.unlabelled.push((pool.target, pool.pool));
                continue;
            }
            let held: i64 = holders
                .iter()
                .filter(|h| h.target == pool.target && h.pool == pool.pool)
                .filter(|h| !replaced_by_plan(h, ir))
                .map(|h| h.gpus)
                .sum();
            let capacity = LiveCapacity::read(
                u64::try_from(pool.allocatable).unwrap_or(0),
                u64::try_from(held).unwrap_or(0),
            );
            out.pools.insert((pool.target, pool.pool), capacity);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_compiler::source::SourceMap;

    fn ir() -> Ir {
        let mut sources = SourceMap::new();
        sources.add(
            "spec.berth",
            r#"use std.gpu.{L4}

target lyon {
  class = factory  connectivity = connected  cpu = 32  memory = 128GiB
  runtime = kubernetes { context = "lyon", namespace = "vision" }
  pool l4 { accelerator = L4  count = 8  node_labels = { "pool": "l4" } }
}

workload inspect {
  release = "1"  image = "inspect:1"  class = production  identity = service_account("vision")
  replicas = 2
  resources { cpu = 4  memory = 16GiB  gpu = 1 }
  accelerators = [L4]
}
"#,
        );
        let compiled = berth_compiler::driver::compile(&sources);
        match compiled.ir {
            Some(ir) => ir,
            None => panic!("{:?}", compiled.diagnostics),
        }
    }

    fn holder(workload: Option<&str>, berth_target: Option<&str>) -> Holder {
        Holder {
            target: "lyon".into(),
            pool: "l4".into(),
            namespace: "vision".into(),
            pod: "p".into(),
            workload: workload.map(str::to_string),
            berth_target: berth_target.map(str::to_string),
            gpus: 1,
        }
    }

    #[test]
    fn only_berths_pods_of_this_specs_targets_and_workloads_are_replaced() {
        let ir = ir();
        assert!(replaced_by_plan(
            &holder(Some("inspect"), Some("lyon")),
            &ir
        ));
        // Another team's pod, even one carrying berth's workload label.
        assert!(!replaced_by_plan(&holder(Some("inspect"), None), &ir));
        assert!(!replaced_by_plan(&holder(None, None), &ir));
        // berth's pod of another spec's target, or of a workload this spec no longer has.
        assert!(!replaced_by_plan(
            &holder(Some("inspect"), Some("turin")),
            &ir
        ));
        assert!(!replaced_by_plan(&holder(Some("sort"), Some("lyon")), &ir));
    }
}
