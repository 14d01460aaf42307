//! Policies: every rule kind checked and lowered, and `deny` conditions type-checked into
//! [`PolicyExpr`].
//!
//! A condition is checked bottom-up with one twist: a bare name that is not in scope (`cloud`,
//! `confidential`) takes its meaning from the other side of the comparison, so
//! `target.class == cloud` reads `cloud` as an environment class. Paths under `workload.` and
//! `target.` come from the tables [`WORKLOAD_PATHS`] and [`TARGET_PATHS`] (also what the
//! language server completes). Arithmetic is only allowed on constants, which are folded.

//!
//! Rooms: [`paths`] (the field paths conditions may read), [`cond`] (conditions checked
//! into [`crate::ir::PolicyExpr`]), [`rules`] (every rule kind lowered into `ir.policy`), [`window`]
//! (window days and time zones).

mod cond;
mod paths;
mod rules;
mod window;

pub use paths::{DATA_FIELDS, PTy, TARGET_PATHS, WORKLOAD_PATHS};
pub use rules::lower_policies;
