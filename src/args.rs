//! Parsing of the arguments the limiter commands share:
//! `<limit> <window> [COST n] [NOW t] [PEEK]` (and `BURST b` for GCRA).
//!
//! Everything is validated here, before a command touches a key, so that a bad
//! argument can never leave a half-done write behind.

use crate::error::{Error, Result};

/// Largest `limit`, `COST` and `BURST`. Far beyond any real budget, and small enough
/// that every product the limiters compute fits comfortably in 128 bits.
pub const MAX_AMOUNT: u64 = 1_000_000_000_000_000;

/// Largest window: ten years. Keeps `now + 2 * window` far from overflowing.
pub const MAX_WINDOW_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// 1973-01-01T00:00:00Z in microseconds. Anything smaller is almost surely a clock
/// read in seconds or milliseconds, which would silently break every window.
pub const MIN_NOW_US: u64 = 94_694_400_000_000;

/// 2^53 - 1 (in the year 2255): the largest timestamp a sorted-set score (a double)
/// holds exactly, so that SLIDELOG entries keep their exact microsecond.
pub const MAX_NOW_US: u64 = (1 << 53) - 1;

/// A window length. Always a whole number of milliseconds (the units the command
/// accepts), kept in microseconds because that is the limiters' clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    ms: u64,
}

impl Window {
    #[cfg(test)]
    pub const TEN_SECONDS: Window = Window { ms: 10_000 };

    pub fn from_ms(ms: u64) -> Result<Window> {
        if ms == 0 || ms > MAX_WINDOW_MS {
            return Err(Error::BadWindow {
                max_ms: MAX_WINDOW_MS,
            });
        }
        Ok(Window { ms })
    }

    pub fn ms(self) -> u64 {
        self.ms
    }

    pub fn us(self) -> u64 {
        // Cannot overflow: ms <= MAX_WINDOW_MS.
        self.ms * 1000
    }

    /// Windows given in whole seconds name their keys in seconds, as the scripts do.
    pub fn whole_seconds(self) -> bool {
        self.ms.is_multiple_of(1000)
    }
}

/// The parsed arguments of one limiter call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterArgs {
    pub limit: u64,
    pub window: Window,
    pub cost: u64,
    /// Explicit decision time in unix microseconds; `None` means the server clock.
    pub now: Option<u64>,
    pub peek: bool,
    /// Only accepted by commands that allow it (GCRA).
    pub burst: Option<u64>,
}

/// Parses `<limit> <window> [options...]` (the arguments after the key).
pub fn parse_limiter(
    command: &'static str,
    args: &[&[u8]],
    accepts_burst: bool,
) -> Result<LimiterArgs> {
    let (limit, window, options) = match args {
        [limit, window, options @ ..] => (limit, window, options),
        _ => return Err(Error::WrongArity(command)),
    };
    let limit = parse_amount("limit", limit)?;
    let window = parse_window(window)?;

    let mut cost = None;
    let mut now = None;
    let mut peek = false;
    let mut burst = None;
    let mut rest = options.iter();
    while let Some(option) = rest.next() {
        let name = option_name(option, accepts_burst)?;
        let mut value = || rest.next().ok_or(Error::MissingValue(name));
        match name {
            "COST" => set_once(&mut cost, name, parse_amount("COST", value()?)?)?,
            "NOW" => set_once(&mut now, name, parse_now(value()?)?)?,
            "BURST" => set_once(&mut burst, name, parse_amount("BURST", value()?)?)?,
            _ => {
                if peek {
                    return Err(Error::RepeatedOption(name));
                }
                peek = true;
            }
        }
    }
    Ok(LimiterArgs {
        limit,
        window,
        cost: cost.unwrap_or(1),
        now,
        peek,
        burst,
    })
}

