//! Human forms of durations, sizes and counts: parsing what people type (`250ms`, `8GiB`) and
//! printing numbers with their unit stated (`1 sample`, `2 samples`). GiB is 2^30 bytes, GB is
//! 10^9 bytes; nothing is guessed. Also text from a file, made fit to print (`printable`).

use std::time::Duration;

/// Why a duration or a size as typed could not be read; each names the text given (and
/// `--interval` its flag).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("'{0}' is not a duration (examples: 1s, 250ms, 100us, 0.5)")]
    NotADuration(String),
    #[error("unknown duration unit '{unit}' in '{text}' (use ns, us, ms, s, m or h)")]
    DurationUnit { unit: String, text: String },
    #[error("duration '{0}' is out of range")]
    DurationRange(String),
    #[error("--interval {given} is below the shortest interval, {shortest}: reading /proc takes longer than that, so almost every tick would be missed")]
    IntervalTooShort { given: String, shortest: String },
    #[error("'{0}' is not a size (examples: 4096, 512MiB, 8GiB, 2GB)")]
    NotASize(String),
    #[error("'{text}': kB is ambiguous (the kernel's kB, as /proc writes it and memmon reads it in --columns rss_kb, is 1024 bytes; SI's is 1000): write {number}KiB, or the bytes")]
    AmbiguousKb { text: String, number: String },
    #[error("unknown size unit '{unit}' in '{text}' (use B, KiB, MiB, GiB, TiB or K, M, G, T for them, or MB, GB, TB: powers of 1000)")]
    SizeUnit { unit: String, text: String },
    #[error("size '{0}' is out of range")]
    SizeRange(String),
}

impl crate::error::Classified for UnitError {
    /// A value typed on the command line or in a workload's steps: bad input.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// Parses `1s`, `250ms`, `100us`, `2m`, `1h` or plain seconds (`0.5`).
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || UnitError::NotADuration(text.to_string());
    if num.is_empty() {
        return Err(bad());
    }
    let value: f64 = num.parse().map_err(|_| bad())?;
    let seconds_per_unit = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(UnitError::DurationUnit {
                unit: other.to_string(),
                text: text.to_string(),
            })
        }
    };
    let secs = value * seconds_per_unit;
    if !secs.is_finite() || secs > 1e9 {
        return Err(UnitError::DurationRange(text.to_string()));
    }
    Ok(Duration::from_nanos((secs * 1e9).round() as u64))
}

/// The shortest sampling interval: one tick reads a tree's /proc files in tens of microseconds,
/// so a shorter schedule only piles up missed ticks and writes rows faster than they are read.
pub const MIN_INTERVAL: Duration = Duration::from_micros(100);

/// Parses a sampling interval (`--interval`), refusing one below `MIN_INTERVAL`.
pub fn parse_interval(text: &str) -> Result<Duration, UnitError> {
    let d = parse_duration(text)?;
    if d < MIN_INTERVAL {
        return Err(UnitError::IntervalTooShort {
            given: text.trim().to_string(),
            shortest: fmt_interval(MIN_INTERVAL),
        });
    }
    Ok(d)
}

/// Parses a size: plain bytes (`4096`), binary units (`512KiB`, `8GiB`, `1TiB`), decimal units
/// (`2MB`, `2GB`) or bytes (`10B`). Fractions are allowed (`1.5GiB`). `kB` is refused: memmon
/// reads it as the kernel writes it in /proc, 1024 bytes (`--columns rss_kb`), which next to
/// MB = 10^6 is too easy to misread in a budget; `KiB` or plain bytes say which.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || UnitError::NotASize(text.to_string());
    if num.is_empty() {
        return Err(bad());
    }
    let value: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "KiB" | "K" | "k" => 1024.0,
        "MiB" | "M" => 1024.0 * 1024.0,
        "GiB" | "G" => 1024.0 * 1024.0 * 1024.0,
        "TiB" | "T" => 1024.0f64.powi(4),
        "kB" | "KB" | "kb" | "Kb" => {
            return Err(UnitError::AmbiguousKb {
                text: text.to_string(),
                number: num.to_string(),
            })
        }
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        other => {
            return Err(UnitError::SizeUnit {
                unit: other.to_string(),
                text: text.to_string(),
            })
        }
    };
    let bytes = value * mult;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(UnitError::SizeRange(text.to_string()));
    }
    Ok(bytes.round() as u64)
}

/// Formats bytes with a binary unit and its name: `1.50 GiB`, `512.0 MiB`, `4096 B`.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value >= 100.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// Formats a signed byte delta: `+1.20 GiB`, `-512.0 MiB`, `0 B`.
pub fn fmt_bytes_signed(delta: i64) -> String {
    match delta.signum() {
        1 => format!("+{}", fmt_bytes(delta as u64)),
        -1 => format!("-{}", fmt_bytes(delta.unsigned_abs())),
        _ => "0 B".to_string(),
    }
}

/// Formats seconds for people: `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`.
pub fn fmt_seconds(secs: f64) -> String {
    if secs < 0.0 {
        return format!("-{}", fmt_seconds(-secs));
    }
    // Each unit as long as its rounded value stays below the next (999.6 ms is `1.00 s`, not
    // `1000 ms`).
    if (secs * 1e6).round() < 1000.0 {
        return format!("{:.0} µs", secs * 1e6);
    }
    if (secs * 1e3).round() < 1000.0 {
        return format!("{:.0} ms", secs * 1e3);
    }
    if (secs * 100.0).round() < 6000.0 {
        return format!("{secs:.2} s");
    }
    let total = secs.round() as u64;
    if total < 3600 {
        return format!("{} min {:02} s", total / 60, total % 60);
    }
    format!("{} h {:02} min", total / 3600, (total % 3600) / 60)
}

