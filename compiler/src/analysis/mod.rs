//! Fleet analysis: what a spec that checked clean allows its fleet to do, whatever the load
//! and the hour, reported as warnings (`W07xx`) by `berth check` and the language server.
//!
//! It reads the stages of the placement engine that depend on neither load nor time
//! (eligibility, deny rules, entitlements: [`crate::placement::screen`]), so a warning's
//! reason is the very sentence a plan would give. It finds:
//!
//! - per workload ([`reach`]): one no target can technically run (W0701), one forbidden by
//!   policy on every target that could run it (W0702), a candidate list whose targets all
//!   refuse it while others would not (W0707), a fallback it can never use (W0706);
//! - per policy rule ([`rules`]): an entitlement every use of which a deny rule forbids
//!   (W0703), a GPU cap above the fleet's GPUs it could count (W0704), a window that never
//!   opens (W0705).
//!
//! It never changes the IR, a plan or an error: warnings only. In a spec without targets only
//! windows are looked at (there is no fleet yet).

mod reach;
mod rules;
pub mod warning;

use crate::diagnostics::Diagnostic;
use crate::ir::{Identity, Ir};
use crate::placement::screen::Screened;
use crate::source::SourceMap;
use warning::FleetWarning;

/// Every finding about `ir`, in no particular order (the driver sorts diagnostics).
pub fn findings(ir: &Ir, sources: &SourceMap) -> Vec<FleetWarning> {
    let mut out = rules::windows_never_open(ir);
    if ir.targets.is_empty() {
        return out;
    }
    let screened = Screened::new(ir, sources);
    let dead = rules::dead_entitlements(&screened);
    // A dead entitlement already explains why its identity's workloads run nowhere.
    let dead_identities: Vec<&Identity> = dead
        .iter()
        .filter_map(|(e, _)| ir.policy.entitlements.get(*e))
        .map(|e| &e.identity)
        .collect();
    out.extend(reach::findings(&screened, &dead_identities));
    out.extend(dead.into_iter().map(|(_, f)| f));
    out.extend(rules::caps_above_fleet(&screened));
    out
}

/// The findings about `ir` as warnings.
pub fn warnings(ir: &Ir, sources: &SourceMap) -> Vec<Diagnostic> {
    findings(ir, sources).iter().map(Diagnostic::from).collect()
}
