//! Time as Python prints it, for return values (`start`, `end` of `command`) and the journal.

/// Python's `str(datetime)` (UTC here): `2024-05-01 12:00:00.123456`, without the fraction when it is 0.
pub fn format_datetime(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, day) = civil_from_days(days);
    let base = format!(
        "{y:04}-{m:02}-{day:02} {:02}:{:02}:{:02}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    );
    match d.subsec_micros() {
        0 => base,
        us => format!("{base}.{us:06}"),
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn format_datetime_is_pythons_str_of_a_utc_datetime() {
        assert_eq!(
            format_datetime(UNIX_EPOCH + Duration::from_micros(951_782_400_000_001)),
            "2000-02-29 00:00:00.000001"
        );
        assert_eq!(format_datetime(UNIX_EPOCH), "1970-01-01 00:00:00");
    }
}
