//! The key and member names the limiters share with the Lua scripts. A fleet moving
//! from the scripts to the module relies on these being byte-for-byte the same.

use std::borrow::Cow;

use crate::limit::Window;

/// `<key>:<n>`: a SLIDECOUNT window counter (n = window index) or a FIXED window
/// counter (n = window start).
pub fn counter_key(base: &[u8], n: u64) -> Vec<u8> {
    let mut name = Vec::with_capacity(base.len() + 21);
    name.extend_from_slice(base);
    name.push(b':');
    name.extend_from_slice(decimal(n, &mut [0; 20]));
    name
}

/// `counter_key` in `buf` when it fits, as every usual key does: the hot path makes
/// one or two per call, and a heap allocation costs more than the rest of the name.
pub fn counter_key_in<'a>(base: &[u8], n: u64, buf: &'a mut [u8; 128]) -> Cow<'a, [u8]> {
    let mut digits = [0; 20];
    let digits = decimal(n, &mut digits);
    let len = base.len() + 1 + digits.len();
    let Some(out) = buf.get_mut(..len) else {
        return Cow::Owned(counter_key(base, n));
    };
    let (head, tail) = out.split_at_mut(base.len());
    head.copy_from_slice(base);
    if let Some((colon, rest)) = tail.split_first_mut() {
        *colon = b':';
        rest.copy_from_slice(digits);
    }
    Cow::Borrowed(out)
}

/// `n` in decimal, written into `buf` (no allocation on the hot path).
pub fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    // Two digits per division: names and members carry 8 to 16-digit numbers.
    const PAIRS: &[u8; 200] = b"00010203040506070809101112131415161718192021222324\
        25262728293031323334353637383940414243444546474849\
        50515253545556575859606162636465666768697071727374\
        75767778798081828384858687888990919293949596979899";
    let mut start = buf.len();
    while n >= 10 && start >= 2 {
        let pair = (n % 100) as usize * 2;
        start -= 2;
        if let (Some(out), Some(digits)) =
            (buf.get_mut(start..start + 2), PAIRS.get(pair..pair + 2))
        {
            out.copy_from_slice(digits);
        }
        n /= 100;
    }
    if n > 0 || start == buf.len() {
        start -= 1;
        if let Some(out) = buf.get_mut(start) {
            *out = b'0' + (n % 10) as u8;
        }
    }
    buf.get(start..).unwrap_or(&[])
}

/// FIXED names a window by its start: in seconds when the window is whole seconds
/// (the seed's `rl:fixed:1718609340`), else in milliseconds.
pub fn fixed_window_name(start_us: u64, window: Window) -> u64 {
    if window.whole_seconds() {
        start_us / 1_000_000
    } else {
        start_us / 1000
    }
}

/// A SLIDELOG member: `<now-µs>:<8 lowercase hex>`, unique even when two requests
/// share a microsecond. At most 29 bytes, so it lives on the stack.
pub fn log_member(now_us: u64, random: [u8; 4]) -> Member {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut member = Member {
        bytes: [0; 29],
        len: 0,
    };
    let mut push = |b: u8| {
        if let Some(slot) = member.bytes.get_mut(member.len) {
            *slot = b;
            member.len += 1;
        }
    };
    decimal(now_us, &mut [0; 20]).iter().for_each(|&d| push(d));
    push(b':');
    for b in random {
        push(HEX[usize::from(b >> 4)]);
        push(HEX[usize::from(b & 0x0f)]);
    }
    member
}

pub struct Member {
    bytes: [u8; 29],
    len: usize,
}

impl std::ops::Deref for Member {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// The part of a key Redis Cluster hashes: the first non-empty `{tag}`, else all.
fn hashed_part(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    let after = key.get(open + 1..).unwrap_or(&[]);
    match after.iter().position(|&b| b == b'}') {
        Some(close) if close > 0 => after.get(..close).unwrap_or(key),
        _ => key,
    }
}

/// The cluster slot of a key: CRC16 (XMODEM) of its hashed part, mod 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let crc = hashed_part(key).iter().fold(0u16, |mut crc, &byte| {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
        crc
    });
    crc & 0x3fff
}

/// Whether Redis Cluster would hash only part of this key (a non-empty `{tag}`), so
/// that `<key>:<n>` lands in the same slot as `<key>`.
pub fn has_hash_tag(key: &[u8]) -> bool {
    hashed_part(key).len() != key.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_window;

    #[test]
    fn names() -> crate::error::Result<()> {
        assert_eq!(counter_key(b"rl:cnt:ab", 176448000), b"rl:cnt:ab:176448000");
        let ten = parse_window(b"10")?;
        let ms = parse_window(b"1500ms")?;
        assert_eq!(fixed_window_name(1_718_609_340_123_456, ten), 1_718_609_340);
        assert_eq!(
            fixed_window_name(1_718_609_340_123_456, ms),
            1_718_609_340_123
        );
        assert_eq!(
            &*log_member(1_764_480_000_000_001, [0, 0x0f, 0xa0, 0xff]),
            b"1764480000000001:000fa0ff"
        );
        assert_eq!(
            &*log_member(u64::MAX, [0xff; 4]),
            b"18446744073709551615:ffffffff"
        );
        for base in [
            &b""[..],
            b"rl:{a}",
            &[b'x'; 106],
            &[b'y'; 107],
            &[b'z'; 300],
        ] {
            for n in [0, 9, 1_764_480_000, u64::MAX] {
                assert_eq!(
                    counter_key_in(base, n, &mut [0; 128]).as_ref(),
                    counter_key(base, n).as_slice()
                );
            }
        }
        Ok(())
    }

    #[test]
    fn decimals() {
        for n in [0, 7, 10, 99, 100, 101, 999, 1_764_480_000_000_000, u64::MAX]
            .into_iter()
            .chain((0..100_000).map(|k| k * 7919))
        {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes());
        }
    }

    #[test]
    fn slots_match_redis() {
        // CLUSTER KEYSLOT values from a real server.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"rl:{user1}:x"), key_slot(b"user1"));
        assert_eq!(key_slot(b"123456789"), 0x31c3 & 0x3fff);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn hash_tags_follow_the_cluster_rule() {
        assert!(has_hash_tag(b"rl:{user1}:x"));
        assert!(has_hash_tag(b"{a}"));
        assert!(!has_hash_tag(b"x{}{b}y"));
        assert!(!has_hash_tag(b"rl:user1"));
        assert!(!has_hash_tag(b"rl:{user1"));
        assert!(!has_hash_tag(b"rl:}x{"));
        assert!(has_hash_tag(b"{{x}"));
    }
}
