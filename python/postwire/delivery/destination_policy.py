"""Which addresses the delivery engine may connect to.

Anyone with an API key chooses the recipients, so without a guard `x@[127.0.0.1]`, or a domain
whose MX points at 10.0.0.5, would make Postwire talk SMTP to itself or to the network it sits
in. Resolved destinations (MX and A/AAAA answers, address literals) must be public unicast
addresses that are not the host's own. Routes (`delivery.routes`) are the operator's own words
and are trusted: a smarthost on loopback or on the LAN is a normal set-up. The setting
`delivery.allow_private_destinations` lifts the guard, for tests and labs only.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from postwire.delivery.resolver import Destination
from postwire.errors import DestinationRefused
from postwire.outbound_http import IPAddress, embedded_ipv4

log = logging.getLogger("postwire.delivery")


def refusal_reason(address: str, own: frozenset[IPAddress]) -> str | None:
    """Why the engine must not connect to `address`; None when it may."""
    try:
        ip: IPAddress = ipaddress.ip_address(address)
    except ValueError:
        return "not an IP address"
    ip = embedded_ipv4(ip) or ip  # IPv4 inside IPv6 is judged as IPv4
    checks = (
        (ip.is_loopback, "a loopback address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_private, "a private address"),
        (ip in own, "an address of this host"),
        (not ip.is_global, "not a public address"),  # shared (CGNAT), reserved, documentation
    )
    return next((reason for refused, reason in checks if refused), None)


def guard_destination(destination: Destination, own: frozenset[IPAddress]) -> Destination:
    """`destination` with only the addresses the engine may connect to; raises
    `DestinationRefused` when none is left."""
    hosts = []
    refused: list[str] = []
    for host in destination.hosts:
        allowed = []
        for address in host.addresses:
            reason = refusal_reason(address, own)
            if reason is None:
                allowed.append(address)
            else:
                refused.append(f"{address} ({reason})")
        if allowed:
            hosts.append(replace(host, addresses=tuple(allowed)))
    if not hosts:
        raise DestinationRefused(
            f"mail for {destination.domain} would go to {', '.join(refused) or 'no address'}, "
            "and Postwire does not deliver to loopback, private, link-local or its own addresses"
        )
    return replace(destination, hosts=tuple(hosts))


def own_addresses(extra: Iterable[str] = ()) -> frozenset[IPAddress]:
    """The host's own addresses: its interfaces' (Linux's /proc) and `extra` (the configured
    sending IPs, which may be a NAT's public address no interface has)."""
    found: set[IPAddress] = set()
    for text in (*_interface_addresses(), *extra):
        try:
            found.add(ipaddress.ip_address(text))
        except ValueError:
            continue
    return frozenset(found)


def _interface_addresses() -> list[str]:
    addresses: list[str] = []
    try:  # IPv4: the trie lists each local address with a "/32 host LOCAL" leaf
        last = ""
        for line in Path("/proc/net/fib_trie").read_text().splitlines():
            text = line.strip()
            if text.startswith(("|--", "+--")):
                last = text.split()[-1]
            elif text == "/32 host LOCAL" and last:
                addresses.append(last)
    except OSError:
        log.warning("cannot read /proc/net/fib_trie: this host's IPv4 addresses are unknown")
    try:  # IPv6: one address per line, 32 hex digits first
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            digits = line.split()[0]
            addresses.append(":".join(digits[i : i + 4] for i in range(0, 32, 4)))
    except (OSError, IndexError):
        pass  # no IPv6 on this host
    return addresses