/// Matches an option keyword case-insensitively, as Redis does for its own options.
fn option_name(option: &[u8], accepts_burst: bool) -> Result<&'static str> {
    let known: &[&'static str] = if accepts_burst {
        &["COST", "NOW", "PEEK", "BURST"]
    } else {
        &["COST", "NOW", "PEEK"]
    };
    known
        .iter()
        .find(|name| option.eq_ignore_ascii_case(name.as_bytes()))
        .copied()
        .ok_or_else(|| Error::UnknownOption(String::from_utf8_lossy(option).into_owned()))
}

fn set_once<T>(slot: &mut Option<T>, name: &'static str, value: T) -> Result<()> {
    if slot.is_some() {
        return Err(Error::RepeatedOption(name));
    }
    *slot = Some(value);
    Ok(())
}

/// A plain decimal number: digits only, no sign, no spaces, no overflow.
pub fn parse_u64(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    bytes.iter().try_fold(0u64, |acc, &b| {
        let digit = (b as char).to_digit(10)?;
        acc.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A counter exactly as Redis's INCRBY reads one: an optional minus sign and digits
/// without leading zeros, within i64. Anything INCRBY would refuse is refused here,
/// so the module never writes a counter its replicas could not re-apply.
pub fn parse_counter(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', digits)) => (true, digits),
        _ => (false, bytes),
    };
    let leading_zero = digits.len() > 1 && digits.first() == Some(&b'0');
    if leading_zero || (negative && digits == b"0") {
        return None;
    }
    let magnitude = i128::from(parse_u64(digits)?);
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

fn parse_amount(name: &'static str, bytes: &[u8]) -> Result<u64> {
    match parse_u64(bytes) {
        Some(n) if (1..=MAX_AMOUNT).contains(&n) => Ok(n),
        _ => Err(Error::NotPositive {
            name,
            max: MAX_AMOUNT,
        }),
    }
}

/// `60` and `60s` are seconds, `1500ms` milliseconds.
pub fn parse_window(bytes: &[u8]) -> Result<Window> {
    let (digits, ms_per_unit) = if let Some(digits) = strip_suffix_ignore_case(bytes, b"ms") {
        (digits, 1)
    } else if let Some(digits) = strip_suffix_ignore_case(bytes, b"s") {
        (digits, 1000)
    } else {
        (bytes, 1000)
    };
    parse_u64(digits)
        .and_then(|n| n.checked_mul(ms_per_unit))
        .ok_or(Error::BadWindow {
            max_ms: MAX_WINDOW_MS,
        })
        .and_then(Window::from_ms)
}

fn strip_suffix_ignore_case<'a>(bytes: &'a [u8], suffix: &[u8]) -> Option<&'a [u8]> {
    let (head, tail) = bytes.split_at_checked(bytes.len().checked_sub(suffix.len())?)?;
    tail.eq_ignore_ascii_case(suffix).then_some(head)
}

pub fn parse_now(bytes: &[u8]) -> Result<u64> {
    let now = parse_u64(bytes).ok_or(Error::BadNow)?;
    if now < MIN_NOW_US / 1_000_000 * 1000 {
        return Err(Error::NowUnit {
            value: now,
            unit: "seconds",
        });
    }
    if now < MIN_NOW_US {
        return Err(Error::NowUnit {
            value: now,
            unit: "milliseconds",
        });
    }
    if now > MAX_NOW_US {
        return Err(Error::BadNow);
    }
    Ok(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<LimiterArgs> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_limiter("rl.test", &bytes, false)
    }

    const NOW: &str = "1764480000000000";

    #[test]
    fn defaults() -> Result<()> {
        let a = parse(&["10", "60"])?;
        assert_eq!(a.limit, 10);
        assert_eq!(a.window.ms(), 60_000);
        assert_eq!(a.cost, 1);
        assert_eq!(a.now, None);
        assert!(!a.peek);
        Ok(())
    }

    #[test]
    fn window_units() {
        assert_eq!(parse_window(b"60").map(Window::ms), Ok(60_000));
        assert_eq!(parse_window(b"60s").map(Window::ms), Ok(60_000));
        assert_eq!(parse_window(b"60S").map(Window::ms), Ok(60_000));
        assert_eq!(parse_window(b"1500ms").map(Window::ms), Ok(1500));
        assert_eq!(parse_window(b"1500ms").map(Window::us), Ok(1_500_000));
        assert_eq!(
            parse_window(b"1500ms").map(Window::whole_seconds),
            Ok(false)
        );
        assert_eq!(parse_window(b"2000ms").map(Window::whole_seconds), Ok(true));
        for bad in [
            "",
            "0",
            "0s",
            "0ms",
            "-1",
            "1.5",
            "s",
            "ms",
            "10m",
            "10 s",
            "1e3",
            "99999999999999999999",
            "315360001s",
        ] {
            assert!(parse_window(bad.as_bytes()).is_err(), "{bad:?} accepted");
        }
        assert!(parse_window(b"315360000s").is_ok());
    }

    #[test]
    fn options_in_any_order_and_case() -> Result<()> {
        let a = parse(&["10", "1s", "peek", "now", NOW, "Cost", "3"])?;
        assert_eq!(a.cost, 3);
        assert_eq!(a.now, Some(1_764_480_000_000_000));
        assert!(a.peek);
        Ok(())
    }

    #[test]
    fn bad_options() {
        assert_eq!(
            parse(&["10", "1s", "FOO"]),
            Err(Error::UnknownOption("FOO".into()))
        );
        assert_eq!(
            parse(&["10", "1s", "PEEK", "PEEK"]),
            Err(Error::RepeatedOption("PEEK"))
        );
        assert_eq!(
            parse(&["10", "1s", "COST", "1", "COST", "1"]),
            Err(Error::RepeatedOption("COST"))
        );
        assert_eq!(
            parse(&["10", "1s", "COST"]),
            Err(Error::MissingValue("COST"))
        );
        assert_eq!(
            parse(&["10", "1s", "BURST", "2"]),
            Err(Error::UnknownOption("BURST".into()))
        );
        assert_eq!(parse(&["10"]), Err(Error::WrongArity("rl.test")));
    }

    #[test]
    fn amounts() {
        for bad in [
            "0",
            "-1",
            "+1",
            "1.0",
            "",
            " 1",
            "abc",
            "18446744073709551616",
        ] {
            assert!(parse(&[bad, "1"]).is_err(), "limit {bad:?}");
            assert!(parse(&["1", "1", "COST", bad]).is_err(), "cost {bad:?}");
        }
        assert!(parse(&["1000000000000000", "1"]).is_ok());
        assert!(parse(&["1000000000000001", "1"]).is_err());
    }

    #[test]
    fn now_names_the_unit() {
        assert_eq!(
            parse(&["1", "1", "NOW", "1764480000"]),
            Err(Error::NowUnit {
                value: 1_764_480_000,
                unit: "seconds"
            })
        );
        assert_eq!(
            parse(&["1", "1", "NOW", "1764480000000"]),
            Err(Error::NowUnit {
                value: 1_764_480_000_000,
                unit: "milliseconds"
            })
        );
        assert_eq!(
            parse(&["1", "1", "NOW", "9007199254740992"]),
            Err(Error::BadNow)
        );
        assert_eq!(parse(&["1", "1", "NOW", "-5"]), Err(Error::BadNow));
        assert!(parse(&["1", "1", "NOW", "9007199254740991"]).is_ok());
    }

    #[test]
    fn integers() {
        assert_eq!(parse_counter(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_counter(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_counter(b"0"), Some(0));
        assert_eq!(parse_counter(b"-12"), Some(-12));
        for bad in [
            "9223372036854775808",
            "-",
            "",
            "12a",
            "007",
            "-0",
            "+1",
            " 1",
            "1.0",
        ] {
            assert_eq!(parse_counter(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
