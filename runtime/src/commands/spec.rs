//! What `plan`, `explain` and `verify` share: loading one spec, the plan instant, and
//! printing verifier violations.
//!
//! A spec is planned with its files named relative to the spec directory (`workloads.berth`,
//! not `examples/three-plants/workloads.berth`; [`files::relative_sources`]), so the source
//! digest and every source reference in a plan are the same wherever `berth` is run from
//! and however the directory is spelled; diagnostics still show the paths as given.

use crate::backends::k8s;
use crate::files::{self, FsReader};
use crate::report::{Exit, OutputFormat, Ui};
use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::diagnostics::render::render_terminal;
use berth_compiler::driver::Violation;
use berth_compiler::driver::{self, PlanFailure, Planned};
use berth_compiler::plan::{Plan, Rejection};
use berth_compiler::source::{FileId, SourceMap, Span};
use jiff::Timestamp;
use std::io;
use std::path::{Path, PathBuf};

/// One spec, read from disk.
pub struct Spec {
    /// Files named relative to the spec directory: what is planned and digested.
    pub sources: SourceMap,
    /// The same files (same ids) named as given on the command line: for rendering.
    pub shown: SourceMap,
    /// The files' paths (same ids): what no command may write over.
    pub paths: Vec<PathBuf>,
}

/// Loads the spec at `path` (a directory whose `.berth` files form one spec, or one file).
/// On failure the problem is printed and the exit code returned.
pub fn load(path: &Path, ui: &mut Ui<'_>) -> io::Result<Result<Spec, Exit>> {
    let loaded = match files::load(&[path.to_path_buf()], &FsReader) {
        Ok(loaded) => loaded,
        Err(errors) => {
            for error in &errors {
                ui.problem(error, Some(error.hint()))?;
            }
            return Ok(Err(Exit::Trouble));
        }
    };
    let specs = loaded.specs();
    if specs.len() != 1 {
        ui.problem(
            &format_args!(
                "`{}` holds {} specs (one per directory with `.berth` files); berth plans one",
                path.display(),
                specs.len()
            ),
            Some("name the directory of one spec"),
        )?;
        return Ok(Err(Exit::Trouble));
    }
    Ok(Ok(Spec {
        sources: files::relative_sources(path, &loaded),
        shown: loaded.sources,
        paths: loaded.paths,
    }))
}

/// A spec and its verified plan: what `plan` and `explain` work from.
pub struct SpecPlanned {
    pub spec: Spec,
    pub planned: Planned,
    /// With `--live`: the pools' capacity as read from the clusters (empty otherwise).
    pub live: driver::LivePools,
    /// For `explain W T`: why the engine put no replica of `W` on `T` (see [`load_and_plan`]).
    pub why_not: Option<Rejection>,
    /// With `--exact` ([`Question::assigner`]): how the exact mode ended.
    pub exact: Option<driver::ExactOutcome>,
    /// With a what-if file: the spec's own files, and the what-if file's id.
    pub what_if: Option<(Vec<FileId>, FileId)>,
}

/// What is asked of the solve besides the plan.
#[derive(Clone, Copy, Debug)]
pub struct Question<'a> {
    /// `explain W T`: also why the engine put no replica of `W` on `T`.
    pub why_not: Option<(&'a str, &'a str)>,
    /// How replicas are assigned: by default the heuristic, its replicas raised where HiGHS
    /// finds more (`driver::Assigner::DEFAULT`); with `--exact` the exact mode.
    pub assigner: driver::Assigner,
}

/// `--exact` and its time limit, as `plan` and `explain` take them.
#[derive(Debug, clap::Args)]
pub struct ExactArgs {
    /// Assign replicas with an exact MIP solver (HiGHS) where the estate is small enough to
    /// solve in `--exact-time-limit`; otherwise (and says so) as without it: the heuristic,
    /// its replicas raised where HiGHS finds more within a node limit.
    #[arg(long)]
    pub exact: bool,
    /// Seconds HiGHS may take with `--exact` (shared evenly between its stages).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30.0,
        requires = "exact"
    )]
    pub exact_time_limit: f64,
}

impl ExactArgs {
    /// How replicas are to be assigned; a time limit that is no positive number of seconds is
    /// printed (exit 2).
    pub fn assigner(&self, ui: &mut Ui<'_>) -> io::Result<Result<driver::Assigner, Exit>> {
        if !self.exact {
            return Ok(Ok(driver::Assigner::DEFAULT));
        }
        if !(self.exact_time_limit > 0.0 && self.exact_time_limit.is_finite()) {
            ui.problem(
                &format_args!(
                    "`--exact-time-limit {}` is not a positive number of seconds",
                    self.exact_time_limit
                ),
                Some("give HiGHS some seconds, such as `--exact-time-limit 30`"),
            )?;
            return Ok(Err(Exit::Trouble));
        }
        Ok(Ok(driver::Assigner::Exact {
            time_limit_s: self.exact_time_limit,
        }))
    }
}

