//! Input limits that protect the machine: exceeding them is a diagnostic, never a crash.

/// Largest source file accepted, in bytes (16 MiB: a 100,000-line spec is about 3 MB).
pub const MAX_FILE_BYTES: usize = 16 * 1024 * 1024;
/// Deepest nesting of blocks, lists, maps, calls and parentheses.
pub const MAX_NESTING: usize = 64;
/// Most tokens in one file.
pub const MAX_TOKENS: usize = 4_000_000;
/// Deepest expression tree: bracket depth plus the operators chained in one expression
/// (`a + b + …`, `not not …`, `a.b.c…`). Real specs stay far below; the bound keeps every
/// recursive tree walk within its stack.
pub const MAX_EXPR_DEPTH: usize = 256;
