//! `berth check PATH…`: every spec under the paths checked on its own (one directory is one
//! spec), and every what-if file (`NAME.what-if.berth`) against the spec of its directory;
//! diagnostics printed; `--emit ir` also prints the IR of exactly one spec.

use crate::files::{self, FsReader};
use crate::report::{Exit, OutputFormat, Ui};
use std::io;
use std::path::PathBuf;

/// A compiled form `berth check --emit` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    /// The typed intermediate representation, as JSON (for debugging the compiler).
    Ir,
}

/// Runs `berth check PATH… [--emit ir]`.
pub fn run(paths: &[PathBuf], emit: Option<Emit>, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let loaded = match files::load(paths, &FsReader) {
        Ok(loaded) => loaded,
        Err(errors) => return super::load_failed(&errors, ui),
    };
    let specs = loaded.specs();
    if let Some(Emit::Ir) = emit {
        return check_emit_ir(&loaded, &specs, ui);
    }
    let mut output = berth_compiler::driver::check_specs(&loaded.sources, &specs);
    // Each what-if file against the spec of its directory, whose own diagnostics are among
    // those just reported (another spec's never match the changed spec's).
    let what_ifs: Vec<_> = loaded
        .what_ifs()
        .into_iter()
        .flat_map(|(what_if, base)| {
            berth_compiler::driver::check_what_if(
                &loaded.sources,
                &base,
                what_if,
                &output.diagnostics,
            )
        })
        .collect();
    output.diagnostics.extend(what_ifs);
    berth_compiler::diagnostics::sort_and_dedup(&mut output.diagnostics);
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
        writeln!(ui.out, "{}", berth_compiler::driver::ir_to_json(ir))?;
    }
    // Stdout holds the IR: diagnostics go to stderr as for people, whatever `--output` says.
    let mut human = Ui {
        out: &mut *ui.out,
        err: &mut *ui.err,
        output: OutputFormat::Human,
        color: ui.color,
        error_limit: ui.error_limit,
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
