//! Compact verdicts: why a (workload, target) pair is not used, in four bytes.
//!
//! The eligibility matrix holds one [`Verdict`] per pair (20 million of them for a large
//! estate), so a verdict is a reason code plus a small detail index (which pool, which data
//! requirement, which deny rule) and nothing else; the human message is rendered later, only
//! for the rejections a plan lists (`reasons.rs`).

use crate::plan::RejectionStage;
use crate::source::Span;

/// Why a pair is rejected. Eligibility reasons come first, in the order they are checked, so
/// a later reason means the target got further ("nearest miss" for hints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Reason {
    // ---- eligibility, in check order ----
    NotCandidate = 1,
    Environment,
    Connectivity,
    Accelerator,
    Mig,
    GpuMemory,
    NoVariant,
    ModelUnreachable,
    DataUnavailable,
    DataLatency,
    ServiceMaturity,
    Cpu,
    Memory,
    GpuCount,
    // ---- policy on the eligible set ----
    Denied,
    NotEntitled,
    // ---- policy caps met during assignment ----
    Quota,
    EntitlementLimit,
    WindowLimit,
    // ---- assignment ----
    Capacity,
    CpuFull,
    MemoryFull,
    Spread,
    Isolation,
    NotNeeded,
}

impl Reason {
    /// One more than the largest code: arrays indexed by `reason as usize` have this length.
    pub const COUNT: usize = 26;

    const ALL: [Reason; 25] = [
        Reason::NotCandidate,
        Reason::Environment,
        Reason::Connectivity,
        Reason::Accelerator,
        Reason::Mig,
        Reason::GpuMemory,
        Reason::NoVariant,
        Reason::ModelUnreachable,
        Reason::DataUnavailable,
        Reason::DataLatency,
        Reason::ServiceMaturity,
        Reason::Cpu,
        Reason::Memory,
        Reason::GpuCount,
        Reason::Denied,
        Reason::NotEntitled,
        Reason::Quota,
        Reason::EntitlementLimit,
        Reason::WindowLimit,
        Reason::Capacity,
        Reason::CpuFull,
        Reason::MemoryFull,
        Reason::Spread,
        Reason::Isolation,
        Reason::NotNeeded,
    ];

    fn from_code(code: u8) -> Option<Reason> {
        Reason::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }

    /// The stable machine-readable key written into the plan.
    pub fn key(self) -> &'static str {
        match self {
            Reason::NotCandidate => "not_candidate",
            Reason::Environment => "environment",
            Reason::Connectivity => "connectivity",
            Reason::Accelerator => "accelerator",
            Reason::Mig => "mig",
            Reason::GpuMemory => "gpu_memory",
            Reason::NoVariant => "no_variant",
            Reason::ModelUnreachable => "model_unreachable",
            Reason::DataUnavailable => "data_unavailable",
            Reason::DataLatency => "data_latency",
            Reason::ServiceMaturity => "service_maturity",
            Reason::Cpu | Reason::CpuFull => "cpu",
            Reason::Memory | Reason::MemoryFull => "memory",
            Reason::GpuCount => "gpu_count",
            Reason::Denied => "denied",
            Reason::NotEntitled => "not_entitled",
            Reason::Quota => "quota",
            Reason::EntitlementLimit => "entitlement_limit",
            Reason::WindowLimit => "window_limit",
            Reason::Capacity => "capacity",
            Reason::Spread => "spread",
            Reason::Isolation => "isolation",
            Reason::NotNeeded => "not_needed",
        }
    }

    /// Which stage gives this reason.
    pub fn stage(self) -> RejectionStage {
        if self <= Reason::GpuCount {
            RejectionStage::Eligibility
        } else if self <= Reason::WindowLimit {
            RejectionStage::Policy
        } else {
            RejectionStage::Assignment
        }
    }
}

/// A verdict in words, with where its two sides are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub message: String,
    /// The workload's (or a rule's) side.
    pub requirement: Option<Span>,
    /// The target's side.
    pub offer: Option<Span>,
}

/// Detail value meaning "no particular pool" (a target with no GPU pool at all).
pub const NO_DETAIL: u32 = 0x00FF_FFFF;

/// `0` for a pair that passed every stage so far, else a [`Reason`] and a 24-bit detail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Verdict(u32);

impl Verdict {
    pub const OK: Verdict = Verdict(0);

    pub fn reject(reason: Reason, detail: u32) -> Verdict {
        Verdict(reason as u32 | (detail.min(NO_DETAIL) << 8))
    }

    pub fn is_ok(self) -> bool {
        self.0 == 0
    }

    pub fn reason(self) -> Option<Reason> {
        Reason::from_code((self.0 & 0xFF) as u8)
    }

    /// Pool index in the target, data or service requirement index, rule index, …
    pub fn detail(self) -> u32 {
        self.0 >> 8
    }
}

/// What the matrix keeps per pair: the reason code alone (one byte; 0 for a pair that passed
/// every stage so far). The detail is recomputed for the few rejections a plan lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cell(u8);

impl Cell {
    pub const OK: Cell = Cell(0);

    pub fn is_ok(self) -> bool {
        self.0 == 0
    }

    pub fn reason(self) -> Option<Reason> {
        Reason::from_code(self.0)
    }
}

impl From<Verdict> for Cell {
    fn from(v: Verdict) -> Cell {
        Cell((v.0 & 0xFF) as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip() {
        for r in Reason::ALL {
            let v = Verdict::reject(r, 1234);
            assert_eq!(v.reason(), Some(r));
            assert_eq!(v.detail(), 1234);
            assert!(!v.is_ok());
        }
        assert_eq!(Verdict::OK.reason(), None);
        assert_eq!(
            Cell::from(Verdict::reject(Reason::Spread, 7)).reason(),
            Some(Reason::Spread)
        );
        assert!(Cell::from(Verdict::OK).is_ok());
        assert_eq!(Verdict::reject(Reason::Cpu, u32::MAX).detail(), NO_DETAIL);
        assert_eq!(Reason::GpuCount.stage(), RejectionStage::Eligibility);
        assert_eq!(Reason::WindowLimit.stage(), RejectionStage::Policy);
        assert_eq!(Reason::NotNeeded.stage(), RejectionStage::Assignment);
        assert_eq!(Reason::COUNT, Reason::ALL.len() + 1);
        assert_eq!(
            Reason::ALL.last().map(|r| *r as usize),
            Some(Reason::COUNT - 1)
        );
    }
}
