//! The compiler's front door: a [`SourceMap`] in, everything the command line and the language
//! server report out. Pure: the runtime reads the files and hands them over, and passes the
//! plan instant in (the compiler never reads the clock).
//!
//! Stages: parse every file (in parallel, collected in file order), analyse the spec (names,
//! types, IR), then — for [`plan`] — place, and gate the plan on the independent verifier.
//! Diagnostics are sorted, so the output never depends on scheduling.

use crate::diagnostics::{Code, Diagnostic, sort_and_dedup};
use crate::ir::{Ir, LiveCapacity};
use crate::placement;
use crate::plan::{Plan, Rejection};
use crate::sema;
use crate::source::{FileId, SourceMap};
use crate::syntax::Parsed;
use crate::verify;
use jiff::Timestamp;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

// What the command line needs of the stages beyond the driver's own functions: the input
// limit it reads files against, parsing and formatting one file (`berth fmt`), the IR as
// JSON (`berth check --emit ir`), and the verifier's findings (`PlanFailure::Unverified`).
/// How `berth plan --exact` ended ([`Assigner::Exact`]).
#[cfg(feature = "exact")]
pub use crate::placement::exact::ExactOutcome;
/// Without the exact mode, no outcome of it can exist.
#[cfg(not(feature = "exact"))]
pub type ExactOutcome = std::convert::Infallible;
/// Quantities written for people (`16GiB`, `250ms`), as in plans' reasons.
pub use crate::placement::units;
pub use crate::sema::ir_to_json;
/// "Did you mean": the closest name among candidates (`berth explain` on an unknown name).
pub use crate::sema::resolve::suggest;
pub use crate::syntax::format::format_file;
pub use crate::syntax::limits::MAX_FILE_BYTES;
pub use crate::syntax::parse_file;
pub use crate::verify::Violation;

/// The compiler's version, recorded in every plan.
pub const COMPILER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What `berth check` reports.
#[derive(Clone, Debug, Default)]
pub struct CheckOutput {
    /// Every diagnostic of every file, sorted (file, position, code) and without duplicates.
    pub diagnostics: Vec<Diagnostic>,
}

