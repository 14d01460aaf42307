//! Classes of workloads: those whose keys (everything a stage reads about them) are equal.
//! See "Classes" in `docs/placement.md`.

use std::collections::HashMap;
use std::hash::Hash;

/// For each item, the index of the first item with an equal key (itself when it is the
/// first): that one computes, the others share. Keys are compared in full; the map is only
/// looked up, never iterated, so the result depends on the keys' order alone.
pub(crate) fn first_of_class<K: Hash + Eq>(keys: &[K]) -> Vec<usize> {
    let mut first: HashMap<&K, usize> = HashMap::with_capacity(keys.len());
    keys.iter()
        .enumerate()
        .map(|(i, k)| *first.entry(k).or_insert(i))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_of_equal_keys() {
        assert_eq!(
            super::first_of_class(&["a", "b", "a", "c", "b"]),
            [0, 1, 0, 3, 1]
        );
    }
}
