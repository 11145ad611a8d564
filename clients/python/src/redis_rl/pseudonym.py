"""RL.PSEUDONYM computed in the app, for the scripts backend (Redis Lua has no
SHA-256): the module's exact output from the same secret, so a fleet moving between
the two backends keeps its keys.

pseudonym = the first 24 hex digits of HMAC-SHA256(secret, identity "|" YYYY-MM-DD),
then ":" scope. An IP address is canonicalised first: IPv4 dotted, an IPv4-mapped IPv6
address as its IPv4 address, IPv6 in RFC 5952 form, reduced to its PREFIX6 network as
"net/bits" when asked. Anything else is hashed as given.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from datetime import datetime, timezone
from typing import Optional, Union

# What the module's parser (Rust's IpAddr) can take: Python's also takes a zone ("%eth0"),
# which the module hashes as a plain string.
_IP_CHARS = re.compile(r"[0-9A-Fa-f:.]+")


def canonical(identity: str, prefix6: Optional[int]) -> str:
    if not _IP_CHARS.fullmatch(identity):
        return identity
    try:
        address = ipaddress.ip_address(identity)
    except ValueError:
        return identity
    if isinstance(address, ipaddress.IPv4Address):
        return str(address)
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    if prefix6 is None:
        return address.compressed
    network = ipaddress.IPv6Network((address, prefix6), strict=False)
    return f"{network.network_address.compressed}/{prefix6}"


def utc_day(unix_us: int) -> str:
    return datetime.fromtimestamp(unix_us // 1_000_000, tz=timezone.utc).strftime("%Y-%m-%d")


def pseudonym(secret: Union[str, bytes], identity: str, scope: Optional[str], prefix6: Optional[int], unix_us: int) -> str:
    key = secret.encode() if isinstance(secret, str) else secret
    message = f"{canonical(identity, prefix6)}|{utc_day(unix_us)}".encode()
    name = hmac.new(key, message, hashlib.sha256).hexdigest()[:24]
    return name if scope is None else f"{name}:{scope}"