/// What `plan` and `explain` share: the instant (`--at` or now), the spec at `path`, and its
/// verified plan, with — for `explain W T` (`why_not`) — the engine's reason why target `T`
/// holds no replica of `W`, from the same solve. Every failure is printed here (a spec with
/// errors: its diagnostics; a plan the verifier rejects: the violations) and its exit code
/// returned.
///
/// With `what_if` (`explain --what-if FILE`), the spec is planned as that what-if file changes
/// it; the file joins the spec's sources, so excerpts and diagnostics can point into it.
pub fn load_and_plan(
    path: &Path,
    at: Option<&str>,
    question: Question<'_>,
    what_if: Option<&Path>,
    live: bool,
    ui: &mut Ui<'_>,
) -> io::Result<Result<SpecPlanned, Exit>> {
    let at = match instant(at, ui)? {
        Ok(at) => at,
        Err(exit) => return Ok(Err(exit)),
    };
    let mut spec = match load(path, ui)? {
        Ok(spec) => spec,
        Err(exit) => return Ok(Err(exit)),
    };
    let changes = match what_if {
        None => None,
        Some(file) => match add_what_if(&mut spec, file, ui)? {
            Ok(changes) => Some(changes),
            Err(exit) => return Ok(Err(exit)),
        },
    };
    let live = if live {
        read_live(&spec, ui)?
    } else {
        driver::LivePools::new()
    };
    let sources = &spec.sources;
    let compiled = match &changes {
        None => driver::compile(sources),
        Some((base, file)) => driver::compile_what_if(sources, base, *file),
    };
    let planned = driver::plan_asking(
        compiled,
        sources,
        at,
        &live,
        question.assigner,
        question.why_not,
    );
    match planned {
        Ok(driver::Answered {
            planned,
            why_not,
            exact,
        }) => {
            print_live(&live, &planned.plan, ui)?;
            Ok(Ok(SpecPlanned {
                spec,
                planned,
                live,
                why_not,
                exact,
                what_if: changes,
            }))
        }
        Err(PlanFailure::Spec(diags)) => {
            ui.diagnostics(&diags, &spec.shown, serde_json::Map::new())?;
            ui.summary(&diags, spec.shown.len())?;
            ui.status(&"no plan: the spec has errors")?;
            Ok(Err(Exit::ErrorsFound))
        }
        Err(PlanFailure::Unverified { violations, .. }) => {
            ui.problem(
                &"the placement engine made a plan that the verifier rejects; no plan was written",
                Some("this is a bug in berth: please report it with the spec and the `--at` used"),
            )?;
            print_violations(&violations, &spec.shown, serde_json::Map::new(), ui)?;
            Ok(Err(Exit::ErrorsFound))
        }
    }
}

/// Adds the what-if file at `path` to `spec` (planned sources and shown ones, under the path
/// as given): the spec's own files and the what-if file's id. A file that cannot be read is
/// printed (exit 2).
pub fn add_what_if(
    spec: &mut Spec,
    path: &Path,
    ui: &mut Ui<'_>,
) -> io::Result<Result<(Vec<FileId>, FileId), Exit>> {
    let text = match files::read_source(path, driver::MAX_FILE_BYTES) {
        Ok(text) => text,
        Err(error) => {
            ui.problem(&error, Some(error.hint()))?;
            return Ok(Err(Exit::Trouble));
        }
    };
    let name = path.display().to_string();
    let base = driver::all_files(&spec.sources);
    let id = spec.sources.add(name.clone(), text.clone());
    spec.shown.add(name, text);
    Ok(Ok((base, id)))
}

