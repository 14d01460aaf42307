//! The berth compiler: `.berth` sources in, diagnostics, IR and a verified placement plan out.
//!
//! Pure: no files, no network, no clock, no threads other than rayon's pool. The runtime
//! crate reads files and calls into here (see ARCHITECTURE.md).

pub mod diagnostics;
pub mod driver;
pub mod ide;
pub mod ir;
pub mod placement;
pub mod plan;
pub mod sema;
pub mod source;
mod splitmix;
pub mod syntax;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod verify;

pub use driver::{CheckOutput, check};
