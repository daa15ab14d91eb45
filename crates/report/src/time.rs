//! Dates and durations, by hand (no date-time crate): enough to print a log's start time.

/// Formats nanoseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`.
pub fn format_utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let millis = (unix_ns / 1_000_000) % 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{millis:03} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The proleptic Gregorian (year, month, day) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Formats nanoseconds as milliseconds with three decimals: `12.345 ms`.
pub fn format_ms(ns: u64) -> String {
    format!("{}.{:03} ms", ns / 1_000_000, (ns / 1000) % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00.000 UTC");
        // 2000-02-29 12:34:56.789 UTC: a leap day of a century leap year.
        assert_eq!(format_utc(951_827_696_789_000_000), "2000-02-29 12:34:56.789 UTC");
        // 2024-12-31 23:59:59.999 UTC.
        assert_eq!(format_utc(1_735_689_599_999_999_999), "2024-12-31 23:59:59.999 UTC");
        assert_eq!(format_utc(1_735_689_600_000_000_000), "2025-01-01 00:00:00.000 UTC");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        // The largest u64 of nanoseconds is in 2554.
        assert_eq!(format_utc(u64::MAX), "2554-07-21 23:34:33.709 UTC");
    }

    #[test]
    fn milliseconds() {
        assert_eq!(format_ms(0), "0.000 ms");
        assert_eq!(format_ms(12_345_678), "12.345 ms");
        assert_eq!(format_ms(1_000), "0.001 ms");
    }
}