impl CheckOutput {
    /// Whether any diagnostic is an error (warnings alone do not fail a check).
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// A spec parsed and analysed: the IR when the spec is free of errors, and every diagnostic.
pub struct Compilation {
    /// One per file of the source map, in file order (the formatter and the language server
    /// reuse them).
    pub parsed: Vec<Parsed>,
    /// `Some` exactly when no diagnostic is an error.
    pub ir: Option<Ir>,
    /// Parse and semantic diagnostics, sorted and without duplicates.
    pub diagnostics: Vec<Diagnostic>,
}

impl Compilation {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses the files `files` of `sources` (in parallel; results in the order given). Ids
/// the map does not hold are skipped.
pub fn parse(sources: &SourceMap, files: &[FileId]) -> Vec<Parsed> {
    files
        .par_iter()
        .filter_map(|id| sources.get(*id))
        .map(|file| parse_file(file.id, &file.text))
        .collect()
}

/// Every file id of `sources`, in file order: the spec when a map holds exactly one.
pub fn all_files(sources: &SourceMap) -> Vec<FileId> {
    sources.files().iter().map(|f| f.id).collect()
}

/// Parses and analyses the spec made of every file of `sources`.
pub fn compile(sources: &SourceMap) -> Compilation {
    compile_spec(sources, &all_files(sources))
}

/// Parses and analyses the spec made of the files `files` of `sources` (one namespace; the
/// runtime groups a directory's files into one spec). Spans keep pointing into `sources`.
pub fn compile_spec(sources: &SourceMap, files: &[FileId]) -> Compilation {
    analyse(sources, parse(sources, files), Vec::new())
}

/// Analyses parsed files as one spec: their syntax diagnostics, `more` (found before
/// semantics), and semantics' own, sorted; the IR only when none of them is an error.
fn analyse(sources: &SourceMap, parsed: Vec<Parsed>, more: Vec<Diagnostic>) -> Compilation {
    let (ir, mut semantic) = sema::analyze(sources, &parsed);
    drop_cascades(&parsed, &mut semantic);
    let mut diagnostics: Vec<Diagnostic> = parsed
        .iter()
        .flat_map(|p| p.diagnostics.iter().cloned())
        .chain(more)
        .chain(semantic)
        .collect();
    sort_and_dedup(&mut diagnostics);
    let ir = ir.filter(|_| !diagnostics.iter().any(Diagnostic::is_error));
    Compilation {
        parsed,
        ir,
        diagnostics,
    }
}

/// Compiles as [`compile_spec`] does, then adds the fleet analysis's warnings (`W07xx`) when
/// the spec is free of errors: what `berth check` and the language server report.
pub fn check_spec(sources: &SourceMap, files: &[FileId]) -> Compilation {
    let mut compiled = compile_spec(sources, files);
    if let Some(ir) = &compiled.ir {
        compiled
            .diagnostics
            .extend(crate::analysis::warnings(ir, sources));
        sort_and_dedup(&mut compiled.diagnostics);
    }
    compiled
}

/// A field the parser could not read is reported once, as a syntax error: in a file with
/// syntax errors, "missing required field" would mostly repeat them (an unterminated string
/// swallows the rest of its block), so those are left out until the syntax is fixed.
fn drop_cascades(parsed: &[Parsed], semantic: &mut Vec<Diagnostic>) {
    let broken: Vec<FileId> = parsed
        .iter()
        .filter_map(|p| {
            p.diagnostics
                .iter()
                .find(|d| d.is_error())
                .map(|d| d.primary.span.file)
        })
        .collect();
    if broken.is_empty() {
        return;
    }
    semantic.retain(|d| d.code != Code::MissingField || !broken.contains(&d.primary.span.file));
}

/// Checks every file of `sources` as one spec: syntax, names, types, the semantic checks
/// and the fleet analysis.
pub fn check(sources: &SourceMap) -> CheckOutput {
    CheckOutput {
        diagnostics: check_spec(sources, &all_files(sources)).diagnostics,
    }
}

/// Checks several specs held in one source map, each on its own (its own namespace), and
/// reports their diagnostics together, sorted.
pub fn check_specs(sources: &SourceMap, specs: &[Vec<FileId>]) -> CheckOutput {
    let mut diagnostics: Vec<Diagnostic> = specs
        .iter()
        .flat_map(|files| check_spec(sources, files).diagnostics)
        .collect();
    sort_and_dedup(&mut diagnostics);
    CheckOutput { diagnostics }
}

/// The spec's identity, recorded in a plan so a runtime can refuse a plan whose spec changed:
/// `sha256:` + hex over every file's name and text, in file order, each length-prefixed so
/// no two different specs hash the same bytes.
pub fn source_digest(sources: &SourceMap) -> String {
    let mut hasher = Sha256::new();
    for file in sources.files() {
        hasher.update((file.name.len() as u64).to_le_bytes());
        hasher.update(file.name.as_bytes());
        hasher.update((file.text.len() as u64).to_le_bytes());
        hasher.update(file.text.as_bytes());
    }
    format!("sha256:{}", crate::plan::hex(&hasher.finalize()))
}

/// Why [`plan`] wrote no plan.
#[derive(Debug)]
pub enum PlanFailure {
    /// The spec has errors; nothing was placed.
    Spec(Vec<Diagnostic>),
    /// The placement engine produced a plan the independent verifier rejects: a bug in the
    /// engine, never written out. The unverified plan is kept for `--debug` inspection.
    Unverified {
        plan: Box<Plan>,
        violations: Vec<Violation>,
    },
}

/// A verified plan and the warnings the spec produced.
pub struct Planned {
    pub ir: Ir,
    pub plan: Plan,
    pub warnings: Vec<Diagnostic>,
}

/// Compiles, places at instant `at` and verifies. The plan returned has passed the verifier
/// and carries its summary; an infeasible plan is still a plan (`plan.feasible == false`),
/// with every unplaced workload explained.
pub fn plan(sources: &SourceMap, at: Timestamp) -> Result<Planned, PlanFailure> {
    plan_live(sources, at, &LivePools::new())
}

/// The capacity of pools as read from their clusters (`berth plan --live`), by `(target,
/// pool)` name. The runtime reads the clusters; the compiler only takes the figures. A pool
/// not named keeps its declared capacity; a name the spec does not have is ignored.
pub type LivePools = BTreeMap<(String, String), LiveCapacity>;

/// Plans as [`plan`] does, each pool of `live` holding no more than its live capacity (never
/// more than it declares): the solver places against it, the verifier checks against it, and
/// the plan's pool ledgers record it as the capacity assumed.
pub fn plan_live(
    sources: &SourceMap,
    at: Timestamp,
    live: &LivePools,
) -> Result<Planned, PlanFailure> {
    plan_compiled(
        compile(sources),
        sources,
        at,
        live,
        Assigner::DEFAULT,
        |_| None,
    )
    .map(|answered| answered.planned)
}

/// Plans as [`plan`] does a spec already compiled to `ir` from `sources`, without compiling
/// it again (the language server keeps the IR of the last edit: a workload hover plans it).
pub fn plan_ir(ir: &Ir, sources: &SourceMap, at: Timestamp) -> Result<Planned, PlanFailure> {
    let compiled = Compilation {
        parsed: Vec::new(),
        ir: Some(ir.clone()),
        diagnostics: Vec::new(),
    };
    plan_compiled(
        compiled,
        sources,
        at,
        &LivePools::new(),
        Assigner::DEFAULT,
        |_| None,
    )
    .map(|answered| answered.planned)
}

/// Sets the live capacity of every pool `live` names.
fn with_live(ir: &mut Ir, live: &LivePools) {
    if live.is_empty() {
        return;
    }
    for target in &mut ir.targets {
        for pool in &mut target.pools {
            if let Some(capacity) = live.get(&(target.name.clone(), pool.name.clone())) {
                pool.live = Some(*capacity);
            }
        }
    }
}

/// The capacity a saved plan assumed per pool (its pool ledgers), as live capacities: a plan
/// made against live allocation is verified against what it saw, and one that assumed the
/// declared capacity is unchanged by it ([`crate::ir::Pool::capped`] never raises one).
fn recorded_live(plan: &Plan) -> LivePools {
    plan.pools
        .iter()
        .map(|l| {
            let capacity = LiveCapacity {
                free: u64::from(l.capacity),
                read: None,
            };
            ((l.target.clone(), l.pool.clone()), capacity)
        })
        .collect()
}

/// How replicas are assigned to pools once eligibility and policy have decided what may go
/// where.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Assigner {
    /// The heuristic alone (`placement::assign`): the default without the `exact` feature.
    Heuristic,
    /// The heuristic, then — where it leaves a workload short — HiGHS looking for an
    /// assignment that places more replicas, class by class, within a node limit, and that
    /// assignment improved by the heuristic's own passes where it finds one
    /// (`placement::exact::raise_replicas`): the default with the `exact` feature. The same
    /// plan on every machine.
    #[cfg(feature = "exact")]
    Raised,
    /// The exact assignment where it can be (`--exact`: HiGHS given `time_limit_s` seconds in
    /// all; `placement::exact`), the heuristic's where it cannot, as [`ExactOutcome`] says.
    #[cfg(feature = "exact")]
    Exact { time_limit_s: f64 },
}

impl Assigner {
    /// What `berth plan` and the editor plan with unless told otherwise: [`Assigner::Raised`]
    /// where the `exact` feature is on (the runtime turns it on), [`Assigner::Heuristic`]
    /// where it is not.
    #[cfg(feature = "exact")]
    pub const DEFAULT: Assigner = Assigner::Raised;
    /// What `berth plan` and the editor plan with unless told otherwise: [`Assigner::Raised`]
    /// where the `exact` feature is on (the runtime turns it on), [`Assigner::Heuristic`]
    /// where it is not.
    #[cfg(not(feature = "exact"))]
    pub const DEFAULT: Assigner = Assigner::Heuristic;
}

/// A verified plan and what was asked of its solve besides it ([`plan_asking`]).
pub struct Answered {
    pub planned: Planned,
    /// Why the engine put no replica of the workload on the target asked about: the rejection
    /// the plan lists, or would list if a large estate's plan did not only count it. `None`
    /// when none was asked, when the target holds replicas of it, or when either name is not
    /// the spec's.
    pub why_not: Option<Rejection>,
    /// With `Assigner::Exact`: how the exact mode ended.
    pub exact: Option<ExactOutcome>,
}

/// Plans a compiled spec (from [`compile`], or [`compile_what_if`] for a what-if file) as
/// [`plan_live`] does, its replicas assigned by `assigner`, and — with `why_not` `(workload,
/// target)`, for `berth explain W T` — says from the same solve why that target holds no
/// replica of that workload.
///
/// An exact plan passes the same verifier; should it not (a bug in berth), the heuristic's
/// plan is returned instead, and the outcome says so.
pub fn plan_asking(
    compiled: Compilation,
    sources: &SourceMap,
    at: Timestamp,
    live: &LivePools,
    assigner: Assigner,
    why_not: Option<(&str, &str)>,
) -> Result<Answered, PlanFailure> {
    let ask = |solved: &placement::Solved<'_>| {
        let (workload, target) = why_not?;
        let w = solved.ir.workload_by_name(workload)?;
        let t = solved.ir.target_by_name(target)?;
        solved.explain(w, t)
    };
    plan_compiled(compiled, sources, at, live, assigner, ask)
}

