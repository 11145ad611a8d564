//! What a request is limited by, shaped like tower-governor's `KeyExtractor`.

use std::fmt::Display;
use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use http::header::FORWARDED;
use http::{HeaderMap, Request};

use crate::error::Error;

/// Finds the identity a request is limited by. Its `Display` goes into the Redis key
/// (by default through RL.PSEUDONYM first, so no raw IP or user id becomes a key).
pub trait KeyExtractor: Clone + Send + Sync + 'static {
    type Key: Display;

    /// [`Error::UnableToExtractKey`] when the request carries nothing to limit by: the
    /// layer answers 500, as tower-governor does.
    fn extract<T>(&self, req: &Request<T>) -> Result<Self::Key, Error>;
}

/// The peer address from axum's `ConnectInfo<SocketAddr>` (serve the app with
/// `into_make_service_with_connect_info::<SocketAddr>()`). Behind a proxy this is the
/// proxy's address: use [`SmartIpKeyExtractor`] or your own extractor there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerIpKeyExtractor;

impl KeyExtractor for PeerIpKeyExtractor {
    type Key = IpAddr;

    fn extract<T>(&self, req: &Request<T>) -> Result<IpAddr, Error> {
        peer_ip(req).ok_or(Error::UnableToExtractKey)
    }
}

/// The client address from `X-Forwarded-For`, `X-Real-IP` or `Forwarded` (in that
/// order), else the peer address. Only behind a proxy that sets these headers: anyone
/// else can write them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmartIpKeyExtractor;

impl KeyExtractor for SmartIpKeyExtractor {
    type Key = IpAddr;

    fn extract<T>(&self, req: &Request<T>) -> Result<IpAddr, Error> {
        let headers = req.headers();
        x_forwarded_for(headers)
            .or_else(|| header_ip(headers, "x-real-ip"))
            .or_else(|| forwarded(headers))
            .or_else(|| peer_ip(req))
            .ok_or(Error::UnableToExtractKey)
    }
}

/// One key for every request: a limit on the whole service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GlobalKeyExtractor;

impl KeyExtractor for GlobalKeyExtractor {
    type Key = &'static str;

    fn extract<T>(&self, _req: &Request<T>) -> Result<&'static str, Error> {
        Ok("global")
    }
}

fn peer_ip<T>(req: &Request<T>) -> Option<IpAddr> {
    let extensions = req.extensions();
    let addr = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr);
    #[cfg(feature = "axum-07")]
    let addr = addr.or_else(|| {
        extensions
            .get::<axum07::extract::ConnectInfo<SocketAddr>>()
            .map(|axum07::extract::ConnectInfo(addr)| *addr)
    });
    addr.map(|addr| addr.ip())
}

fn x_forwarded_for(headers: &HeaderMap) -> Option<IpAddr> {
    let value = headers.get("x-forwarded-for")?.to_str().ok()?;
    value.split(',').find_map(|part| part.trim().parse().ok())
}

fn header_ip(headers: &HeaderMap, name: &str) -> Option<IpAddr> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// RFC 7239: the first `for=` node that is an address (`for="[2001:db8::1]:443"` too).
fn forwarded(headers: &HeaderMap) -> Option<IpAddr> {
    headers
        .get_all(FORWARDED)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split([',', ';']))
        .find_map(|pair| {
            let (name, node) = pair.trim().split_once('=')?;
            if !name.trim().eq_ignore_ascii_case("for") {
                return None;
            }
            let node = node.trim().trim_matches('"');
            match node.strip_prefix('[') {
                Some(rest) => rest.split(']').next()?.parse().ok(),
                None => node
                    .parse()
                    .ok()
                    .or_else(|| node.parse::<SocketAddr>().ok().map(|a| a.ip())),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder();
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut req = builder.body(()).unwrap();
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 5555))));
        req
    }

    #[cfg(feature = "axum-07")]
    #[test]
    fn the_peer_ip_comes_from_axum_07_too() {
        let mut req = Request::builder().body(()).unwrap();
        req.extensions_mut()
            .insert(axum07::extract::ConnectInfo(SocketAddr::from((
                [192, 0, 2, 7],
                4444,
            ))));
        assert_eq!(
            PeerIpKeyExtractor.extract(&req).unwrap(),
            IpAddr::from([192, 0, 2, 7])
        );
    }

    #[test]
    fn smart_ip_order_and_fallback() {
        let smart = SmartIpKeyExtractor;
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            smart
                .extract(&req(&[("x-forwarded-for", "junk, 203.0.113.7, 10.1.1.1")]))
                .unwrap(),
            ip("203.0.113.7")
        );
        assert_eq!(
            smart
                .extract(&req(&[("x-real-ip", " 198.51.100.2 ")]))
                .unwrap(),
            ip("198.51.100.2")
        );
        assert_eq!(
            smart
                .extract(&req(&[(
                    "forwarded",
                    "proto=https;for=\"[2001:db8::1]:443\", for=192.0.2.60"
                )]))
                .unwrap(),
            ip("2001:db8::1")
        );
        assert_eq!(
            smart
                .extract(&req(&[("forwarded", "for=192.0.2.60:80")]))
                .unwrap(),
            ip("192.0.2.60")
        );
        assert_eq!(
            smart
                .extract(&req(&[("x-forwarded-for", "nonsense")]))
                .unwrap(),
            ip("10.0.0.1")
        );
        assert!(matches!(
            PeerIpKeyExtractor.extract(&Request::new(())),
            Err(Error::UnableToExtractKey)
        ));
    }
}
