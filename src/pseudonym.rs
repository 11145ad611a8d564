//! RL.PSEUDONYM: a daily-rotating keyed hash of an identity, so that a raw IP address
//! never becomes part of a key.
//!
//! pseudonym = first 24 hex of HMAC-SHA256(secret, identity + "|" + YYYY-MM-DD),
//! exactly the seed's PHP `rateLimitIdentity`, so both give the same pseudonym.

use std::net::{IpAddr, Ipv6Addr};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The identity as it is hashed: IP addresses in canonical form (IPv4-mapped IPv6
/// as plain IPv4), or an IPv6 address's network when `prefix6` is given; anything
/// else byte for byte.
pub fn canonical_identity(identity: &[u8], prefix6: Option<u8>) -> Vec<u8> {
    let parsed = std::str::from_utf8(identity)
        .ok()
        .and_then(|text| text.parse::<IpAddr>().ok());
    match parsed {
        None => identity.to_vec(),
        Some(IpAddr::V4(v4)) => v4.to_string().into_bytes(),
        Some(IpAddr::V6(v6)) => match (v6.to_ipv4_mapped(), prefix6) {
            (Some(v4), _) => v4.to_string().into_bytes(),
            (None, None) => v6.to_string().into_bytes(),
            (None, Some(bits)) => format!("{}/{bits}", network(v6, bits)).into_bytes(),
        },
    }
}

fn network(address: Ipv6Addr, bits: u8) -> Ipv6Addr {
    let mask = u128::MAX
        .checked_shl(128 - u32::from(bits.min(128)))
        .unwrap_or(0);
    Ipv6Addr::from(u128::from(address) & mask)
}

/// The UTC calendar day of a unix time in microseconds, as YYYY-MM-DD.
pub fn utc_day(unix_us: u64) -> String {
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let days = i64::try_from(unix_us / 86_400_000_000).unwrap_or(0);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The pseudonym, with `:<scope>` appended when a scope is given.
pub fn pseudonym(
    secret: &[u8],
    identity: &[u8],
    scope: Option<&[u8]>,
    prefix6: Option<u8>,
    unix_us: u64,
) -> Vec<u8> {
    let mut message = canonical_identity(identity, prefix6);
    message.push(b'|');
    message.extend_from_slice(utc_day(unix_us).as_bytes());
    // HMAC takes a key of any length, so this cannot fail.
    let digest = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(&message);
            mac.finalize().into_bytes()
        }
        Err(_) => Default::default(),
    };
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out: Vec<u8> = digest
        .iter()
        .take(12)
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0f)]])
        .collect();
    if let Some(scope) = scope {
        out.push(b':');
        out.extend_from_slice(scope);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_roll_over_at_utc_midnight() {
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(1_764_460_799_999_999), "2025-11-29");
        assert_eq!(utc_day(1_764_460_800_000_000), "2025-11-30");
        assert_eq!(utc_day(951_782_400_000_000), "2000-02-29");
        assert_eq!(utc_day((1 << 53) - 1), "2255-06-05");
    }

    #[test]
    fn canonical_forms() {
        let c =
            |s: &str, p| String::from_utf8_lossy(&canonical_identity(s.as_bytes(), p)).into_owned();
        assert_eq!(c("192.0.2.1", None), "192.0.2.1");
        assert_eq!(c("::ffff:192.0.2.1", None), "192.0.2.1");
        assert_eq!(c("::FFFF:c000:0201", Some(64)), "192.0.2.1");
        assert_eq!(
            c("2001:0DB8:0000:0000:0000:0000:0000:0001", None),
            "2001:db8::1"
        );
        assert_eq!(c("2001:db8:1:2:3:4:5:6", Some(64)), "2001:db8:1:2::/64");
        assert_eq!(
            c("2001:db8:1:2:3:4:5:6", Some(128)),
            "2001:db8:1:2:3:4:5:6/128"
        );
        assert_eq!(c("api-key-123", Some(64)), "api-key-123");
        assert_eq!(c("192.0.2.1 ", None), "192.0.2.1 ");
        assert_eq!(canonical_identity(b"\xff\x00", None), b"\xff\x00");
    }

    #[test]
    fn matches_php_hash_hmac() {
        // php -r 'echo substr(hash_hmac("sha256", "192.0.2.1|2025-11-30", "s3cret"), 0, 24);'
        // computed independently with Python: hmac.new(b"s3cret", b"192.0.2.1|2025-11-30",
        // hashlib.sha256).hexdigest()[:24]
        let p = pseudonym(
            b"s3cret",
            b"192.0.2.1",
            Some(b"trending"),
            None,
            1_764_460_800_000_000,
        );
        assert_eq!(
            String::from_utf8_lossy(&p),
            format!("{}:trending", PY_192_0_2_1)
        );
    }

    const PY_192_0_2_1: &str = "30eaf298020f061a4d7dbe85";
}
