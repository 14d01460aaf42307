//! Rendering of diagnostics: the one place where a [`Diagnostic`] becomes text.
//!
//! Terminal output goes through ariadne (colour only when the caller says so: a terminal
//! without `NO_COLOR`); machine output is JSON with file, line, column and byte offsets.
