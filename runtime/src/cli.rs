//! The `berth` command line: argument parsing (clap), dispatch to commands, exit codes.
//!
//! Conventions (PRODUCT.md): human output by default, `--output json` for machines, no colour
//! unless stderr is a terminal and `NO_COLOR` is unset, and exit codes
//! 0 clean / 1 errors found / 2 usage or environment problem.

use crate::files::{self, FsReader, LoadError};
use crate::fmt::{self, FmtMode};
use crate::report::{ColorChoice, Environment, OutputFormat, Ui};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;

/// How a run ended; the process exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Nothing to report (0).
    Clean = 0,
    /// The sources have errors, or `fmt --check` found files to reformat (1).
    ErrorsFound = 1,
    /// Bad usage, unreadable input or a failing environment: nothing was checked (2).
    Trouble = 2,
}

impl Exit {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// berth compiles workload, target and policy specifications into a verified placement plan.
#[derive(Debug, Parser)]
#[command(name = "berth", version, arg_required_else_help = true)]
pub struct Cli {
    /// Output format: diagnostics for people (stderr) or one JSON document (stdout).
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
    /// When to colour output: `auto` colours only a terminal, and not when NO_COLOR is set.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
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
    Plan(crate::planning::PlanArgs),
    /// Why a workload went where it went, and why not elsewhere.
    Explain(crate::planning::ExplainArgs),
    /// Re-check a saved plan against its spec.
    Verify(crate::planning::VerifyArgs),
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
    Keys(crate::agent::cli::KeysCommand),
    /// Run the edge agent: pull signed bundles, run their workloads, buffer telemetry.
    Agent(crate::agent::cli::AgentArgs),
    /// Run the language server on stdin and stdout (for editors; see docs/editors.md).
    Lsp,
    /// Render the plan's Kubernetes objects as YAML, one file per cluster and namespace.
    Render(crate::apply::RenderArgs),
    /// Server-side apply the plan to its clusters (`--dry-run` shows a diff per object).
    Apply(crate::apply::ApplyArgs),
    /// Show what `apply` would change, from the servers' dry run.
    Diff(crate::apply::DiffArgs),
    /// Record an approval of a saved plan's placements (`PLAN.approval.json`).
    Approve(crate::apply::ApproveArgs),
    /// Desired vs ready replicas and live GPU allocation of the plan's clusters.
    Status(crate::apply::StatusArgs),
}

/// A compiled form `berth check --emit` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    /// The typed intermediate representation, as JSON (for debugging the compiler).
    Ir,
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

/// Runs the command line `args` (program name first), printing to `out` and `err`.
pub fn run(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    env: Environment,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return clap_error(&e, env, out, err),
    };
    let mut ui = Ui {
        out,
        err,
        output: cli.output,
        color: env.use_color(cli.color),
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
        Command::Check { emit, paths } => check(&paths, emit, ui),
        Command::Plan(args) => crate::planning::plan::run(&args, ui),
        Command::Explain(args) => crate::planning::explain::run(&args, ui),
        Command::Verify(args) => crate::planning::verify::run(&args, ui),
        Command::Fmt { check, paths } => {
            let mode = if check {
                FmtMode::Check
            } else {
                FmtMode::Write
            };
            format_files(&paths, mode, ui)
        }
        Command::Keys(command) => crate::agent::cli::keys(command, ui),
        Command::Agent(args) => crate::agent::cli::agent(args, ui),
        Command::Lsp => Ok(crate::lsp::main()),
        Command::Render(args) => crate::apply::render(&args, ui),
        Command::Apply(args) => crate::apply::apply(&args, ui),
        Command::Diff(args) => crate::apply::diff(&args, ui),
        Command::Approve(args) => crate::apply::approve(&args, ui),
        Command::Status(args) => crate::apply::status(&args, ui),
    }
}

fn check(paths: &[PathBuf], emit: Option<Emit>, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let loaded = match files::load(paths, &FsReader) {
        Ok(loaded) => loaded,
        Err(errors) => return load_failed(&errors, ui),
    };
    let specs = loaded.specs();
    if let Some(Emit::Ir) = emit {
        return check_emit_ir(&loaded, &specs, ui);
    }
    let output = berth_compiler::driver::check_specs(&loaded.sources, &specs);
    ui.diagnostics(&output.diagnostics, &loaded.sources, serde_json::Map::new())?;
    ui.summary(&output.diagnostics, loaded.sources.len())?;
    Ok(if output.has_errors() {
        Exit::ErrorsFound
    } else {
        Exit::Clean
    })
}

/// `check --emit ir`: the IR of exactly one spec on stdout, diagnostics as usual on stderr.
fn check_emit_ir(
    loaded: &files::Loaded,
    specs: &[Vec<berth_compiler::source::FileId>],
    ui: &mut Ui<'_>,
) -> io::Result<Exit> {
    let [spec] = specs else {
        ui.problem(
            &format_args!(
                "`--emit ir` takes one spec, but the paths hold {}",
                specs.len()
            ),
            Some("name one spec directory (its files form one spec)"),
        )?;
        return Ok(Exit::Trouble);
    };
    let compiled = berth_compiler::driver::compile_spec(&loaded.sources, spec);
    if let Some(ir) = &compiled.ir {
        writeln!(ui.out, "{}", berth_compiler::sema::ir_to_json(ir))?;
    }
    // Stdout holds the IR: diagnostics go to stderr as for people, whatever `--output` says.
    let mut human = Ui {
        out: &mut *ui.out,
        err: &mut *ui.err,
        output: OutputFormat::Human,
        color: ui.color,
    };
    human.diagnostics(
        &compiled.diagnostics,
        &loaded.sources,
        serde_json::Map::new(),
    )?;
    human.summary(&compiled.diagnostics, spec.len())?;
    Ok(if compiled.has_errors() {
        Exit::ErrorsFound
    } else {
        Exit::Clean
    })
}

fn format_files(paths: &[PathBuf], mode: FmtMode, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let Some(formatter) = fmt::FORMATTER else {
        ui.problem(
            &"`berth fmt` is not available in this build: it has no formatter yet",
            Some("`berth check` still reports syntax errors"),
        )?;
        return Ok(Exit::Trouble);
    };
    let loaded = match files::load(paths, &FsReader) {
        Ok(loaded) => loaded,
        Err(errors) => return load_failed(&errors, ui),
    };
    fmt::run(&loaded, mode, formatter, ui)
}

fn load_failed(errors: &[LoadError], ui: &mut Ui<'_>) -> io::Result<Exit> {
    for error in errors {
        ui.problem(error, Some(error.hint()))?;
    }
    Ok(Exit::Trouble)
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
