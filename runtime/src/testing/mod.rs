//! Test kits behind the `testing` feature (the runtime's own tests and the fuzz crate turn it
//! on; the shipped binary never builds it). Nothing in the commands calls into here.
//!
//! - [`fuzz`]: the properties the runtime's fuzz targets check, shared with the corpus replay
//!   test.

pub mod fuzz;
