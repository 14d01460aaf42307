//! Test kits, in one room behind the `testing` feature (the compiler's own tests, benchmarks
//! and examples turn it on through the crate's dev-dependency on itself; the shipped binary
//! never builds it). Nothing in the pipeline calls into here.
//!
//! - [`fuzz`]: the properties the fuzz targets check, shared with the corpus replay test.
//! - [`dense`]: dense estates as `.berth` specs (similar clusters; issue 22's benchmarks).
//! - [`ir`]: IRs built in code ([`ir::IrBuilder`]) and generated estates of any size
//!   ([`ir::estate`]).
//! - [`layout`]: a plan without what depends on its spec's layout, for "`fmt` keeps the plan".
//! - [`specs`]: generated `.berth` specifications of any size, for benchmarks and stress tests.
//! - [`planted`]: estates known to be placeable in full, for the assignment's tests and
//!   benchmarks.
//!
//! All draw from one SplitMix64 sequence (`crate::splitmix`), so they are the same on every
//! platform. This is test support, not compiler input: a mistake in a test panics, saying
//! which.

pub mod dense;
pub mod fuzz;
pub mod ir;
pub mod layout;
pub mod planted;
pub mod specs;

/// Replicas `plan` places per class of workload of `ir`: production, staging, development,
/// experiment (compared lexicographically: what the assignment places first).
pub fn placed_by_class(ir: &crate::ir::Ir, plan: &crate::plan::Plan) -> [u32; 4] {
    let mut out = [0; 4];
    for (w, p) in ir.workloads.iter().zip(&plan.workloads) {
        let i = crate::placement::assign::class_slot(w.class);
        out[i] += p.placements.iter().map(|x| x.replicas).sum::<u32>();
    }
    out
}
