//! Semantics: names, types, units and the standard library. Turns parsed files into the
//! typed [`Ir`], or into diagnostics for every mistake visible in the text.
//!
//! Pipeline (each step keeps going after errors, so one run reports them all):
//! 1. [`resolve`]: collect definitions of the standard library and the spec's files, one
//!    namespace per spec, and resolve `use` imports.
//! 2. [`lower`]: check every item's body against its [`schema`] (via `body` and [`checker`],
//!    with the [`types`] of the language) and lower it to the IR; [`policy`] does the same for
//!    policy rules and type-checks conditions.
//! 3. [`checks`]: semantic checks over the lowered spec.
//!
//! Syntax knows nothing of types; semantics never re-parses user text (the embedded
//! standard library is parsed by the same parser as any file).

pub(crate) mod body;
pub(crate) mod checker;
pub(crate) mod checks;
pub(crate) mod error;
pub(crate) mod lower;
pub(crate) mod policy;
pub(crate) mod resolve;
pub mod schema;
pub mod stdlib;
pub(crate) mod types;

pub use error::SemaError;

use crate::diagnostics::{Diagnostic, sort_and_dedup};
use crate::ir::{self, Ir};
use crate::source::SourceMap;
use crate::syntax::Parsed;
use crate::syntax::ast::SourceFileAst;
use checker::{Catalogued, Checker};
use resolve::Names;

/// Analyses the parsed files of one spec (all files of a directory, in path order).
///
/// Returns the IR when neither parsing (judged from `parsed`' diagnostics) nor semantics
/// found an error, and the semantic diagnostics, sorted. Parse diagnostics are the caller's
/// to report; they are not repeated here.
pub fn analyze(sources: &SourceMap, parsed: &[Parsed]) -> (Option<Ir>, Vec<Diagnostic>) {
    let _ = sources;
    let user: Vec<&SourceFileAst> = parsed.iter().map(|p| &p.ast).collect();
    let (ir, mut diagnostics) = run(stdlib::parsed(), &user);
    let parse_failed = parsed
        .iter()
        .any(|p| p.diagnostics.iter().any(Diagnostic::is_error));
    sort_and_dedup(&mut diagnostics);
    let ok = !parse_failed && !diagnostics.iter().any(Diagnostic::is_error);
    (ok.then_some(ir), diagnostics)
}

/// A checker over the standard library and the `user` files, their names collected.
fn checker<'a>(std_parsed: &'a [Parsed], user: &[&'a SourceFileAst]) -> Checker<'a> {
    let std_asts: Vec<(&'static str, &SourceFileAst)> = stdlib::FILES
        .iter()
        .zip(std_parsed)
        .map(|(f, p)| (f.module, &p.ast))
        .collect();
    let mut errors = Vec::new();
    let names = Names::collect(&std_asts, user, &mut errors);
    Checker::new(names, errors)
}

fn run(std_parsed: &[Parsed], user: &[&SourceFileAst]) -> (Ir, Vec<Diagnostic>) {
    let mut ck = checker(std_parsed, user);
    let (mut ir, spans) = lower::lower(&mut ck);
    checks::run(&mut ck, &ir, &spans);
    lower::remap_catalogue(&ck, &mut ir);
    ir.spans = spans;
    let diagnostics = diagnostics(&mut ck)
        .into_iter()
        .map(without_std_labels)
        .collect();
    (ir, diagnostics)
}

/// The diagnostics of every error, then those of the lint (unknown names in constants)
/// where no error already points. Each is built once: with thousands of errors, building
/// them is a noticeable part of the time.
fn diagnostics(ck: &mut Checker<'_>) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = ck.errors.iter().map(SemaError::diagnostic).collect();
    let lint = std::mem::take(&mut ck.lint);
    if !lint.is_empty() {
        let reported: std::collections::BTreeSet<crate::source::Span> =
            out.iter().map(|d| d.primary.span).collect();
        out.extend(
            lint.iter()
                .map(SemaError::diagnostic)
                .filter(|d| !reported.contains(&d.primary.span)),
        );
    }
    out
}

/// Labels pointing into the embedded standard library are dropped: callers' source maps
/// do not hold those files.
fn without_std_labels(mut d: Diagnostic) -> Diagnostic {
    d.labels.retain(|l| !stdlib::is_std(l.span.file));
    d
}

/// The JSON form of the IR printed by `berth check --emit ir`: pretty, deterministic (the IR
/// holds no hashed maps), without spans.
pub fn ir_to_json(ir: &Ir) -> String {
    serde_json::to_string_pretty(ir).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The standard library's catalogue, for tests, documentation and the language server.
#[derive(Clone, Debug, Default)]
pub struct Catalogue {
    pub accelerators: Vec<ir::Accelerator>,
    pub services: Vec<ir::Service>,
    /// Diagnostics found in the standard library itself (none, or it is a bug).
    pub diagnostics: Vec<Diagnostic>,
}

/// Analyses the standard library alone and returns its catalogue.
pub fn catalogue() -> Catalogue {
    let std_parsed = stdlib::parsed();
    let mut ck = checker(std_parsed, &[]);
    let _ = lower::lower(&mut ck);
    let diagnostics = diagnostics(&mut ck);
    let mut out = Catalogue::default();
    for entry in &ck.catalogue {
        match entry {
            Some(Catalogued::Accelerator(a)) => out.accelerators.push(a.clone()),
            Some(Catalogued::Service(s)) => out.services.push(s.clone()),
            None => {}
        }
    }
    out.diagnostics = std_parsed
        .iter()
        .flat_map(|p| p.diagnostics.iter().cloned())
        .chain(diagnostics)
        .collect();
    out
}
