//! The `berth` command line: argument parsing (clap) and dispatch to [`crate::commands`],
//! one module per command; [`Exit`] is the exit code they end with.
//!
//! Conventions (PRODUCT.md): human output by default, `--output json` for machines, no colour
//! unless stderr is a terminal and `NO_COLOR` is unset, and exit codes
//! 0 clean / 1 errors found / 2 usage or environment problem.

use crate::commands::{self, check::Emit, fmt::FmtMode};
use crate::report::{ColorChoice, Environment, Exit, OutputFormat, Ui};
use berth_compiler::diagnostics::render::DEFAULT_ERROR_LIMIT;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;

/// berth compiles workload, target and policy specifications into a verified placement plan.
#[derive(Debug, Parser)]
#[command(name = "berth", version, arg_required_else_help = true)]
pub struct Cli {
    /// Output format: for people (stderr), one JSON document (stdout), a Markdown report
    /// (`plan`, `plan-diff`) or SARIF 2.1.0 diagnostics (`check`), both on stdout.
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
    /// When to colour output: `auto` colours only a terminal, and not when NO_COLOR is set.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Diagnostics shown per file; the rest are counted, not shown (0 shows all).
    #[arg(long, global = true, value_name = "N", default_value_t = DEFAULT_ERROR_LIMIT)]
    pub error_limit: usize,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check sources for errors without planning. Each directory's files form one spec.
    Check {
        /// Also print a compiled form on stdout (one spec only).
        #[arg(long, value_enum, value_name = "FORM")]
        emit: Option<Emit>,
        /// `.berth` files, or directories searched recursively for them.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Place a spec's workloads: a verified plan, printed or saved (`-o FILE`).
    Plan(commands::plan::PlanArgs),
    /// Why a workload went where it went, and why not elsewhere.
    Explain(commands::explain::ExplainArgs),
    /// Re-check a saved plan against its spec.
    Verify(commands::verify::VerifyArgs),
    /// What changes from one saved plan to another: moves, losses, saturation, cost, approvals.
    PlanDiff(commands::plan_diff::PlanDiffArgs),
    /// Rewrite sources in the canonical layout.
    Fmt {
        /// Write nothing: list the files that would change and fail if there are any.
        #[arg(long)]
        check: bool,
        /// `.berth` files, or directories searched recursively for them.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Manage the control plane's bundle-signing keys.
    #[command(subcommand)]
    Keys(commands::keys::KeysCommand),
    /// Run the edge agent: pull signed bundles, run their workloads, buffer telemetry.
    Agent(commands::agent::AgentArgs),
    /// Carried bundles for air-gapped sites: `export` writes an edge target's signed bundle
    /// and its model artifacts as an OCI image layout (`berth agent --import DIR` runs it).
    #[command(subcommand)]
    Bundle(commands::bundle::BundleCommand),
    /// Run the language server on stdin and stdout (for editors; see docs/editors.md).
    Lsp,
    /// Render the plan's Kubernetes objects as YAML, one file per cluster and namespace.
    Render(commands::render::RenderArgs),
    /// Server-side apply the plan to its clusters (`--dry-run` shows a diff per object).
    Apply(commands::apply::ApplyArgs),
    /// Show what `apply` would change, from the servers' dry run.
    Diff(commands::diff::DiffArgs),
    /// Record an approval of a saved plan's placements (`PLAN.approval.json`).
    Approve(commands::approve::ApproveArgs),
    /// Desired vs ready replicas and live GPU allocation of the plan's clusters.
    Status(commands::status::StatusArgs),
    /// Live GPU allocation across the plan's targets: per pool, workload and identity, idle
    /// allocations flagged (a refreshing view on a terminal, `--once` for a table).
    Top(commands::top::TopArgs),
    /// Reclaim idle GPUs on the plan's Kubernetes targets as its `reclaim` rules say (DCGM
    /// utilisation per pod; `--watch` to see idleness over time, `--dry-run` to change nothing).
    Reclaim(commands::reclaim::ReclaimArgs),
    /// Pull a model artifact into a staging directory and verify its digest (`--check`: is it
    /// there?). Run by the staging Job and init container berth renders on Kubernetes.
    Fetch(commands::fetch::FetchArgs),
    /// The audit trail of plans saved, approvals, applies, reclaims and bundles accepted:
    /// shown, verified (`--verify`: the hash chain) or exported (`--jsonl`).
    Audit(commands::audit::AuditArgs),
}

impl Command {
    /// The subcommand as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Check { .. } => "check",
            Command::Plan(_) => "plan",
            Command::Explain(_) => "explain",
            Command::Verify(_) => "verify",
            Command::PlanDiff(_) => "plan-diff",
            Command::Fmt { .. } => "fmt",
            Command::Keys(_) => "keys",
            Command::Agent(_) => "agent",
            Command::Bundle(_) => "bundle",
            Command::Lsp => "lsp",
            Command::Render(_) => "render",
            Command::Apply(_) => "apply",
            Command::Diff(_) => "diff",
            Command::Approve(_) => "approve",
            Command::Status(_) => "status",
            Command::Fetch(_) => "fetch",
            Command::Top(_) => "top",
            Command::Reclaim(_) => "reclaim",
            Command::Audit(_) => "audit",
        }
    }
}

/// Runs the command line of this process and returns its exit code.
pub fn main() -> i32 {
    // Not locked for the whole run: `berth lsp` writes stdout from its own writer thread.
    let exit = run(
        std::env::args_os(),
        Environment::detect(),
        &mut io::stdout(),
        &mut io::stderr(),
    );
    exit.code()
}

