//! `berth fmt`: rewrites sources in their canonical layout, or (`--check`) lists those that
//! are not.
//!
//! A file that does not parse is never touched: its diagnostics are shown and the run fails.
//! Rewrites go through [`output::replace`]: atomic (a temporary file in the same directory,
//! then a rename), so a crash or a full disk leaves either the old text or the new one, never a
//! mix; mode and owner are kept; a file with several hard links (or whose owner the new file
//! could not be given) is rewritten in place, so it stays one file; a read-only file is
//! refused (exit 1), not replaced; a symlinked source is rewritten at its target. Unchanged
//! files are not written at all.

use crate::files::{self, FsReader, Loaded, output};
use crate::report::{Exit, Ui};
use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::driver::parse_file;
use berth_compiler::source::{FileId, SourceFile, Span};
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};

/// `berth fmt` rewrites its inputs: no file is protected from it.
const NO_INPUTS: &[&Path] = &[];

/// A formatter: canonical text for a source file, or the diagnostics that prevent it.
pub type FormatFn = fn(&str) -> Result<String, Vec<Diagnostic>>;

/// The formatter `berth fmt` runs. `None` would make the command say it has no formatter and
/// exit 2 (a build without one).
pub const FORMATTER: Option<FormatFn> = Some(berth_compiler::driver::format_file);

/// What `berth fmt` does with files whose layout is not canonical.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FmtMode {
    /// Rewrite them in place.
    Write,
    /// List them and fail (`--check`), writing nothing.
    Check,
}

/// The result of formatting one file in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileOutcome {
    /// Already canonical.
    Unchanged,
    /// The canonical text, which differs from the file's.
    Reformatted(String),
    /// The file has errors (or the formatter refused it): left alone.
    Refused(Vec<Diagnostic>),
}

/// Formats one file in memory: parses it first and refuses it if it has errors.
pub fn format_one(file: &SourceFile, format: FormatFn) -> FileOutcome {
    let parsed = parse_file(file.id, &file.text);
    if parsed.diagnostics.iter().any(Diagnostic::is_error) {
        return FileOutcome::Refused(parsed.diagnostics);
    }
    match format(&file.text) {
        Ok(text) if text == file.text => FileOutcome::Unchanged,
        Ok(text) => FileOutcome::Reformatted(text),
        Err(diags) => {
            FileOutcome::Refused(diags.into_iter().map(|d| in_file(d, file.id)).collect())
        }
    }
}

/// The formatter sees text only, so its diagnostics may carry any file id: point them at
/// `file`.
fn in_file(mut diag: Diagnostic, file: FileId) -> Diagnostic {
    let move_span = |span: Span| Span::new(file, span.start, span.end);
    diag.primary.span = move_span(diag.primary.span);
    for label in &mut diag.labels {
        label.span = move_span(label.span);
    }
    diag
}

/// Runs `berth fmt [--check] PATH…`: loads the sources, then [`run`].
pub fn run_paths(paths: &[PathBuf], mode: FmtMode, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let Some(formatter) = FORMATTER else {
        ui.problem(
            &"`berth fmt` is not available in this build: it has no formatter yet",
            Some("`berth check` still reports syntax errors"),
        )?;
        return Ok(Exit::Trouble);
    };
    let loaded = match files::load(paths, &FsReader) {
        Ok(loaded) => loaded,
        Err(errors) => return super::load_failed(&errors, ui),
    };
    run(&loaded, mode, formatter, ui)
}

/// Runs `berth fmt` over loaded sources.
pub fn run(loaded: &Loaded, mode: FmtMode, format: FormatFn, ui: &mut Ui<'_>) -> io::Result<Exit> {
    let mut diagnostics = Vec::new();
    let mut changed = Vec::new();
    let mut refused = Vec::new();
    let mut unchanged = 0usize;
    // The worst exit code of the files that could not be written.
    let mut write_failed: Option<i32> = None;
    for (file, path) in loaded.sources.files().iter().zip(&loaded.paths) {
        match format_one(file, format) {
            FileOutcome::Unchanged => unchanged += 1,
            FileOutcome::Reformatted(text) => {
                let written = match mode {
                    FmtMode::Write => output::replace(path, text.as_bytes(), NO_INPUTS),
                    FmtMode::Check => Ok(()),
                };
                match written {
                    Ok(()) => changed.push(file.name.clone()),
                    Err(e) => {
                        ui.problem(&e, Some(e.hint()))?;
                        write_failed = write_failed.max(Some(e.exit().code()));
                    }
                }
            }
            FileOutcome::Refused(diags) => {
                if diags.is_empty() {
                    let message = format!("cannot format `{}`", file.name);
                    ui.problem(&message, None)?;
                }
                diagnostics.extend(diags);
                refused.push(file.name.clone());
            }
        }
    }
    berth_compiler::diagnostics::sort_and_dedup(&mut diagnostics);

    let mut extra = serde_json::Map::new();
    extra.insert("changed".into(), Value::from(changed.clone()));
    extra.insert("refused".into(), Value::from(refused.clone()));
    ui.diagnostics(&diagnostics, &loaded.sources, extra)?;
    if mode == FmtMode::Check && ui.output == crate::report::OutputFormat::Human {
        for name in &changed {
            writeln!(ui.out, "{name}")?;
        }
    }
    if !diagnostics.is_empty() {
        ui.summary(&diagnostics, loaded.sources.len())?;
    }
    ui.status(&status_line(mode, changed.len(), unchanged, refused.len()))?;

    Ok(if write_failed == Some(Exit::Trouble.code()) {
        Exit::Trouble
    } else if write_failed.is_some()
        || !refused.is_empty()
        || (mode == FmtMode::Check && !changed.is_empty())
    {
        Exit::ErrorsFound
    } else {
        Exit::Clean
    })
}

