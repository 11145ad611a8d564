//! Parsing of the arguments the limiter commands share:
//! `<limit> <window> [COST n] [NOW t] [PEEK]` (and `BURST b` for GCRA).
//!
//! Everything is validated here, before a command touches a key, so that a bad
//! argument can never leave a half-done write behind.

use crate::error::{Error, Result};
use crate::limit::{
    Block, Growth, Mode, Request, Spec, Window, MAX_AMOUNT, MAX_LONG_WINDOW_MS, MAX_NOW_US,
    MAX_WINDOW_MS, MIN_NOW_US,
};

/// The options only some algorithms take, and the longest window.
#[derive(Debug, Clone, Copy)]
pub struct Accepts {
    /// GCRA's `BURST`.
    pub burst: bool,
    /// TOKENBUCKET's `REFILL`.
    pub refill: bool,
    /// RL.COUNTER's `COUNTALL`, `RENEW` and `ESCALATE`.
    pub counts: bool,
    /// The longest window, in ms.
    pub longest_window_ms: u64,
}

impl Default for Accepts {
    fn default() -> Accepts {
        Accepts {
            burst: false,
            refill: false,
            counts: false,
            longest_window_ms: MAX_WINDOW_MS,
        }
    }
}

/// Parses `<limit> <window> [options...]` (the arguments after the key).
pub fn parse_limiter(command: &'static str, args: &[&[u8]], accepts: Accepts) -> Result<Request> {
    let Accepts { counts, .. } = accepts;
    let (limit, window, options) = match args {
        [limit, window, options @ ..] => (limit, window, options),
        _ => return Err(Error::WrongArity(command)),
    };
    let mut spec = parse_spec(limit, window, accepts.longest_window_ms)?;
    let mut cost = None;
    let mut now = None;
    let mut mode = None;
    let mut block = BlockArgs::default();
    let (mut count_all, mut renew, mut escalate) = (None, None, None);
    let mut rest = options.iter();
    while let Some(option) = rest.next() {
        let name = keyword(option)
            .filter(|&name| {
                (name != "BURST" || accepts.burst)
                    && (name != "REFILL" || accepts.refill)
                    && name != "LEASE"
            })
            .ok_or_else(|| unknown(option))?;
        let mut value = || rest.next().ok_or(Error::MissingValue(name));
        match name {
            "COST" => set_once(&mut cost, name, parse_amount("COST", value()?)?)?,
            "BURST" => set_once(&mut spec.burst, name, parse_amount("BURST", value()?)?)?,
            "REFILL" => set_once(&mut spec.refill, name, parse_amount("REFILL", value()?)?)?,
            "NOW" => set_once(&mut now, name, parse_now(value()?)?)?,
            "BLOCK" | "BACKOFF" => block.take(name, Some(value()?))?,
            "EXTEND" | "STRIKES" => block.take(name, None)?,
            "COUNTALL" | "RENEW" | "ESCALATE" if !counts => return Err(Error::CounterOnly(name)),
            "COUNTALL" => set_once(&mut count_all, name, ())?,
            "RENEW" => set_once(&mut renew, name, ())?,
            "ESCALATE" => set_once(&mut escalate, name, ())?,
            _ => set_mode(&mut mode, name)?,
        }
    }
    spec.count_all = count_all.is_some();
    spec.renew = renew.is_some();
    spec.escalate = escalate.is_some();
    // RENEW restarts the window on every counted call, ESCALATE lengthens it on every
    // denial: they answer the same question two ways.
    if spec.renew && spec.escalate {
        return Err(Error::RenewAndEscalate);
    }
    spec.cost = cost.unwrap_or(1);
    spec.block = block.finish()?;
    let mode = mode.unwrap_or(Mode::Spend);
    if mode == Mode::Impose && spec.block.is_none() {
        return Err(Error::NeedsBlock("IMPOSE"));
    }
    Ok(Request {
        spec,
        now,
        mode,
        member: None,
    })
}

/// `BLOCK <duration> [EXTEND | BACKOFF <max>] [STRIKES]`, gathered in any order
/// among a limit's options.
#[derive(Default)]
struct BlockArgs {
    duration: Option<Window>,
    extend: Option<()>,
    backoff: Option<Window>,
    strikes: Option<()>,
}

