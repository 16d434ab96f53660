"""What a client's address is counted as by every limit kept per client (sign-in, sign-up and
SMTP AUTH failures, connections per client)."""

from __future__ import annotations

import ipaddress


def client_source(host: str) -> str:
    """The client's IPv4 address, or the /64 of its IPv6 address (one subscriber's smallest
    allocation, whose addresses cost nothing); an IPv4-mapped IPv6 address counts as IPv4."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)
