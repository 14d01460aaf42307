//! Syntax: lexing, parsing, the syntax tree and the formatter. Knows nothing of types or
//! meaning; never fails (a tree plus diagnostics, with holes where input was missing).

pub mod ast;
#[cfg(any(test, feature = "testing"))]
pub mod ast_dump;
mod docs;
pub mod format;
pub(crate) mod lexer;
pub mod limits;
pub(crate) mod parse_error;
pub mod parser;
mod prepass;
pub mod token;

pub use lexer::lex;
#[cfg(any(test, feature = "testing"))]
pub use lexer::{Comment, CommentKind, LexError, Lexed};
#[cfg(any(test, feature = "testing"))]
pub use parse_error::ParseError;
pub use parser::{Parsed, parse_file};
