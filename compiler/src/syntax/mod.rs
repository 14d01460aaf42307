//! Syntax: lexing, parsing, the syntax tree and the formatter. Knows nothing of types or
//! meaning; never fails (a tree plus diagnostics, with holes where input was missing).

pub mod ast;
pub mod format;
pub mod lexer;
pub mod limits;
pub mod parser;
pub mod token;

pub use lexer::{Comment, CommentKind, LexError, Lexed, lex};
pub use parser::{Parsed, parse_file};
