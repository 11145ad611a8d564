//! RL.PSEUDONYM computed in the app, for the scripts backend (Redis Lua has no
//! SHA-256): the module's exact output, from the same secret, so a fleet moving between
//! the two backends keeps its keys.
//!
//! pseudonym = first 24 hex of HMAC-SHA256(secret, identity + "|" + YYYY-MM-DD).

use std::net::{IpAddr, Ipv6Addr};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The identity as the module hashes it: IP addresses in canonical form (IPv4-mapped
/// IPv6 as plain IPv4), an IPv6 address's network with `prefix6`, anything else as is.
fn canonical_identity(identity: &str, prefix6: Option<u8>) -> String {
    match identity.parse::<IpAddr>() {
        Err(_) => identity.to_string(),
        Ok(IpAddr::V4(v4)) => v4.to_string(),
        Ok(IpAddr::V6(v6)) => match (v6.to_ipv4_mapped(), prefix6) {
            (Some(v4), _) => v4.to_string(),
            (None, None) => v6.to_string(),
            (None, Some(bits)) => format!("{}/{bits}", network(v6, bits)),
        },
    }
}

fn network(address: Ipv6Addr, bits: u8) -> Ipv6Addr {
    let mask = u128::MAX
        .checked_shl(128 - u32::from(bits.min(128)))
        .unwrap_or(0);
    Ipv6Addr::from(u128::from(address) & mask)
}

/// The UTC calendar day of a unix time in µs, as YYYY-MM-DD (Howard Hinnant's
/// days-to-civil).
fn utc_day(unix_us: i64) -> String {
    let z = unix_us.div_euclid(86_400_000_000) + 719_468;
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

pub(crate) fn pseudonym(
    secret: &[u8],
    identity: &str,
    scope: Option<&str>,
    prefix6: Option<u8>,
    unix_us: i64,
) -> String {
    let message = format!(
        "{}|{}",
        canonical_identity(identity, prefix6),
        utc_day(unix_us)
    );
    // HMAC takes a key of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(message.as_bytes());
    let digest = mac.finalize().into_bytes();
    let mut out: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    if let Some(scope) = scope {
        out.push(':');
        out.push_str(scope);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_identities_as_the_module_writes_them() {
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(1_718_609_349_800_000), "2024-06-17");
        assert_eq!(canonical_identity("2001:DB8:0:0::1", None), "2001:db8::1");
        assert_eq!(canonical_identity("::ffff:192.0.2.1", None), "192.0.2.1");
        assert_eq!(
            canonical_identity("2001:db8:1:2:aaaa::1", Some(64)),
            "2001:db8:1:2::/64"
        );
        assert_eq!(canonical_identity("api-key-7", Some(64)), "api-key-7");
    }
}