impl BlockArgs {
    fn take(&mut self, name: &'static str, value: Option<&[u8]>) -> Result<()> {
        let duration = || {
            parse_window(value.unwrap_or_default()).map_err(|_| Error::BadDuration {
                name,
                max_ms: MAX_WINDOW_MS,
            })
        };
        match name {
            "BLOCK" => set_once(&mut self.duration, name, duration()?),
            "BACKOFF" => set_once(&mut self.backoff, name, duration()?),
            "EXTEND" => set_once(&mut self.extend, name, ()),
            _ => set_once(&mut self.strikes, name, ()),
        }
    }

    fn finish(self) -> Result<Option<Block>> {
        let Some(duration) = self.duration else {
            let given = [
                ("EXTEND", self.extend.is_some()),
                ("BACKOFF", self.backoff.is_some()),
                ("STRIKES", self.strikes.is_some()),
            ];
            return match given.iter().find(|g| g.1) {
                Some(&(name, _)) => Err(Error::NeedsBlock(name)),
                None => Ok(None),
            };
        };
        let growth = match (self.extend, self.backoff) {
            (Some(()), Some(_)) => return Err(Error::ExtendAndBackoff),
            (Some(()), None) => Growth::Extend,
            (None, Some(max)) if max.ms() < duration.ms() => return Err(Error::BadBackoff),
            (None, Some(max)) => Growth::Backoff { max },
            (None, None) => Growth::Fixed,
        };
        Ok(Some(Block {
            duration,
            growth,
            strikes: self.strikes.is_some(),
        }))
    }
}

/// `<limit> <window>`, the window at most `longest_ms` (the algorithm's bound).
pub fn parse_spec(limit: &[u8], window: &[u8], longest_ms: u64) -> Result<Spec> {
    Ok(Spec::new(
        parse_amount("limit", limit)?,
        parse_window_upto(window, longest_ms)?,
    ))
}

/// PEEK, REFUND and RESET: at most one of them.
fn set_mode(mode: &mut Option<Mode>, name: &'static str) -> Result<()> {
    let new = match name {
        "PEEK" => Mode::Peek,
        "REFUND" => Mode::Refund,
        "IMPOSE" => Mode::Impose,
        _ => Mode::Reset,
    };
    match *mode {
        None => {
            *mode = Some(new);
            Ok(())
        }
        Some(old) if old == new => Err(Error::RepeatedOption(name)),
        Some(_) => Err(Error::ConflictingModes),
    }
}

/// The most limits one RL.ALL call may check: each is a few keys opened and, for a
/// SLIDELOG limit, up to its COST members added (at most MAX_LOG_LIMIT), so the
/// call's work stays bounded.
pub const MAX_LIMITS: u64 = 16;

/// What RL.ALL's parser must know of the algorithm a limit names. The parser sits
/// below the algorithms, so it asks through this rather than naming them.
pub trait Named: Copy {
    fn accepts_burst(&self) -> bool;
    fn accepts_refill(&self) -> bool;
    /// Its longest window, in ms.
    fn longest_window_ms(&self) -> u64;
    /// Whether a limit of it may take `BLOCK` (else the error why not).
    fn check_block(&self) -> Result<()>;
    /// Whether it names a member (CONCURRENCY's lease).
    fn uses_member(&self) -> bool;
}

/// One limit of an RL.ALL call.
#[derive(Clone, Copy)]
pub struct LimitArgs<A> {
    pub algorithm: A,
    /// Position of its key among the arguments given to `parse_all`.
    pub key: usize,
    pub spec: Spec,
}

/// A parsed RL.ALL call.
pub struct AllRequest<A> {
    pub limits: Vec<LimitArgs<A>>,
    pub now: Option<u64>,
    pub mode: Mode,
    /// Position of the `LEASE` id among the arguments, for CONCURRENCY limits.
    pub lease: Option<usize>,
}

