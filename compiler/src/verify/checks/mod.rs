//! The verifier's checks, one room per concern; each adds methods to
//! [`Verifier`](super::Verifier), and [`super::checks`] lists them in the order they run.

mod capacity;
mod cost;
mod document;
mod eligibility;
mod fallback;
mod policy;
mod reasons;
mod replicas;
mod rules;
