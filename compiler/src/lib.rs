//! The berth compiler: `.berth` sources in, diagnostics, IR and a verified placement plan out.
//!
//! Pure: no files, no network, no clock, no threads other than rayon's pool. The runtime
//! crate reads files and calls into here (see ARCHITECTURE.md).
//!
//! It never panics on input: `unwrap` is denied (Cargo.toml), and so is indexing that could
//! go out of range, except in modules that allow it under an `// INVARIANT:` saying why every
//! index there is in range (tests index freely).

#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

#[cfg(feature = "testing")]
pub mod analysis;
#[cfg(not(feature = "testing"))]
pub(crate) mod analysis;
pub mod diagnostics;
pub mod driver;
pub mod ide;
pub mod ir;
#[cfg(feature = "testing")]
pub mod placement;
#[cfg(not(feature = "testing"))]
pub(crate) mod placement;
pub mod plan;
#[cfg(feature = "testing")]
pub mod sema;
#[cfg(not(feature = "testing"))]
pub(crate) mod sema;
pub mod source;
mod splitmix;
#[cfg(feature = "testing")]
pub mod syntax;
#[cfg(not(feature = "testing"))]
pub(crate) mod syntax;
// INVARIANT: the test kits never see compiler input: an index out of range there is a
// bug in a test, and panicking says so (their docs promise as much).
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::indexing_slicing)]
pub mod testing;
#[cfg(feature = "testing")]
pub mod verify;
#[cfg(not(feature = "testing"))]
pub(crate) mod verify;
pub(crate) mod what_if;

pub use driver::{CheckOutput, check};