/// `RL.ALL <numlimits> <algo> <key> <limit> <window> [BURST b] [COST n] ... [NOW t]
/// [LEASE id] [PEEK|REFUND|RESET]`, the arguments after the command name.
/// `algorithm` finds an algorithm by its name.
pub fn parse_all<A: Named>(
    args: &[&[u8]],
    algorithm: impl Fn(&[u8]) -> Option<A>,
) -> Result<AllRequest<A>> {
    let Some((count, _)) = args.split_first() else {
        return Err(Error::WrongArity("rl.all"));
    };
    let count = match parse_u64(count) {
        Some(n) if (1..=MAX_LIMITS).contains(&n) => n,
        _ => return Err(Error::BadLimitCount(MAX_LIMITS)),
    };
    let mut limits = Vec::new();
    let mut at = 1;
    let word = |i: usize| args.get(i).copied();
    while (limits.len() as u64) < count {
        let (Some(name), Some(_key), Some(limit), Some(window)) =
            (word(at), word(at + 1), word(at + 2), word(at + 3))
        else {
            return Err(Error::WrongArity("rl.all"));
        };
        let algorithm = algorithm(name).ok_or_else(|| Error::UnknownAlgorithm(lossy(name)))?;
        let mut spec = parse_spec(limit, window, algorithm.longest_window_ms())?;
        let key = at + 1;
        at += 4;
        let mut cost = None;
        let mut block = BlockArgs::default();
        while let Some(option) = word(at) {
            let name = match keyword(option) {
                Some(
                    name @ ("COST" | "BURST" | "REFILL" | "BLOCK" | "BACKOFF" | "EXTEND"
                    | "STRIKES"),
                ) => name,
                Some(name @ ("COUNTALL" | "RENEW" | "ESCALATE")) => {
                    return Err(Error::NotInAll(name))
                }
                _ => break,
            };
            if (name == "BURST" && !algorithm.accepts_burst())
                || (name == "REFILL" && !algorithm.accepts_refill())
            {
                return Err(unknown(option));
            }
            if matches!(name, "EXTEND" | "STRIKES") {
                block.take(name, None)?;
                at += 1;
                continue;
            }
            let value = word(at + 1).ok_or(Error::MissingValue(name))?;
            if matches!(name, "BLOCK" | "BACKOFF") {
                block.take(name, Some(value))?;
            } else if name == "COST" {
                set_once(&mut cost, name, parse_amount(name, value)?)?;
            } else if name == "REFILL" {
                set_once(&mut spec.refill, name, parse_amount(name, value)?)?;
            } else {
                set_once(&mut spec.burst, name, parse_amount(name, value)?)?;
            }
            at += 2;
        }
        spec.cost = cost.unwrap_or(1);
        spec.block = block.finish()?;
        if spec.block.is_some() {
            algorithm.check_block()?;
        }
        limits.push(LimitArgs {
            algorithm,
            key,
            spec,
        });
    }
    let mut now = None;
    let mut mode = None;
    let mut lease = None;
    while let Some(option) = word(at) {
        let name = keyword(option).ok_or_else(|| unknown(option))?;
        if matches!(name, "COUNTALL" | "RENEW" | "ESCALATE") {
            return Err(Error::NotInAll(name));
        }
        if matches!(
            name,
            "COST" | "BURST" | "REFILL" | "BLOCK" | "BACKOFF" | "EXTEND" | "STRIKES"
        ) {
            return Err(Error::OptionAfterLimits(name));
        }
        if name == "NOW" {
            set_once(
                &mut now,
                name,
                parse_now(word(at + 1).ok_or(Error::MissingValue(name))?)?,
            )?;
            at += 2;
        } else if name == "LEASE" {
            word(at + 1).ok_or(Error::MissingValue(name))?;
            set_once(&mut lease, name, at + 1)?;
            at += 2;
        } else {
            set_mode(&mut mode, name)?;
            at += 1;
        }
    }
    for (i, a) in limits.iter().enumerate() {
        let same = |b: &LimitArgs<A>| word(b.key) == word(a.key);
        if limits.iter().skip(i + 1).any(same) {
            return Err(Error::DuplicateKey(lossy(word(a.key).unwrap_or_default())));
        }
    }
    let mode = mode.unwrap_or(Mode::Spend);
    let leased = limits.iter().any(|l| l.algorithm.uses_member());
    if lease.is_some() && !leased {
        return Err(Error::LeaseWithoutConcurrency);
    }
    if leased && lease.is_none() && matches!(mode, Mode::Spend | Mode::Refund) {
        return Err(Error::MissingLease);
    }
    if mode == Mode::Impose && limits.iter().all(|l| l.spec.block.is_none()) {
        return Err(Error::NeedsBlock("IMPOSE"));
    }
    Ok(AllRequest {
        limits,
        now,
        mode,
        lease,
    })
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An option keyword, matched case-insensitively as Redis matches its own options.
fn keyword(option: &[u8]) -> Option<&'static str> {
    // By length first: every call has options to look up.
    let names: &[&'static str] = match option.len() {
        3 => &["NOW"],
        4 => &["COST", "PEEK"],
        5 => &["RESET", "BURST", "LEASE", "BLOCK", "RENEW"],
        6 => &["REFUND", "EXTEND", "IMPOSE", "REFILL"],
        7 => &["BACKOFF", "STRIKES"],
        8 => &["COUNTALL", "ESCALATE"],
        _ => &[],
    };
    names
        .iter()
        .copied()
        .find(|name| option.eq_ignore_ascii_case(name.as_bytes()))
}

