//! The parser: tokens to syntax tree, with error recovery. Never fails.

use super::ast::SourceFileAst;
use super::lexer::Comment;
use crate::diagnostics::Diagnostic;
use crate::source::{FileId, Span};

/// The result of parsing one file: always a tree, plus the comments (trivia, for the
/// formatter and doc attachment) and every lexical and syntax diagnostic.
#[derive(Clone, Debug)]
pub struct Parsed {
    pub ast: SourceFileAst,
    pub comments: Vec<Comment>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Lexes and parses one file.
pub fn parse_file(file: FileId, text: &str) -> Parsed {
    // Placeholder until the chumsky parser lands: lexes only.
    let lexed = super::lex(file, text);
    Parsed {
        ast: SourceFileAst {
            file,
            items: Vec::new(),
            span: Span::new(file, 0, text.len() as u32),
        },
        comments: lexed.comments,
        diagnostics: lexed.errors.iter().map(|e| e.diagnostic()).collect(),
    }
}