/// Formats a duration as the shortest exact human form: `1s`, `250ms`, `100us`.
pub fn fmt_interval(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// Formats milliseconds since the Unix epoch as UTC `YYYY-MM-DD HH:MM:SS.mmm`.
pub fn fmt_unix_ms(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let ms = unix_ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{ms:03} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) — H. Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

/// A count and its noun, the noun plural unless the count is exactly 1: `1 sample`,
/// `2 samples`, `0 processes`. Every count memmon prints before a noun goes through here.
pub fn count<N: Copy + std::fmt::Display + TryInto<u64>>(n: N, noun: &str) -> String {
    format!("{n} {}", plural(n, noun))
}

/// `noun` as count `n` takes it: as given for exactly 1, else its plural (`sample` → `samples`,
/// `process` → `processes`, `entry` → `entries`; the last word of a phrase: `missed tick` →
/// `missed ticks`), for a count printed apart from its noun (`1 of 3 runs`).
pub fn plural<N: TryInto<u64>>(n: N, noun: &str) -> String {
    if n.try_into().is_ok_and(|n| n == 1) {
        return noun.to_string();
    }
    let consonant_y = noun.strip_suffix('y').is_some_and(|stem| {
        stem.chars()
            .last()
            .is_some_and(|c| !"aeiou".contains(c.to_ascii_lowercase()))
    });
    if consonant_y {
        format!("{}ies", &noun[..noun.len() - 1])
    } else if ["s", "x", "ch", "sh"].iter().any(|e| noun.ends_with(e)) {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_documented_form() {
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
        assert_eq!(parse_duration("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn sizes_distinguish_binary_and_decimal_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_size("12 bananas").is_err());
    }

    #[test]
    fn kb_is_refused_as_ambiguous_naming_what_to_write() {
        for bad in ["512kB", "512KB", "512kb"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains("1024") && e.contains("512KiB"), "{e}");
        }
        assert_eq!(parse_size("512KiB").unwrap(), 512 << 10);
    }

    #[test]
    fn bytes_print_with_binary_units() {
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(3 << 29), "1.50 GiB");
        assert_eq!(fmt_bytes(200 << 30), "200.0 GiB");
        assert_eq!(fmt_bytes_signed(-(1 << 20)), "-1.00 MiB");
    }

    #[test]
    fn unix_ms_prints_as_utc() {
        assert_eq!(fmt_unix_ms(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(
            fmt_unix_ms(1_771_372_328_313),
            "2026-02-17 23:52:08.313 UTC"
        );
    }

    #[test]
    fn an_interval_below_100us_is_refused_naming_the_flag() {
        assert_eq!(parse_interval("100us").unwrap(), MIN_INTERVAL);
        for bad in ["100ns", "99us", "0", "0s"] {
            let e = parse_interval(bad).unwrap_err().to_string();
            assert!(e.contains("--interval") && e.contains("100us"), "{e}");
        }
        assert!(parse_interval("banana").is_err());
    }

    #[test]
    fn seconds_take_the_unit_their_rounded_value_fits() {
        for (secs, shown) in [
            (0.000_000_4, "0 µs"),
            (0.000_999_6, "1 ms"),
            (0.012_3, "12 ms"),
            (0.999_4, "999 ms"),
            (0.999_6, "1.00 s"),
            (1.234, "1.23 s"),
            (59.996, "1 min 00 s"),
            (3_600.0, "1 h 00 min"),
            (-0.5, "-500 ms"),
        ] {
            assert_eq!(fmt_seconds(secs), shown, "{secs}");
        }
    }

    #[test]
    fn intervals_print_exactly() {
        assert_eq!(fmt_interval(Duration::from_micros(100)), "100us");
        assert_eq!(fmt_interval(Duration::from_millis(1500)), "1500ms");
        assert_eq!(fmt_interval(Duration::from_secs(1)), "1s");
    }

    #[test]
    fn a_count_of_exactly_one_takes_the_singular() {
        assert_eq!(count(1u64, "sample"), "1 sample");
        assert_eq!(count(0u32, "sample"), "0 samples");
        assert_eq!(count(2usize, "file"), "2 files");
        assert_eq!(count(1i32, "process"), "1 process");
        assert_eq!(count(3u64, "process"), "3 processes");
        assert_eq!(count(5u64, "entry"), "5 entries");
        assert_eq!(count(5u64, "day"), "5 days");
        assert_eq!(count(1u64, "missed tick"), "1 missed tick");
        assert_eq!(count(9u64, "missed tick"), "9 missed ticks");
        assert_eq!(count(2u64, "CPU"), "2 CPUs");
        assert_eq!(count(-1i64, "run"), "-1 runs");
        assert_eq!(plural(4u64, "OOM kill"), "OOM kills");
    }
}

/// `text` fit for a message or a label: its first `max` characters, control characters
/// written as escapes (`\x1b`, as `outside::shown` writes them), `...` where it was cut. What a file holds never reaches a
/// terminal as escape sequences, nor an SVG as characters XML forbids.
pub fn printable(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for (n, c) in text.chars().enumerate() {
        if n == max {
            out.push_str("...");
            break;
        }
        let mut one = [0u8; 4];
        out.push_str(&crate::outside::shown(c.encode_utf8(&mut one)));
    }
    out
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn control_characters_are_escaped_and_long_text_cut() {
        assert_eq!(
            super::printable("a\u{1b}[31mb\u{0}", 80),
            "a\\x1b[31mb\\x00"
        );
        assert_eq!(super::printable("abcdef", 3), "abc...");
        assert_eq!(super::printable("héllo", 80), "héllo");
    }
}
