//! Small keyed counters: `(key, count)` lists for the few targets, regions or pools one
//! workload touches, where a linear scan beats a map and iteration order never matters.

// INVARIANT: `i` is the position `position` found in the same list just above.
#![allow(clippy::indexing_slicing)]

/// The count kept for `key` (zero when absent).
pub(crate) fn count(list: &[(u32, u32)], key: u32) -> u32 {
    list.iter().find(|e| e.0 == key).map_or(0, |e| e.1)
}

/// Adds `by` (negative to take away) to the count of `key`; a count that reaches zero leaves
/// the list.
pub(crate) fn add_count(list: &mut Vec<(u32, u32)>, key: u32, by: i32) {
    match list.iter_mut().position(|e| e.0 == key) {
        Some(i) => {
            list[i].1 = list[i].1.saturating_add_signed(by);
            if list[i].1 == 0 {
                list.swap_remove(i);
            }
        }
        None if by > 0 => list.push((key, by.unsigned_abs())),
        None => {}
    }
}
