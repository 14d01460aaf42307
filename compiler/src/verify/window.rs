//! Policy time windows evaluated at the plan instant, the verifier's own reading of
//! `window W = DAYS HH:MM..HH:MM in "ZONE"`.

use crate::ir::{Weekday, Window};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Why a window could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct UnknownZone;

/// Whether `window` is in effect at `at`.
///
/// The instant is read as wall-clock time in the window's zone (from the bundled tzdb). A
/// range `start..end` with `start < end` is in effect on a listed day from `start`
/// (inclusive) to `end` (exclusive). With `end <= start` it crosses midnight: it opens at
/// `start` on a listed day and runs until `end` on the next day, so the early hours belong
/// to the *previous* day's window (`end == start` is a full 24 hours).
pub(super) fn in_effect(window: &Window, at: Timestamp) -> Result<bool, UnknownZone> {
    let tz = TimeZone::get(&window.zone).map_err(|_| UnknownZone)?;
    let local = at.to_zoned_datetime(tz);
    let minute = u16::try_from(i32::from(local.hour()) * 60 + i32::from(local.minute()))
        .map_err(|_| UnknownZone)?;
    let today = weekday(local.weekday());
    let yesterday = weekday(local.weekday().previous());
    let listed = |d: Weekday| window.days.contains(&d);
    Ok(if window.start < window.end {
        listed(today) && window.start <= minute && minute < window.end
    } else {
        (listed(today) && minute >= window.start) || (listed(yesterday) && minute < window.end)
    })
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