/// The agent's log on stderr (`tracing`), one line per event: berth's own events at `info`
/// and above (bundles accepted and refused, HTTP requests refused, a corrupt state database
/// recovered); the libraries' events are left out. Not colored, so it reads the same in a
/// journal and a terminal.
fn agent_logs() {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let ours = tracing_subscriber::filter::Targets::new()
        .with_target("berth_runtime", tracing::Level::INFO);
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(io::stderr)
        .with_target(false)
        .with_filter(ours);
    // Already set (the command line run twice in one process, as tests do): keep it.
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// Runs the command line `args` (program name first), printing to `out` and `err`.
pub fn run(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    env: Environment,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            let exit = clap_error(&e, env, out, err);
            // Under `--detailed-exitcode`, 2 means "changes present": a usage error is 1.
            let detailed = args.iter().any(|a| a == "--detailed-exitcode");
            return if detailed { exit.detailed(false) } else { exit };
        }
    };
    if let Some(commands) = cli.output.only_for()
        && !commands.contains(&cli.command.name())
    {
        let mut ui = Ui {
            out,
            err,
            output: OutputFormat::Human,
            color: env.use_color(cli.color),
            error_limit: cli.error_limit,
        };
        let hint = format!(
            "`--output {}` is for {}; use `human` or `json` here",
            cli.output.name(),
            commands
                .iter()
                .map(|c| format!("`berth {c}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        );
        let _ = ui.problem(
            &format_args!(
                "`berth {}` cannot print `--output {}`",
                cli.command.name(),
                cli.output.name()
            ),
            Some(&hint),
        );
        return Exit::Trouble;
    }
    let mut ui = Ui {
        out,
        err,
        output: cli.output,
        color: env.use_color(cli.color),
        error_limit: cli.error_limit,
    };
    // A closed stdout or stderr (`berth check . | head -1`) is an environment problem; there
    // is nowhere left to say so.
    dispatch(cli.command, &mut ui).unwrap_or(Exit::Trouble)
}

/// Help and version go to stdout with exit 0; usage errors to stderr with exit 2.
fn clap_error(e: &clap::Error, env: Environment, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let rendered = e.render();
    let text = if env.use_color(ColorChoice::Auto) {
        rendered.ansi().to_string()
    } else {
        rendered.to_string()
    };
    // Nothing useful can be done if printing the usage message itself fails.
    let _ = if e.use_stderr() {
        err.write_all(text.as_bytes())
    } else {
        out.write_all(text.as_bytes())
    };
    if e.exit_code() == 0 {
        Exit::Clean
    } else {
        Exit::Trouble
    }
}

fn dispatch(command: Command, ui: &mut Ui<'_>) -> io::Result<Exit> {
    match command {
        Command::Check { emit, paths } => commands::check::run(&paths, emit, ui),
        Command::Plan(args) => commands::plan::run(&args, ui),
        Command::Explain(args) => commands::explain::run(&args, ui),
        Command::Verify(args) => commands::verify::run(&args, ui),
        Command::PlanDiff(args) => commands::plan_diff::run(&args, ui),
        Command::Fmt { check, paths } => {
            let mode = if check {
                FmtMode::Check
            } else {
                FmtMode::Write
            };
            commands::fmt::run_paths(&paths, mode, ui)
        }
        Command::Keys(command) => commands::keys::run(command, ui),
        Command::Agent(args) => {
            agent_logs();
            commands::agent::run(args, ui)
        }
        Command::Bundle(command) => commands::bundle::run(&command, ui),
        Command::Lsp => Ok(crate::lsp::main()),
        Command::Render(args) => commands::render::run(&args, ui),
        Command::Apply(args) => commands::apply::run(&args, ui),
        Command::Diff(args) => commands::diff::run(&args, ui),
        Command::Approve(args) => commands::approve::run(&args, ui),
        Command::Status(args) => commands::status::run(&args, ui),
        Command::Fetch(args) => commands::fetch::run(&args, ui),
        Command::Top(args) => commands::top::run(&args, ui),
        Command::Reclaim(args) => commands::reclaim::run(&args, ui),
        Command::Audit(args) => commands::audit::run(&args, ui),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Environment = Environment {
        stderr_is_terminal: false,
        no_color: false,
    };

    fn run_args(args: &[&str]) -> (Exit, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let exit = run(
            std::iter::once("berth").chain(args.iter().copied()),
            PLAIN,
            &mut out,
            &mut err,
        );
        let text = |v: Vec<u8>| String::from_utf8(v).expect("UTF-8");
        (exit, text(out), text(err))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn help_and_version_exit_zero_on_stdout() {
        let (exit, out, _) = run_args(&["--help"]);
        assert_eq!(exit, Exit::Clean);
        assert!(out.contains("check"), "{out}");
        let (exit, out, _) = run_args(&["--version"]);
        assert_eq!(exit, Exit::Clean);
        assert!(out.starts_with("berth "), "{out}");
    }

    #[test]
    fn usage_errors_exit_two() {
        for args in [
            &[][..],
            &["check"],
            &["frobnicate"],
            &["check", "--output", "xml", "."],
        ] {
            let (exit, _, err) = run_args(args);
            assert_eq!(exit, Exit::Trouble, "{args:?}: {err}");
        }
    }

    #[test]
    fn broken_stdout_is_trouble_not_a_panic() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("a.berth"), "workload a {\n}\n").expect("write");
        let path = dir.path().to_string_lossy().into_owned();
        let args = ["berth", "--output", "json", "check", path.as_str()];
        let exit = run(args, PLAIN, &mut Closed, &mut Closed);
        assert_eq!(exit, Exit::Trouble);
    }
}