/// Plans the spec made of the files `base` of `sources` as the what-if file `what_if`
/// changes it, as [`plan_live`] plans a spec: placed at `at` against `live` and verified.
pub fn plan_what_if(
    sources: &SourceMap,
    base: &[FileId],
    what_if: FileId,
    at: Timestamp,
    live: &LivePools,
) -> Result<Planned, PlanFailure> {
    let compiled = compile_what_if(sources, base, what_if);
    plan_compiled(compiled, sources, at, live, Assigner::DEFAULT, |_| None)
        .map(|answered| answered.planned)
}

/// Parses the files `base` of `sources` as one spec changed by the what-if file `what_if`
/// (`docs/language.md`, "What-if files"), and analyses the result: diagnostics point into the
/// base files or the what-if file.
pub fn compile_what_if(sources: &SourceMap, base: &[FileId], what_if: FileId) -> Compilation {
    let base: Vec<FileId> = base.iter().copied().filter(|f| *f != what_if).collect();
    let parsed = parse(sources, &base);
    let Some(overlay) = parse(sources, &[what_if]).pop() else {
        return compile_spec(sources, &base);
    };
    // The parsed files keep their syntax diagnostics through the change.
    let (merged, changes) = crate::what_if::apply(sources, parsed, overlay);
    analyse(sources, merged, changes)
}

