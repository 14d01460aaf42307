//! SplitMix64, the one pseudo-random sequence the test-data generators (`testing::specs`,
//! `testing::ir::estate`, `testing::planted`, and the overflow search) draw from: tiny, no dependency, no seed from the environment, and the
//! same numbers on every platform, so generated specs and estates are byte-identical everywhere.

/// A SplitMix64 state; `next` gives the sequence.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
