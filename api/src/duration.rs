//! The duration syntax of every C4 key and flag: a non-negative number and a
//! unit, `250ms`, `15s`, `2m`, also `ns`, `us`, `h` and decimals (`1.5s`).
//! A bare number is refused: a unit-less `30` is the classic ms-or-s mistake.

use std::time::Duration;

/// Why a duration string was refused; the message repeats the bad text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationParseError {
    /// The text was empty.
    #[error("empty duration; expected a number and a unit such as 250ms, 15s or 2m")]
    Empty,
    /// No unit, or one not in ns, us, ms, s, m, h.
    #[error("{0:?} has no known unit; expected one of ns, us, ms, s, m, h (e.g. 250ms, 15s, 2m)")]
    BadUnit(String),
    /// The number part is not a non-negative decimal.
    #[error("{0:?} is not a non-negative number followed by a unit (e.g. 250ms, 15s, 2m)")]
    BadNumber(String),
    /// The value does not fit in nanoseconds.
    #[error("{0:?} is too large")]
    TooLarge(String),
}

/// Parses `250ms`, `15s`, `2m`, `1.5s`, `100us`, `1h` into a [`Duration`].
pub fn parse_duration(text: &str) -> Result<Duration, DurationParseError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationParseError::Empty);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| DurationParseError::BadUnit(text.to_string()))?;
    let (num, unit) = s.split_at(split);
    let nanos_per_unit: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(DurationParseError::BadUnit(text.to_string())),
    };
    if num.is_empty() || num.starts_with('.') && num.len() == 1 {
        return Err(DurationParseError::BadNumber(text.to_string()));
    }
    // Integers are exact; decimals go through f64 and are rounded to the nanosecond.
    if let Ok(n) = num.parse::<u64>() {
        let nanos = u128::from(n) * nanos_per_unit as u128;
        return u64::try_from(nanos)
            .map(Duration::from_nanos)
            .map_err(|_| DurationParseError::TooLarge(text.to_string()));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| DurationParseError::BadNumber(text.to_string()))?;
    if !value.is_finite() || value < 0.0 {
        return Err(DurationParseError::BadNumber(text.to_string()));
    }
    let nanos = (value * nanos_per_unit).round();
    if nanos >= u64::MAX as f64 {
        return Err(DurationParseError::TooLarge(text.to_string()));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// Formats a duration the way the parser reads it back, in the largest unit
/// that keeps it exact (`1500ms`, `15s`, `2m`).
pub fn format_duration(d: Duration) -> String {
    let n = d.as_nanos();
    for (unit, size) in [
        ("h", 3_600_000_000_000u128),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if n != 0 && n.is_multiple_of(size) {
            return format!("{}{unit}", n / size);
        }
    }
    format!("{n}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_c4_examples() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("0ms"), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_unitless_negative_and_unknown_units_naming_the_text() {
        for bad in ["30", "-5s", "5 parsecs", "", "abc", "1e3s", "s"] {
            let err = parse_duration(bad).expect_err(bad);
            if !bad.is_empty() {
                assert!(err.to_string().contains(bad), "{err} should name {bad}");
            }
        }
    }

    #[test]
    fn format_round_trips() {
        for d in ["250ms", "15s", "2m", "1500ms", "7ns", "1h"] {
            let parsed = parse_duration(d).unwrap();
            assert_eq!(parse_duration(&format_duration(parsed)).unwrap(), parsed);
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    }
}