/// What `berth check` and the editor report for the what-if file `what_if` of the spec made
/// of the files `base`, whose own diagnostics are `own` (as `berth check` reported them): the
/// diagnostics of the changed spec that the spec alone does not have. Those in a base file
/// are there only because of the change, and say so in a note.
pub fn check_what_if(
    sources: &SourceMap,
    base: &[FileId],
    what_if: FileId,
    own: &[Diagnostic],
) -> Vec<Diagnostic> {
    let name = sources.get(what_if).map_or("", |f| f.name.as_str());
    compile_what_if(sources, base, what_if)
        .diagnostics
        .into_iter()
        .filter(|d| d.primary.span.file == what_if || !own.contains(d))
        .map(|d| {
            if d.primary.span.file == what_if {
                d
            } else {
                d.note(format!(
                    "only with the changes of the what-if file `{name}`"
                ))
            }
        })
        .collect()
}

/// Solves and verifies a compiled spec, its pools as `live` reads them, its replicas assigned
/// by `assigner`; `ask` puts its question to the solve before it is dropped.
fn plan_compiled(
    compiled: Compilation,
    sources: &SourceMap,
    at: Timestamp,
    live: &LivePools,
    assigner: Assigner,
    ask: impl Fn(&placement::Solved<'_>) -> Option<Rejection>,
) -> Result<Answered, PlanFailure> {
    let Some(mut ir) = compiled.ir else {
        return Err(PlanFailure::Spec(compiled.diagnostics));
    };
    with_live(&mut ir, live);
    let digest = source_digest(sources);
    let solve = |ir: &Ir, assigner: Assigner| {
        let (solved, outcome) = match assigner {
            Assigner::Heuristic => (placement::solve(ir, sources, at), None),
            #[cfg(feature = "exact")]
            Assigner::Raised => (placement::solve_raised(ir, sources, at).0, None),
            #[cfg(feature = "exact")]
            Assigner::Exact { time_limit_s } => {
                let (solved, outcome) = placement::solve_exact(ir, sources, at, time_limit_s);
                (solved, Some(outcome))
            }
        };
        let plan = solved.plan(at, &digest, COMPILER_VERSION);
        let why_not = ask(&solved);
        let verdict = verify::verify(ir, &plan, at);
        (plan, why_not, outcome, verdict)
    };
    #[cfg_attr(not(feature = "exact"), allow(unused_mut))]
    let (mut plan, mut why_not, mut outcome, mut verdict) = solve(&ir, assigner);
    // A plan HiGHS shaped that the verifier refuses (a bug in berth) gives way to the
    // heuristic's; with `--exact`, the outcome says so.
    #[cfg(feature = "exact")]
    if let Err(violations) = &verdict {
        let shaped_by_highs =
            assigner == Assigner::Raised || outcome == Some(ExactOutcome::Optimal);
        if shaped_by_highs {
            let refused = ExactOutcome::Unverified {
                violations: violations.len(),
            };
            (plan, why_not, _, verdict) = solve(&ir, Assigner::Heuristic);
            outcome = outcome.map(|_| refused);
        }
    }
    match verdict {
        Ok(summary) => plan.verification = summary,
        Err(violations) => {
            return Err(PlanFailure::Unverified {
                plan: Box::new(plan),
                violations,
            });
        }
    }
    let planned = Planned {
        ir,
        plan,
        warnings: compiled.diagnostics,
    };
    Ok(Answered {
        planned,
        why_not,
        exact: outcome,
    })
}

/// A saved plan checked again against its spec, freshly compiled (`berth verify`, and every
/// command that applies a saved plan).
pub struct Reverified {
    pub ir: Ir,
    /// The spec's warnings (a spec with errors gives [`ReverifyFailure::Spec`]).
    pub warnings: Vec<Diagnostic>,
    /// The spec's digest now ([`source_digest`]): a plan made from other sources records
    /// another.
    pub source_digest: String,
    /// The independent verifier's verdict at the plan's instant; `None` when the plan's
    /// `at` is not an RFC 3339 instant ([`plan_instant`]), so nothing could be checked.
    pub verdict: Option<Result<crate::plan::Verification, Vec<Violation>>>,
}

impl Reverified {
    /// Whether the plan was made from these very sources.
    pub fn digest_matches(&self, plan: &Plan) -> bool {
        self.source_digest == plan.source_digest
    }
}

/// Why [`reverify`] has no verdict.
#[derive(Debug)]
pub enum ReverifyFailure {
    /// The spec has errors: every diagnostic, sorted.
    Spec(Vec<Diagnostic>),
}

/// The instant a plan records (`at`, RFC 3339), or `None` when the text is not one.
pub fn plan_instant(plan: &Plan) -> Option<Timestamp> {
    plan.at.parse::<Timestamp>().ok()
}

/// The instant a plan is made at when none is given: `now` to the whole second (a plan
/// records its instant, and nobody plans to the nanosecond). Every command that plans
/// reads the clock once and passes it through here, so `berth plan` and `berth apply SPEC`
/// record the same instant for the same moment.
pub fn plan_instant_from(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// The one door for a saved plan: compiles the spec in `sources` (named as when it was
/// planned), digests it, and runs the independent verifier on `plan` at the instant the plan
/// records, against the capacity its pool ledgers say it assumed where that is less than the
/// spec declares (a plan made with `--live`; never more: a ledger above the spec is a
/// violation). The caller decides what a digest mismatch or a violation means for it
/// (`berth verify` reports both, `berth apply` refuses).
pub fn reverify(sources: &SourceMap, plan: &Plan) -> Result<Reverified, ReverifyFailure> {
    let compiled = compile(sources);
    let Some(mut ir) = compiled.ir else {
        return Err(ReverifyFailure::Spec(compiled.diagnostics));
    };
    with_live(&mut ir, &recorded_live(plan));
    let verdict = plan_instant(plan).map(|at| verify::verify(&ir, plan, at));
    Ok(Reverified {
        source_digest: source_digest(sources),
        ir,
        warnings: compiled.diagnostics,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_come_out_in_file_order() {
        let mut map = SourceMap::new();
        map.add("a.berth", "const a = 2\n");
        map.add("b.berth", "const b = $\n");
        map.add("c.berth", "const c = #\n");
        let out = check(&map);
        assert!(out.has_errors());
        let files: Vec<u32> = out
            .diagnostics
            .iter()
            .map(|d| d.primary.span.file.0)
            .collect();
        assert_eq!(files, vec![1, 2]);
        assert!(
            out.diagnostics
                .iter()
                .all(|d| d.code == Code::UnexpectedChar)
        );
    }

    #[test]
    fn clean_sources_have_no_diagnostics() {
        let mut map = SourceMap::new();
        map.add("a.berth", "const replicas = 2\n");
        let out = check(&map);
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
    }

    #[test]
    fn semantic_mistakes_are_reported() {
        let mut map = SourceMap::new();
        map.add("a.berth", "workload a {\n  replica = 2\n}\n");
        let out = check(&map);
        assert!(out.has_errors());
    }

    #[test]
    fn specs_are_separate_namespaces() {
        let mut map = SourceMap::new();
        let a = map.add("one/a.berth", "const x = 1\n");
        let b = map.add("two/b.berth", "const x = 2\n");
        assert!(check(&map).has_errors(), "one namespace: `x` defined twice");
        assert!(!check_specs(&map, &[vec![a], vec![b]]).has_errors());
    }

    #[test]
    fn digest_tells_file_boundaries_apart() {
        let mut one = SourceMap::new();
        one.add("a.berth", "ab");
        one.add("b.berth", "c");
        let mut two = SourceMap::new();
        two.add("a.berth", "a");
        two.add("b.berth", "bc");
        assert_ne!(source_digest(&one), source_digest(&two));
        assert_eq!(source_digest(&one), source_digest(&one.clone()));
    }
}
