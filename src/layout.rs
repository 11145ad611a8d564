//! The key and member names the limiters share with the Lua scripts. A fleet moving
//! from the scripts to the module relies on these being byte-for-byte the same.

use crate::args::Window;

/// `<key>:<n>`: a SLIDECOUNT window counter (n = window index) or a FIXED window
/// counter (n = window start).
pub fn counter_key(base: &[u8], n: u64) -> Vec<u8> {
    let mut name = Vec::with_capacity(base.len() + 21);
    name.extend_from_slice(base);
    name.push(b':');
    name.extend_from_slice(n.to_string().as_bytes());
    name
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
/// share a microsecond.
pub fn log_member(now_us: u64, random: [u8; 4]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut member = now_us.to_string().into_bytes();
    member.push(b':');
    for b in random {
        member.push(HEX[usize::from(b >> 4)]);
        member.push(HEX[usize::from(b & 0x0f)]);
    }
    member
}

/// Whether Redis Cluster would hash only part of this key (a non-empty `{tag}`), so
/// that `<key>:<n>` lands in the same slot as `<key>`.
pub fn has_hash_tag(key: &[u8]) -> bool {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return false;
    };
    let after = key.get(open + 1..).unwrap_or(&[]);
    matches!(after.iter().position(|&b| b == b'}'), Some(close) if close > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_window;

    #[test]
    fn names() {
        assert_eq!(counter_key(b"rl:cnt:ab", 176448000), b"rl:cnt:ab:176448000");
        let ten = parse_window(b"10").unwrap();
        let ms = parse_window(b"1500ms").unwrap();
        assert_eq!(fixed_window_name(1_718_609_340_123_456, ten), 1_718_609_340);
        assert_eq!(
            fixed_window_name(1_718_609_340_123_456, ms),
            1_718_609_340_123
        );
        assert_eq!(
            log_member(1_764_480_000_000_001, [0, 0x0f, 0xa0, 0xff]),
            b"1764480000000001:000fa0ff"
        );
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
