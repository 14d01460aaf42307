//! Where command output goes and how it looks: human text (diagnostics and problems on stderr,
//! colour only when allowed) or one JSON document on stdout.
//!
//! Commands write through a [`Ui`] rather than to the process streams, so they can be run and
//! checked in-process, and end with an [`Exit`].

use berth_compiler::diagnostics::Diagnostic;
use berth_compiler::diagnostics::render::{
    Summary, limit_per_file, render_terminal_limited, to_json_document,
};
use berth_compiler::source::SourceMap;
use clap::builder::styling::{AnsiColor, Style};
use serde_json::Value;
use std::fmt::Display;
use std::io::{self, IsTerminal, Write};

/// How a run ended; the process exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Nothing to report (0).
    Clean,
    /// The sources have errors, or `fmt --check` found files to reformat (1).
    ErrorsFound,
    /// Bad usage, unreadable input or a failing environment: nothing was checked (2).
    Trouble,
    /// With `--detailed-exitcode`: it succeeded and there are changes to make (2; trouble is
    /// then reported as 1, as terraform's `-detailed-exitcode` does).
    ChangesPresent,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Clean => 0,
            Exit::ErrorsFound => 1,
            Exit::Trouble | Exit::ChangesPresent => 2,
        }
    }

    /// The exit of a run with `--detailed-exitcode`: 0 nothing to change, 1 errors of any
    /// kind, 2 changes present.
    pub fn detailed(self, changes: bool) -> Exit {
        match self {
            Exit::Clean if changes => Exit::ChangesPresent,
            Exit::Trouble => Exit::ErrorsFound,
            other => other,
        }
    }
}

/// How results are printed (`--output`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// Diagnostics with source excerpts on stderr, then a summary line.
    #[default]
    Human,
    /// One JSON document on stdout.
    Json,
    /// A Markdown report on stdout for a merge request comment (`plan`, `plan-diff`).
    Markdown,
    /// Diagnostics as one SARIF 2.1.0 log on stdout, for code-scanning tools (`check`).
    Sarif,
}

impl OutputFormat {
    /// The commands that take this format, when not all do.
    pub fn only_for(self) -> Option<&'static [&'static str]> {
        match self {
            OutputFormat::Human | OutputFormat::Json => None,
            OutputFormat::Markdown => Some(&["plan", "plan-diff"]),
            OutputFormat::Sarif => Some(&["check"]),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Human => "human",
            OutputFormat::Json => "json",
            OutputFormat::Markdown => "markdown",
            OutputFormat::Sarif => "sarif",
        }
    }
}

/// When to colour human output (`--color`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour if stderr is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    Always,
    Never,
}

/// What the process was started in, as far as output is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Environment {
    pub stderr_is_terminal: bool,
    /// `NO_COLOR` is set to a non-empty value (<https://no-color.org>).
    pub no_color: bool,
}

impl Environment {
    /// The current process's environment.
    pub fn detect() -> Self {
        Environment {
            stderr_is_terminal: io::stderr().is_terminal(),
            no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        }
    }

    /// Whether stderr text is coloured. An explicit `--color always` beats `NO_COLOR`.
    pub fn use_color(self, choice: ColorChoice) -> bool {
        match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => self.stderr_is_terminal && !self.no_color,
        }
    }
}

/// The streams and settings a command prints with.
pub struct Ui<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    pub output: OutputFormat,
    /// Colour stderr text.
    pub color: bool,
    /// Diagnostics shown per file, the rest counted (`--error-limit`; 0: all).
    pub error_limit: usize,
}

