//! Semantic checks that need the whole lowered spec but no placement.
//!
//! The GPU rule, precisely: a workload *needs GPUs* when `resources.gpu` is at least 1. Such a
//! workload must say which accelerators are acceptable, in at least one of these ways:
//! - its own `accelerators` list is not empty;
//! - `resources.mig` names a MIG profile (only accelerators with that profile qualify);
//! - `resources.gpu_memory` states the memory each GPU needs;
//! - its `model` has a variant that lists `accelerators` or states a `gpu_memory` (the
//!   variant fixes the hardware it runs on, or the memory an accelerator needs for it).
//!
//! A GPU workload with none of these is reported ([`SemaError::GpuWithoutAccelerator`]): it
//! would accept any GPU at all, which is almost always an oversight (a 16GB T4 and a 141GB H200
//! are not interchangeable), and one line fixes it.

use super::checker::{Catalogued, Checker};
use super::error::SemaError;
use super::lower::{accelerator, check_mig_profile};
use crate::ir::{AcceleratorId, Ir, SpanTable};

pub fn run(ck: &mut Checker<'_>, ir: &Ir, spans: &SpanTable) {
    let all_accelerators: Vec<AcceleratorId> = ck
        .catalogue
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c, Some(Catalogued::Accelerator(_))))
        .map(|(i, _)| AcceleratorId(i as u32))
        .collect();

    for (m, model) in ir.models.iter().enumerate() {
        let Some(ms) = spans.models.get(m) else {
            continue;
        };
        for v in &model.variants {
            if v.gpu_memory == 0 {
                continue;
            }
            let listed = !v.accelerators.is_empty();
            let candidates = if listed {
                &v.accelerators
            } else {
                &all_accelerators
            };
            let largest = candidates
                .iter()
                .filter_map(|id| accelerator(ck, *id))
                .max_by(|a, b| a.memory.cmp(&b.memory).then(b.name.cmp(&a.name)));
            let Some(largest) = largest else { continue };
            if v.gpu_memory > largest.memory {
                let e = SemaError::VariantTooLarge {
                    variant: v.name.clone(),
                    need: human_size(v.gpu_memory),
                    span: ms.field(&format!("variant.{}.gpu_memory", v.name)),
                    largest: (largest.name.clone(), human_size(largest.memory)),
                    listed,
                };
                ck.error(e);
            }
        }
    }

    for (w, wl) in ir.workloads.iter().enumerate() {
        let Some(ws) = spans.workloads.get(w) else {
            continue;
        };
        let r = &wl.resources;
        if r.mig.is_some() && r.gpu == 0 {
            ck.error(SemaError::MigWithoutGpu {
                span: ws.field("resources.mig"),
            });
        }
        let model = wl.model.and_then(|m| ir.models.get(m.index()));
        let model_fixes = model.is_some_and(|m| {
            m.variants
                .iter()
                .any(|v| !v.accelerators.is_empty() || v.gpu_memory > 0)
        });
        let stated = !wl.accelerators.is_empty() || r.mig.is_some() || r.gpu_memory.is_some();
        if r.gpu > 0 && !stated && !model_fixes {
            ck.error(SemaError::GpuWithoutAccelerator {
                workload: wl.name.clone(),
                span: ws.field("resources.gpu"),
                model: model.map(|m| m.name.clone()),
            });
        }
        if let Some(profile) = &r.mig {
            let mut accepted: Vec<AcceleratorId> = wl.accelerators.clone();
            if accepted.is_empty()
                && let Some(m) = model
            {
                for v in &m.variants {
                    accepted.extend(v.accelerators.iter().copied());
                }
            }
            if accepted.is_empty() {
                accepted = all_accelerators.clone();
            }
            accepted.sort();
            accepted.dedup();
            check_mig_profile(ck, profile, &accepted, ws.field("resources.mig"));
        }
    }
}

/// A byte count in the largest unit that divides it exactly: `80GB`, `12GiB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: &[(&str, u64)] = &[
        ("TB", 1_000_000_000_000),
        ("TiB", 1 << 40),
        ("GB", 1_000_000_000),
        ("GiB", 1 << 30),
        ("MB", 1_000_000),
        ("MiB", 1 << 20),
        ("KB", 1_000),
        ("KiB", 1 << 10),
    ];
    for (unit, factor) in UNITS {
        if bytes >= *factor && bytes.is_multiple_of(*factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::human_size;

    #[test]
    fn sizes_read_as_written() {
        assert_eq!(human_size(80_000_000_000), "80GB");
        assert_eq!(human_size(12 << 30), "12GiB");
        assert_eq!(human_size(1500), "1500B");
    }
}