/// `--live`: the capacity of every Kubernetes target's pools as its cluster says
/// ([`k8s::live`]; each pool's figures are printed once planned: `print_live`); a context that cannot be read is named there too
/// (never its credentials), and its targets keep the capacity the spec declares. A spec with
/// errors reads nothing (planning reports them).
fn read_live(spec: &Spec, ui: &mut Ui<'_>) -> io::Result<driver::LivePools> {
    let Some(ir) = driver::compile(&spec.sources).ir else {
        return Ok(driver::LivePools::new());
    };
    let read = k8s::live::read(&ir, &k8s::kubeconfig::Kubeconfigs::load());
    for unread in &read.unread {
        writeln!(
            ui.err,
            "warning: `--live` could not read context `{}`: {}; {} planned with the capacity \
             the spec declares",
            unread.context,
            unread.why,
            unread
                .targets
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    for (target, pool) in &read.unlabelled {
        writeln!(
            ui.err,
            "note: `--live` cannot tell the nodes of pool `{target}/{pool}` apart (the spec \
             gives it no `node_labels`); it is planned with the capacity the spec declares"
        )?;
    }
    Ok(read.pools)
}

/// One line per pool read live: the figures, the capacity the plan assumed (its ledger) and
/// what it places there.
fn print_live(live: &driver::LivePools, plan: &Plan, ui: &mut Ui<'_>) -> io::Result<()> {
    for ledger in &plan.pools {
        let key = (ledger.target.clone(), ledger.pool.clone());
        let Some(read) = live.get(&key).and_then(|c| c.read) else {
            continue;
        };
        writeln!(
            ui.err,
            "live: pool `{}/{}`: {} allocatable, {} held by pods berth does not manage; \
             capacity {} for this plan, {} placed",
            ledger.target,
            ledger.pool,
            read.allocatable,
            read.held,
            ledger.capacity,
            ledger.allocated
        )?;
    }
    Ok(())
}

/// The plan instant when none is given: the clock read once, to the whole second
/// (`driver::plan_instant_from`). Every command that plans a spec now calls this.
pub fn now() -> Timestamp {
    driver::plan_instant_from(Timestamp::now())
}

/// The plan instant: `--at` (RFC 3339 with `Z` or an offset) or [`now`].
/// On a malformed value the problem is printed and `Exit::Trouble` returned.
pub fn instant(at: Option<&str>, ui: &mut Ui<'_>) -> io::Result<Result<Timestamp, Exit>> {
    let Some(text) = at else {
        return Ok(Ok(now()));
    };
    match text.parse::<Timestamp>() {
        Ok(at) => Ok(Ok(at)),
        Err(e) => {
            ui.problem(
                &format_args!("`--at {text}` is not an RFC 3339 instant: {e}"),
                Some(
                    "write a date, a time and a UTC offset, such as `2025-06-04T08:00:00Z` or \
                     `2025-06-04T10:00:00+02:00`",
                ),
            )?;
            Ok(Err(Exit::Trouble))
        }
    }
}

/// Prints verifier violations: in human mode each as a diagnostic (with the spec excerpt when
/// it points into the spec), in JSON mode one document `{verified: false, diagnostics, …}`.
pub fn print_violations(
    violations: &[Violation],
    sources: &SourceMap,
    extra: serde_json::Map<String, serde_json::Value>,
    ui: &mut Ui<'_>,
) -> io::Result<()> {
    let diags: Vec<Diagnostic> = violations.iter().map(Violation::diagnostic).collect();
    if ui.output == OutputFormat::Json {
        let mut extra = extra;
        extra.insert("verified".into(), false.into());
        return ui.diagnostics(&diags, sources, extra);
    }
    for d in &diags {
        // Violations of the plan alone (its id, its format) point nowhere in the spec.
        if d.primary.span == Span::default() && d.labels.is_empty() {
            ui.problem(&format_args!("[{}] {}", d.code.as_str(), d.message), None)?;
            for note in &d.notes {
                writeln!(ui.err, "  note: {note}")?;
            }
            if let Some(help) = &d.help {
                writeln!(ui.err, "  help: {help}")?;
            }
            writeln!(ui.err)?;
        } else {
            ui.err.write_all(
                render_terminal(std::slice::from_ref(d), sources, ui.color).as_bytes(),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn violations_point_into_the_spec_or_stand_alone() {
        let mut sources = SourceMap::new();
        let file = sources.add("targets.berth", "target lyon {\n}\n");
        let violations = [
            Violation::PlanIdMismatch {
                recorded: "sha256:0".into(),
                computed: "sha256:1".into(),
            },
            Violation::PoolOverCommitted {
                target: "lyon".into(),
                pool: "l4".into(),
                allocated: 11,
                capacity: 8,
                span: Span::new(file, 7, 11),
            },
        ];
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut ui = Ui {
            out: &mut out,
            err: &mut err,
            output: OutputFormat::Human,
            color: false,
            error_limit: berth_compiler::diagnostics::render::DEFAULT_ERROR_LIMIT,
        };
        print_violations(&violations, &sources, serde_json::Map::new(), &mut ui).expect("print");
        let text = String::from_utf8(err).expect("UTF-8");
        assert!(
            text.starts_with("error: [E0603] plan id `sha256:0` does not match"),
            "{text}"
        );
        assert!(
            text.contains("  note: its content hashes to `sha256:1`"),
            "{text}"
        );
        assert!(
            text.contains("[E0615] Error: pool `l4` of `lyon` is over-committed: 11 GPUs allocated, 8 available"),
            "{text}"
        );
        assert!(text.contains("targets.berth:1:8"), "{text}");
        assert!(out.is_empty());
    }
}