impl Ui<'_> {
    /// Prints diagnostics: human, rendered on stderr (follow with [`Ui::summary`]); JSON, the
    /// document of [`to_json_document`] with `extra` fields merged in, on stdout. Beyond
    /// [`Ui::error_limit`] diagnostics in a file, the rest are counted, not shown.
    pub fn diagnostics(
        &mut self,
        diags: &[Diagnostic],
        sources: &SourceMap,
        extra: serde_json::Map<String, Value>,
    ) -> io::Result<()> {
        match self.output {
            OutputFormat::Human => {
                self.err.write_all(
                    render_terminal_limited(diags, sources, self.color, self.error_limit)
                        .as_bytes(),
                )?;
                if !limit_per_file(diags, self.error_limit).1.is_empty() {
                    let hint = format!(
                        "at most {} diagnostics are shown per file; `--error-limit 0` shows all",
                        self.error_limit
                    );
                    self.hint(&hint)?;
                }
                Ok(())
            }
            OutputFormat::Json => {
                let mut doc = to_json_document(diags, sources, self.error_limit);
                if let Value::Object(map) = &mut doc {
                    map.extend(extra);
                }
                writeln!(self.out, "{doc}")
            }
            OutputFormat::Sarif => {
                let log = berth_compiler::diagnostics::sarif::to_sarif(
                    diags,
                    sources,
                    env!("CARGO_PKG_VERSION"),
                );
                writeln!(self.out, "{log}")
            }
            // INVARIANT: `cli` refuses markdown for commands that print diagnostics only.
            OutputFormat::Markdown => Ok(()),
        }
    }

    /// The closing line of a human run (nothing in JSON mode, where the counts are fields).
    pub fn summary(&mut self, diags: &[Diagnostic], files_checked: usize) -> io::Result<()> {
        let summary = Summary::of(diags, files_checked);
        self.status(&summary)
    }

    /// A line of progress or result for people, on stderr (nothing in JSON mode).
    pub fn status(&mut self, line: &dyn Display) -> io::Result<()> {
        match self.output {
            OutputFormat::Human | OutputFormat::Markdown | OutputFormat::Sarif => {
                writeln!(self.err, "{line}")
            }
            OutputFormat::Json => Ok(()),
        }
    }

    /// A problem that stops the command (usage, I/O, environment), always on stderr:
    /// `error: MESSAGE` and, if given, `  help: HINT`.
    pub fn problem(&mut self, message: &dyn Display, hint: Option<&str>) -> io::Result<()> {
        let error = AnsiColor::Red.on_default().bold();
        writeln!(self.err, "{}: {message}", self.paint("error", error))?;
        if let Some(hint) = hint {
            self.hint(&hint)?;
        }
        Ok(())
    }

    /// `  help: HINT` on stderr.
    pub fn hint(&mut self, hint: &dyn Display) -> io::Result<()> {
        let help = AnsiColor::Cyan.on_default().bold();
        writeln!(self.err, "  {}: {hint}", self.paint("help", help))
    }

    fn paint(&self, text: &str, style: Style) -> String {
        if self.color {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_compiler::diagnostics::render::DEFAULT_ERROR_LIMIT;

    #[test]
    fn detailed_exit_codes_keep_two_for_changes() {
        assert_eq!(Exit::Clean.detailed(false).code(), 0);
        assert_eq!(Exit::Clean.detailed(true).code(), 2);
        assert_eq!(Exit::ErrorsFound.detailed(true).code(), 1);
        assert_eq!(Exit::Trouble.detailed(false).code(), 1);
        assert_eq!(Exit::Trouble.code(), 2);
    }

    #[test]
    fn colour_follows_terminal_no_color_and_flag() {
        let tty = Environment {
            stderr_is_terminal: true,
            no_color: false,
        };
        let piped = Environment {
            stderr_is_terminal: false,
            no_color: false,
        };
        let tty_no_color = Environment {
            stderr_is_terminal: true,
            no_color: true,
        };
        assert!(tty.use_color(ColorChoice::Auto));
        assert!(!piped.use_color(ColorChoice::Auto));
        assert!(!tty_no_color.use_color(ColorChoice::Auto));
        assert!(tty_no_color.use_color(ColorChoice::Always));
        assert!(!tty.use_color(ColorChoice::Never));
    }

    #[test]
    fn problems_are_coloured_only_when_asked() {
        for color in [false, true] {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let mut ui = Ui {
                out: &mut out,
                err: &mut err,
                output: OutputFormat::Human,
                color,
                error_limit: DEFAULT_ERROR_LIMIT,
            };
            ui.problem(&"`x` does not exist", Some("check the path"))
                .expect("write to a Vec");
            let text = String::from_utf8(err).expect("UTF-8");
            assert_eq!(text.contains('\x1b'), color, "{text:?}");
            if !color {
                assert_eq!(text, "error: `x` does not exist\n  help: check the path\n");
            }
        }
    }
}
