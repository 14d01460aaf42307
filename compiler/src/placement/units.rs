//! Human-readable quantities for messages: bytes as `16GiB` or `500MB`, nanoseconds as
//! `20ms`, counts with thousands separators. Written the way the language writes literals,
//! so a message can be pasted back into a spec.

const BINARY: [(u64, &str); 4] = [
    (1 << 40, "TiB"),
    (1 << 30, "GiB"),
    (1 << 20, "MiB"),
    (1 << 10, "KiB"),
];
const DECIMAL: [(u64, &str); 4] = [
    (1_000_000_000_000, "TB"),
    (1_000_000_000, "GB"),
    (1_000_000, "MB"),
    (1_000, "KB"),
];
const DURATIONS: [(u64, &str); 7] = [
    (86_400_000_000_000, "d"),
    (3_600_000_000_000, "h"),
    (60_000_000_000, "m"),
    (1_000_000_000, "s"),
    (1_000_000, "ms"),
    (1_000, "us"),
    (1, "ns"),
];

/// `17179869184` → `16GiB`, `500000000` → `500MB`: exact in the largest unit that divides
/// it (if short), else truncated to two decimals in the largest unit below it (`1.5GiB`).
pub fn bytes(n: u64) -> String {
    if n == 0 {
        return "0B".into();
    }
    if let Some((unit, suffix)) = BINARY.iter().chain(&DECIMAL).find(|(u, _)| exact(n, *u)) {
        return format!("{}{suffix}", n / unit);
    }
    match BINARY.iter().find(|(u, _)| n >= *u) {
        Some((unit, suffix)) => format!("{}{suffix}", decimal(n, *unit)),
        None => format!("{n}B"),
    }
}

/// `20_000_000` → `20ms`, `1_500_000` → `1500us`, `90_000_000_000` → `90s`.
pub fn duration(ns: u64) -> String {
    if ns == 0 {
        return "0ms".into();
    }
    if let Some((unit, suffix)) = DURATIONS.iter().find(|(u, _)| exact(ns, *u)) {
        return format!("{}{suffix}", ns / unit);
    }
    match DURATIONS.iter().find(|(u, _)| ns >= *u) {
        Some((unit, suffix)) => format!("{}{suffix}", decimal(ns, *unit)),
        None => format!("{ns}ns"),
    }
}

/// Millicores as CPUs: `4000` → `4`, `500` → `0.5`.
pub fn cpus(millis: u64) -> String {
    if millis % 1000 == 0 {
        (millis / 1000).to_string()
    } else {
        decimal(millis, 1000)
    }
}

/// `n` is a whole, short number of `unit`s (short enough to read at a glance).
fn exact(n: u64, unit: u64) -> bool {
    n % unit == 0 && n / unit < 10_000
}

/// `n / unit` with at most two decimals, trailing zeros dropped (truncated, never rounded up,
/// so an offer is never shown bigger than it is).
fn decimal(n: u64, unit: u64) -> String {
    let int = n / unit;
    let hundredths = (u128::from(n % unit) * 100 / u128::from(unit)) as u64;
    match hundredths {
        0 => int.to_string(),
        h if h % 10 == 0 => format!("{int}.{}", h / 10),
        h => format!("{int}.{h:02}"),
    }
}

/// A count with its noun, singular or plural: `1 GPU`, `3 GPUs`, `1 replica`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Names in backticks, joined: `` `a`, `b` ``; `none` when empty.
pub fn names<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let parts: Vec<String> = items
        .into_iter()
        .map(|s| format!("`{}`", s.as_ref()))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_literals() {
        assert_eq!(bytes(16 << 30), "16GiB");
        assert_eq!(bytes(512 << 20), "512MiB");
        assert_eq!(bytes(2 << 40), "2TiB");
        assert_eq!(bytes(500_000_000), "500MB");
        // Exact values stay exact (a literal one could paste back); others are truncated.
        assert_eq!(bytes((15 << 30) / 2), "7680MiB");
        assert_eq!(bytes((3 << 29) + 1), "1.5GiB");
        assert_eq!(bytes(1000), "1KB");
        assert_eq!(bytes(999), "999B");
        assert_eq!(bytes(0), "0B");
    }

    #[test]
    fn durations_read_like_literals() {
        assert_eq!(duration(20_000_000), "20ms");
        assert_eq!(duration(1_500_000), "1500us");
        assert_eq!(duration(1_500_001), "1.5ms");
        assert_eq!(duration(90_000_000_000), "90s");
        assert_eq!(duration(30 * 60_000_000_000), "30m");
        assert_eq!(duration(250_000), "250us");
        assert_eq!(duration(7), "7ns");
    }

    #[test]
    fn cpus_and_counts() {
        assert_eq!(cpus(4000), "4");
        assert_eq!(cpus(500), "0.5");
        assert_eq!(cpus(1250), "1.25");
        assert_eq!(count(1, "GPU"), "1 GPU");
        assert_eq!(count(3, "GPU"), "3 GPUs");
        assert_eq!(names(["a", "b"]), "`a`, `b`");
    }
}