fn unknown(option: &[u8]) -> Error {
    Error::UnknownOption(lossy(option))
}

pub fn set_once<T>(slot: &mut Option<T>, name: &'static str, value: T) -> Result<()> {
    if slot.is_some() {
        return Err(Error::RepeatedOption(name));
    }
    *slot = Some(value);
    Ok(())
}

/// A plain decimal number: digits only, no sign, no spaces, no overflow.
#[inline]
pub fn parse_u64(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    // Any 19 digits fit in a u64: only a 20th can overflow it.
    let (head, last) = bytes.split_at(bytes.len().min(19));
    let digit = |b: u8| {
        Some(b.wrapping_sub(b'0'))
            .filter(|d| *d <= 9)
            .map(u64::from)
    };
    let mut n = 0u64;
    let mut rest = head;
    // Times, TATs and NOW have 16 digits: two words of eight, instead of sixteen
    // multiply-adds. Two words at most, so the three digits left cannot overflow.
    for _ in 0..2 {
        let Some((word, tail)) = rest.split_first_chunk::<8>() else {
            break;
        };
        n = n * 100_000_000 + eight_digits(*word)?;
        rest = tail;
    }
    for &b in rest {
        n = n * 10 + digit(b)?;
    }
    for &b in last {
        n = n.checked_mul(10)?.checked_add(digit(b)?)?;
    }
    Some(n)
}