/// `2 files reformatted, 1 unchanged` / `1 file would be reformatted, 0 unchanged, 1 not
/// formatted because of errors`.
fn status_line(mode: FmtMode, changed: usize, unchanged: usize, refused: usize) -> String {
    let files = if changed == 1 { "file" } else { "files" };
    let verb = match mode {
        FmtMode::Write => "reformatted",
        FmtMode::Check => "would be reformatted",
    };
    let mut line = format!("{changed} {files} {verb}, {unchanged} unchanged");
    if refused > 0 {
        line.push_str(&format!(", {refused} not formatted because of errors"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{FsReader, load};
    use crate::report::OutputFormat;
    use std::fs;

    /// A stand-in formatter for these tests: trims trailing spaces on every line.
    fn trim_lines(text: &str) -> Result<String, Vec<Diagnostic>> {
        Ok(text
            .lines()
            .map(|l| l.trim_end().to_string() + "\n")
            .collect())
    }

    fn run_in(dir: &Path, mode: FmtMode) -> (Exit, String, String) {
        let loaded = load(&[dir.to_path_buf()], &FsReader).expect("loads");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut ui = Ui {
            out: &mut out,
            err: &mut err,
            output: OutputFormat::Human,
            color: false,
            error_limit: berth_compiler::diagnostics::render::DEFAULT_ERROR_LIMIT,
        };
        let exit = run(&loaded, mode, trim_lines, &mut ui).expect("writes to Vecs");
        let text = |v: Vec<u8>| String::from_utf8(v).expect("UTF-8");
        (exit, text(out), text(err))
    }

    fn setup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::write(dir.path().join("clean.berth"), "workload a {\n}\n").expect("write");
        fs::write(dir.path().join("messy.berth"), "workload b {   \n}\n").expect("write");
        dir
    }

    #[test]
    fn check_mode_lists_changes_and_writes_nothing() {
        let dir = setup();
        let (exit, out, err) = run_in(dir.path(), FmtMode::Check);
        assert_eq!(exit, Exit::ErrorsFound);
        assert!(
            out.ends_with("messy.berth\n") && !out.contains("clean"),
            "{out}"
        );
        assert!(
            err.contains("1 file would be reformatted, 1 unchanged"),
            "{err}"
        );
        let messy = fs::read_to_string(dir.path().join("messy.berth")).expect("read");
        assert_eq!(messy, "workload b {   \n}\n");
    }

    #[test]
    fn write_mode_rewrites_only_changed_files_and_keeps_permissions() {
        let dir = setup();
        let messy = dir.path().join("messy.berth");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&messy, fs::Permissions::from_mode(0o640)).expect("chmod");
        }
        let (exit, _, err) = run_in(dir.path(), FmtMode::Write);
        assert_eq!(exit, Exit::Clean, "{err}");
        assert_eq!(
            fs::read_to_string(&messy).expect("read"),
            "workload b {\n}\n"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&messy).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o640);
        }
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
        // Formatting again changes nothing.
        let (exit, _, err) = run_in(dir.path(), FmtMode::Check);
        assert_eq!(exit, Exit::Clean, "{err}");
    }

    #[test]
    fn files_with_errors_are_left_alone() {
        let dir = setup();
        let broken = dir.path().join("broken.berth");
        fs::write(&broken, "workload c {   \n  x = $\n}\n").expect("write");
        let (exit, _, err) = run_in(dir.path(), FmtMode::Write);
        assert_eq!(exit, Exit::ErrorsFound);
        assert!(err.contains("E0001"), "{err}");
        assert!(err.contains("1 not formatted because of errors"), "{err}");
        assert_eq!(
            fs::read_to_string(&broken).expect("read"),
            "workload c {   \n  x = $\n}\n"
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_sources_are_rewritten_at_their_target() {
        let dir = tempfile::tempdir().expect("temp dir");
        let real = dir.path().join("real.txt");
        fs::write(&real, "workload b {   \n}\n").expect("write");
        let link = dir.path().join("link.berth");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        output::replace(&link, b"new\n", NO_INPUTS).expect("writes");
        assert!(
            fs::symlink_metadata(&link)
                .expect("stat")
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).expect("read"), "new\n");
    }

    #[test]
    fn formatter_diagnostics_are_moved_to_the_file() {
        fn refuse(_: &str) -> Result<String, Vec<Diagnostic>> {
            Err(vec![Diagnostic::error(
                berth_compiler::diagnostics::Code::UnexpectedToken,
                "cannot lay this out",
                Span::new(FileId(0), 0, 1),
            )])
        }
        let file = SourceFile::new(FileId(3), "x.berth", "workload a {\n}\n");
        let FileOutcome::Refused(diags) = format_one(&file, refuse) else {
            panic!("expected a refusal");
        };
        assert_eq!(diags[0].primary.span.file, FileId(3));
    }
}
