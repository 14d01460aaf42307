//! What a policy window means: `window W = DAYS HH:MM..HH:MM in "ZONE"` in effect or not at
//! an instant. One definition, read by the placement engine (which windows constrain the
//! plan) and by the verifier (whether the plan records each window's state truly), like
//! [`super::eval`] for conditions: it is the language's meaning, not a solver decision.

use super::{Weekday, Window};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// The window's zone is not in the bundled tzdb. Semantics validates zones, so a spec that
/// checked clean never has one; the engine treats such a window as closed, the verifier
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownZone;

impl Window {
    /// Whether the window is in effect at `at`.
    ///
    /// The instant is read as wall-clock time in the window's zone (from the bundled tzdb). A
    /// range `start..end` with `start < end` is in effect on a listed day from `start`
    /// (inclusive) to `end` (exclusive). With `end <= start` it crosses midnight: it opens at
    /// `start` on a listed day and runs until `end` on the next day, so the early hours belong
    /// to the *previous* day's window (`end == start` is a full 24 hours).
    pub fn in_effect(&self, at: Timestamp) -> Result<bool, UnknownZone> {
        let tz = TimeZone::get(&self.zone).map_err(|_| UnknownZone)?;
        let local = at.to_zoned_datetime(tz);
        let minute = i32::from(local.hour()) * 60 + i32::from(local.minute());
        let (start, end) = (i32::from(self.start), i32::from(self.end));
        let today = weekday(local.weekday());
        let yesterday = weekday(local.weekday().previous());
        let listed = |d: Weekday| self.days.contains(&d);
        Ok(if start < end {
            listed(today) && start <= minute && minute < end
        } else {
            (listed(today) && minute >= start) || (listed(yesterday) && minute < end)
        })
    }
}

fn weekday(d: jiff::civil::Weekday) -> Weekday {
    use jiff::civil::Weekday as J;
    match d {
        J::Monday => Weekday::Mon,
        J::Tuesday => Weekday::Tue,
        J::Wednesday => Weekday::Wed,
        J::Thursday => Weekday::Thu,
        J::Friday => Weekday::Fri,
        J::Saturday => Weekday::Sat,
        J::Sunday => Weekday::Sun,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ir::IrBuilder;

    fn window(days: &[Weekday], start: &str, end: &str, zone: &str) -> Window {
        let ir = IrBuilder::new().window("w", days, start, end, zone).build();
        ir.policy.windows[0].clone()
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn open(w: &Window, s: &str) -> bool {
        w.in_effect(at(s)) == Ok(true)
    }

    #[test]
    fn windows_in_their_zone() {
        use Weekday::*;
        let peak = window(&[Mon, Tue, Wed, Thu, Fri], "08:00", "18:00", "Europe/Paris");
        // Wednesday 2025-06-04: Paris is UTC+2.
        assert!(open(&peak, "2025-06-04T06:00:00Z"));
        assert!(!open(&peak, "2025-06-04T05:59:00Z"));
        assert!(!open(&peak, "2025-06-04T16:00:00Z"));
        assert!(open(&peak, "2025-06-04T15:59:00Z"));
        // Saturday.
        assert!(!open(&peak, "2025-06-07T10:00:00Z"));
        // Winter: UTC+1.
        assert!(open(&peak, "2025-01-08T07:00:00Z"));
        assert!(!open(&peak, "2025-01-08T06:30:00Z"));
    }

    #[test]
    fn windows_crossing_midnight_belong_to_their_start_day() {
        use Weekday::*;
        let night = window(&[Fri], "22:00", "06:00", "UTC");
        assert!(open(&night, "2025-06-06T23:00:00Z")); // Fri
        assert!(open(&night, "2025-06-07T05:59:00Z")); // Sat morning
        assert!(!open(&night, "2025-06-07T06:00:00Z"));
        assert!(!open(&night, "2025-06-06T05:00:00Z")); // Fri morning
        let sunday_night = window(&[Sun], "23:00", "01:00", "UTC");
        assert!(open(&sunday_night, "2025-06-09T00:30:00Z")); // Mon
        let all_day = window(Weekday::ALL, "00:00", "24:00", "UTC");
        assert!(open(&all_day, "2025-06-08T23:59:00Z"));
    }

    #[test]
    fn an_unknown_zone_is_reported_not_guessed() {
        let bad_zone = window(&[Weekday::Sun], "00:00", "24:00", "Mars/Olympus");
        assert_eq!(
            bad_zone.in_effect(at("2025-06-08T12:00:00Z")),
            Err(UnknownZone)
        );
    }
}