/// Eight ASCII digits read as one little-endian word: checked all at once, then
/// combined in pairs, quads and the whole, each step a multiply, a shift and a mask.
fn eight_digits(word: [u8; 8]) -> Option<u64> {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    let x = u64::from_le_bytes(word);
    // '0'..='9' is 0x30..=0x39: the high nibble is 3, and adding 6 keeps it 3.
    if x & HIGH != ZEROS || x.wrapping_add(0x0606_0606_0606_0606) & HIGH != ZEROS {
        return None;
    }
    let d = x - ZEROS;
    // The first digit is the lowest byte: each step puts 10^k × earlier + later
    // into lanes twice as wide, none of which can carry into the next.
    let pairs = (d * 10 + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
    let quads = (pairs * 100 + (pairs >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((quads * 10_000 + (quads >> 32)) & 0xFFFF_FFFF)
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
    let magnitude = parse_u64(digits)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
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

/// `60` and `60s` are seconds, `1500ms` milliseconds; at most ten years.
pub fn parse_window(bytes: &[u8]) -> Result<Window> {
    parse_window_upto(bytes, MAX_WINDOW_MS)
}

/// `parse_window`, at most `longest_ms`.
pub fn parse_window_upto(bytes: &[u8], longest_ms: u64) -> Result<Window> {
    // Most windows are plain seconds: a last digit rules both suffixes out.
    let (digits, ms_per_unit) = if bytes.last().is_some_and(u8::is_ascii_digit) {
        (bytes, 1000)
    } else if let Some(digits) = strip_suffix_ignore_case(bytes, b"ms") {
        (digits, 1)
    } else if let Some(digits) = strip_suffix_ignore_case(bytes, b"s") {
        (digits, 1000)
    } else {
        (bytes, 1000)
    };
    parse_u64(digits)
        .and_then(|n| n.checked_mul(ms_per_unit))
        .ok_or(Error::BadWindow {
            max_ms: longest_ms.min(MAX_LONG_WINDOW_MS),
        })
        .and_then(|ms| Window::from_ms_upto(ms, longest_ms))
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
    use crate::algo::Algorithm;

    fn parse(args: &[&str]) -> Result<Request> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_limiter("rl.test", &bytes, Accepts::default())
    }

    const NOW: &str = "1764480000000000";

    /// The word-at-a-time parse against the plain definition, on every length and
    /// a bad byte at every position.
    #[test]
    fn numbers_parse_as_decimal_digits() {
        use rand::{rngs::StdRng, Rng, SeedableRng};
        let plain = |b: &[u8]| -> Option<u64> {
            if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(b).ok()?.parse().ok()
        };
        let mut rng = StdRng::seed_from_u64(8);
        for _ in 0..200_000 {
            let len = rng.gen_range(0..=22);
            let mut b: Vec<u8> = (0..len).map(|_| rng.gen_range(b'0'..=b'9')).collect();
            if len > 0 && rng.gen_bool(0.3) {
                let at = rng.gen_range(0..len);
                b[at] = rng.gen();
            }
            assert_eq!(
                parse_u64(&b),
                plain(&b),
                "{:?}",
                String::from_utf8_lossy(&b)
            );
        }
        for text in [
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
        ] {
            assert_eq!(parse_u64(text.as_bytes()), text.parse().ok(), "{text}");
        }
        for bad in [b'/', b':', b'0' + 0x80, 0x3a + 6, 0x2f] {
            for at in 0..16 {
                let mut b = *b"1764480000000000";
                b[at] = bad;
                assert_eq!(parse_u64(&b), None, "{bad} at {at}");
            }
        }
    }

    #[test]
    fn defaults() -> Result<()> {
        let a = parse(&["10", "60"])?;
        assert_eq!(a.spec.limit, 10);
        assert_eq!(a.spec.window.ms(), 60_000);
        assert_eq!(a.spec.cost, 1);
        assert_eq!(a.now, None);
        assert_eq!(a.mode, Mode::Spend);
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
    fn the_longest_window_is_the_callers() {
        let long = MAX_LONG_WINDOW_MS;
        let ten_years = Err(Error::BadWindow {
            max_ms: MAX_WINDOW_MS,
        });
        assert_eq!(parse_window(b"315360001s"), ten_years);
        assert_eq!(parse_window(b"x"), ten_years);
        let longest = parse_window_upto(b"9223372036854775ms", long);
        assert_eq!(longest.clone().map(Window::ms), Ok(long));
        assert_eq!(
            longest.clone().map(Window::us),
            Ok(i64::MAX as u64 / 1000 * 1000)
        );
        let too_long = Err(Error::BadWindow { max_ms: long });
        assert_eq!(parse_window_upto(b"9223372036854776ms", long), too_long);
        assert_eq!(parse_window_upto(b"9223372036854776", long), too_long);
        assert_eq!(parse_window_upto(b"x", long), too_long);
        // No caller can ask for more than a TTL the server holds.
        assert_eq!(parse_window_upto(b"9223372036854776ms", u64::MAX), too_long);
        let counter = Accepts {
            counts: true,
            longest_window_ms: long,
            ..Accepts::default()
        };
        let years = [b"1".as_slice(), b"9007201749600000ms"];
        let r = parse_limiter("rl.counter", &years, counter).map(|r| r.spec.window.ms());
        assert_eq!(r, Ok(9_007_201_749_600_000));
        let r = parse_limiter("rl.fixed", &years, Accepts::default());
        assert_eq!(r.err(), ten_years.err());
    }

    #[test]
    fn options_in_any_order_and_case() -> Result<()> {
        let a = parse(&["10", "1s", "peek", "now", NOW, "Cost", "3"])?;
        assert_eq!(a.spec.cost, 3);
        assert_eq!(a.now, Some(1_764_480_000_000_000));
        assert_eq!(a.mode, Mode::Peek);
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
        assert_eq!(
            parse(&["10", "1s", "LEASE", "x"]),
            Err(Error::UnknownOption("LEASE".into()))
        );
    }

    #[test]
    fn counter_options() -> Result<()> {
        let counter = |args: &[&str]| {
            let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            parse_limiter(
                "rl.counter",
                &bytes,
                Accepts {
                    counts: true,
                    ..Accepts::default()
                },
            )
        };
        let plain = counter(&["10", "1s"])?.spec;
        assert!(!plain.count_all && !plain.renew && !plain.escalate);
        let escalate = counter(&["10", "1s", "escalate"])?.spec;
        assert!(escalate.escalate && !escalate.count_all && !escalate.renew);
        assert_eq!(
            counter(&["10", "1s", "ESCALATE", "COUNTALL", "RENEW"]),
            Err(Error::RenewAndEscalate)
        );
        let both = counter(&["10", "1s", "renew", "COST", "2", "CountAll", "PEEK"])?;
        assert!(both.spec.count_all && both.spec.renew);
        assert_eq!((both.spec.cost, both.mode), (2, Mode::Peek));
        assert!(counter(&["10", "1s", "COUNTALL"])?.spec.count_all);
        assert!(!counter(&["10", "1s", "COUNTALL"])?.spec.renew);
        assert!(counter(&["10", "1s", "RENEW"])?.spec.renew);
        for name in ["COUNTALL", "RENEW", "ESCALATE"] {
            assert_eq!(
                counter(&["10", "1s", name, "NOW", NOW, name]),
                Err(Error::RepeatedOption(name))
            );
            assert_eq!(
                parse(&["10", "1s", name]),
                Err(Error::CounterOnly(name)),
                "only RL.COUNTER"
            );
        }
        Ok(())
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

    fn algorithm(name: &[u8]) -> Option<&'static dyn Algorithm> {
        const ALGORITHMS: [&dyn Algorithm; 6] = [
            &crate::algo::fixed::Fixed,
            &crate::algo::counter::Counter,
            &crate::algo::slidecount::SlideCount,
            &crate::algo::slidelog::SlideLog,
            &crate::algo::gcra::Gcra,
            &crate::algo::concurrency::Concurrency,
        ];
        ALGORITHMS
            .into_iter()
            .find(|a| name.eq_ignore_ascii_case(a.name().as_bytes()))
    }

    type Limits = Vec<LimitArgs<&'static dyn Algorithm>>;

    fn all(args: &str) -> Result<(Limits, Option<u64>, Mode)> {
        let words: Vec<&[u8]> = args.split(' ').map(str::as_bytes).collect();
        parse_all(&words, algorithm).map(|r| (r.limits, r.now, r.mode))
    }

    #[test]
    fn all_bounds_each_limits_window_by_its_algorithm() -> Result<()> {
        let (limits, ..) = all("2 counter k 1 9007201749600000ms fixed j 1 315360000s")?;
        assert_eq!(limits[0].spec.window.ms(), 9_007_201_749_600_000);
        let err = |r: Result<(Limits, Option<u64>, Mode)>| r.map(|_| ()).err();
        assert_eq!(
            err(all("2 counter k 1 1 fixed j 1 315360001s")),
            Some(Error::BadWindow {
                max_ms: MAX_WINDOW_MS
            })
        );
        assert_eq!(
            err(all("1 counter k 1 9223372036854776ms")),
            Some(Error::BadWindow {
                max_ms: MAX_LONG_WINDOW_MS
            })
        );
        Ok(())
    }

    #[test]
    fn modes_exclude_each_other() {
        assert_eq!(
            parse(&["10", "1s", "refund"]).map(|a| a.mode),
            Ok(Mode::Refund)
        );
        assert_eq!(
            parse(&["10", "1s", "RESET"]).map(|a| a.mode),
            Ok(Mode::Reset)
        );
        assert_eq!(
            parse(&["10", "1s", "PEEK", "RESET"]),
            Err(Error::ConflictingModes)
        );
        assert_eq!(
            parse(&["10", "1s", "REFUND", "REFUND"]),
            Err(Error::RepeatedOption("REFUND"))
        );
    }

    #[test]
    fn all_parses_limits_with_their_own_options() -> Result<()> {
        let (limits, now, mode) =
            all("3 fixed {u}:s 10 1s COST 2 gcra {u}:g 5 1 burst 2 Cost 3 SLIDELOG {u}:l 7 60 NOW 1764480000000000 PEEK")?;
        assert_eq!(now, Some(1_764_480_000_000_000));
        assert_eq!(mode, Mode::Peek);
        let summary: Vec<_> = limits
            .iter()
            .map(|l| {
                (
                    l.algorithm.name(),
                    l.key,
                    l.spec.limit,
                    l.spec.cost,
                    l.spec.burst,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("FIXED", 2, 10, 2, None),
                ("GCRA", 8, 5, 3, Some(2)),
                ("SLIDELOG", 16, 7, 1, None),
            ]
        );
        Ok(())
    }

    #[test]
    fn all_takes_the_lease_for_concurrency_limits() -> Result<()> {
        let words: Vec<&[u8]> =
            "2 concurrency {u}:c 5 30s fixed {u}:f 100 60 LEASE req-7 NOW 1764480000000000"
                .split(' ')
                .map(str::as_bytes)
                .collect();
        let r = parse_all(&words, algorithm)?;
        assert_eq!(
            (r.lease, r.mode, r.limits.len()),
            (Some(10), Mode::Spend, 2)
        );
        assert_eq!(words[10], b"req-7");
        // PEEK and RESET need no lease.
        assert!(all("1 concurrency k 5 30 PEEK").is_ok());
        assert!(all("1 concurrency k 5 30 RESET").is_ok());
        Ok(())
    }

    #[test]
    fn all_refuses_every_malformed_part() {
        for (args, error) in [
            ("0 fixed k 1 1", Error::BadLimitCount(MAX_LIMITS)),
            ("17 fixed k 1 1", Error::BadLimitCount(MAX_LIMITS)),
            ("x", Error::BadLimitCount(MAX_LIMITS)),
            ("2 fixed k 1 1", Error::WrongArity("rl.all")),
            ("1 fixed k 1", Error::WrongArity("rl.all")),
            ("1 token k 1 1", Error::UnknownAlgorithm("token".into())),
            (
                "1 fixed k 1 1 BURST 2",
                Error::UnknownOption("BURST".into()),
            ),
            ("1 fixed k 1 1 COST", Error::MissingValue("COST")),
            ("1 fixed k 1 1 COST 1 COST 1", Error::RepeatedOption("COST")),
            (
                "1 fixed k 1 1 NOW 1764480000000000 COST 1",
                Error::OptionAfterLimits("COST"),
            ),
            ("1 fixed k 1 1 PEEK REFUND", Error::ConflictingModes),
            ("1 fixed k 1 1 FOO", Error::UnknownOption("FOO".into())),
            ("1 fixed k 1 1 LEASE x", Error::LeaseWithoutConcurrency),
            ("1 concurrency k 1 1", Error::MissingLease),
            ("1 concurrency k 1 1 REFUND", Error::MissingLease),
            ("1 concurrency k 1 1 LEASE", Error::MissingValue("LEASE")),
            (
                "1 concurrency k 1 1 LEASE a LEASE b",
                Error::RepeatedOption("LEASE"),
            ),
            ("2 fixed k 1 1 gcra k 1 1", Error::DuplicateKey("k".into())),
            ("1 fixed k 1 1 COUNTALL", Error::NotInAll("COUNTALL")),
            ("1 counter k 1 1 COUNTALL", Error::NotInAll("COUNTALL")),
            ("1 counter k 1 1 ESCALATE", Error::NotInAll("ESCALATE")),
            ("1 counter k 1 1 PEEK escalate", Error::NotInAll("ESCALATE")),
            ("2 fixed k 1 1 renew gcra j 1 1", Error::NotInAll("RENEW")),
            (
                "1 fixed k 1 1 NOW 1764480000000000 RENEW",
                Error::NotInAll("RENEW"),
            ),
            ("1 fixed k 1 1 PEEK countall", Error::NotInAll("COUNTALL")),
            (
                "1 fixed k 0 1",
                Error::NotPositive {
                    name: "limit",
                    max: MAX_AMOUNT,
                },
            ),
        ] {
            assert_eq!(all(args).err(), Some(error), "{args}");
        }
    }
}
