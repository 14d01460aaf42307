//! The compiler's front door: a [`SourceMap`] in, everything the command line and the language
//! server report out. Pure: the runtime reads the files and hands them over.
//!
//! Each stage adds its diagnostics here; later stages (names, types, placement) hook in after
//! parsing. Files are parsed in parallel, but results are collected in file order and the
//! diagnostics sorted, so the output never depends on scheduling.

use crate::diagnostics::{Diagnostic, sort_and_dedup};
use crate::source::SourceMap;
use crate::syntax::parse_file;
use rayon::prelude::*;

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

/// Checks every file of `sources`.
pub fn check(sources: &SourceMap) -> CheckOutput {
    let per_file: Vec<Vec<Diagnostic>> = sources
        .files()
        .par_iter()
        .map(|file| parse_file(file.id, &file.text).diagnostics)
        .collect();
    let mut diagnostics: Vec<Diagnostic> = per_file.into_iter().flatten().collect();
    sort_and_dedup(&mut diagnostics);
    CheckOutput { diagnostics }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Code;

    #[test]
    fn diagnostics_come_out_in_file_order() {
        let mut map = SourceMap::new();
        map.add("a.berth", "workload a { replicas = 2 }\n");
        map.add("b.berth", "workload b { x = $ }\n");
        map.add("c.berth", "workload c { y = # }\n");
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
        map.add("a.berth", "workload a {\n  replicas = 2\n}\n");
        let out = check(&map);
        assert!(!out.has_errors());
        assert!(out.diagnostics.is_empty());
    }
}
