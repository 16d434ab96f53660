"""Where mail for a recipient domain goes: the candidate hosts and their addresses.

`MxResolver.resolve(domain)` follows RFC 5321 section 5.1: MX records by preference, hosts of
equal preference in random order; no MX record means the domain's own addresses (implicit MX);
a null MX (RFC 7505) or a domain that does not exist is a permanent failure, a DNS server
failure or timeout a transient one. `delivery.routes` overrides MX like Postfix's transport
map: exact domain, `*.suffix`, or `*` for a smarthost. Every host comes with its addresses.

The resolution errors say whether the failure is permanent and which RFC 3463 status code
stands for it, so that bounce classification needs no knowledge of DNS.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

import dns.exception
import dns.rdata
import dns.rdtypes.ANY.MX
import dns.resolver
import trio

from postwire.config import join_host_port, split_host_port
from postwire.domains.verification import DnsResolver, build_resolver
from postwire.errors import PostwireError

if TYPE_CHECKING:
    from postwire.config import Config

EnhancedStatus = tuple[int, int, int]


class DestinationError(PostwireError):
    """Mail for a domain cannot be routed: now (transient) or ever (permanent)."""

    enhanced: ClassVar[EnhancedStatus] = (4, 4, 0)

    def __init__(self, domain: str, message: str) -> None:
        super().__init__(message)
        self.domain = domain

    @property
    def permanent(self) -> bool:
        return self.enhanced[0] == 5


class NullMxError(DestinationError):
    """The domain publishes a null MX (RFC 7505): it accepts no mail."""

    enhanced = (5, 1, 10)


class NoSuchDomainError(DestinationError):
    """The domain does not exist (NXDOMAIN)."""

    enhanced = (5, 1, 2)


class NoMailHostError(DestinationError):
    """DNS answered, but no MX host and no implicit MX has an address."""

    enhanced = (5, 4, 4)


class DnsTemporaryError(DestinationError):
    """DNS failed for now: SERVFAIL, refusal or timeout from every server."""

    enhanced = (4, 4, 3)


# --- the answer ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MailHost:
    """One host to try: an MX target, the domain itself (implicit MX) or a route's host."""

    name: str
    port: int
    preference: int
    # IPv4 first: receivers judge IPv6 senders harder (PTR, reputation), and most MX have both.
    addresses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Destination:
    """Where mail for `domain` goes: `hosts` in the order to try them."""

    domain: str
    # The per-destination pool key: the sorted MX host names, or the route's "host:port".
    site: str
    hosts: tuple[MailHost, ...]
    routed: bool = False

    @property
    def candidates(self) -> list[tuple[str, int]]:
        """(host, port) in the order to try."""
        return [(host.name, host.port) for host in self.hosts]

    def by_preference(self) -> list[tuple[MailHost, ...]]:
        """The hosts grouped by MX preference, lowest (most preferred) first."""
        groups: list[tuple[MailHost, ...]] = []
        for host in self.hosts:
            if groups and groups[-1][0].preference == host.preference:
                groups[-1] = (*groups[-1], host)
            else:
                groups.append((host,))
        return groups

    def addresses(self) -> list[tuple[str, int]]:
        """Every (address, port) to connect to, in order, each once."""
        seen: dict[tuple[str, int], None] = {}
        for host in self.hosts:
            for address in host.addresses:
                seen.setdefault((address, host.port), None)
        return list(seen)


# --- the resolver -------------------------------------------------------------------------------

NEGATIVE_TTL_SECONDS: Final = 60.0
CACHE_ENTRIES: Final = 10_000


@dataclass(frozen=True, slots=True)
class _Cached:
    expires_at: float
    records: tuple[dns.rdata.Rdata, ...]  # empty: no records of this type
    nxdomain: bool = False


class MxResolver:
    """Resolves recipient domains to `Destination`s, caching DNS answers for their TTL.

    Answers without records (NXDOMAIN, no data) are cached for `negative_ttl` seconds; failures
    (SERVFAIL, timeouts) are not cached. Hosts of equal preference are shuffled on every call
    with `rng`, so connections spread over them. `clock` is in seconds (default: Trio's clock).
    """

    def __init__(
        self,
        config: Config,
        resolver: DnsResolver | None = None,
        *,
        clock: Callable[[], float] = trio.current_time,
        rng: random.Random | None = None,
        negative_ttl: float = NEGATIVE_TTL_SECONDS,
        max_entries: int = CACHE_ENTRIES,
    ) -> None:
        self._delivery = config.delivery
        self._resolver = resolver if resolver is not None else build_resolver(config)
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._negative_ttl = negative_ttl
        self._max_entries = max_entries
        self._cache: dict[tuple[str, str], _Cached] = {}

    async def resolve(self, domain: str) -> Destination:
        """Where mail for `domain` goes. Raises a `DestinationError` saying why nowhere."""
        domain = domain.lower().rstrip(".")
        route = self._delivery.route_for(domain)
        if route is not None:
            return await self._routed(domain, route)
        if domain.startswith("[") and domain.endswith("]"):
            return self._address_literal(domain)

        try:
            mx = await self._lookup(domain, "MX")
        except _NxDomain:
            raise NoSuchDomainError(domain, f"{domain} does not exist (NXDOMAIN)") from None
        exchanges = [
            (rdata.preference, rdata.exchange.to_text(omit_final_dot=True).lower())
            for rdata in mx
            if isinstance(rdata, dns.rdtypes.ANY.MX.MX)
        ]
        if exchanges and all(name in ("", ".") for _, name in exchanges):
            raise NullMxError(domain, f"{domain} accepts no mail (null MX); no mail server")
        # RFC 7505 forbids a null MX beside others; should one appear, the others still work.
        exchanges = [(pref, name) for pref, name in exchanges if name not in ("", ".")]
        if not exchanges:  # RFC 5321 5.1: the implicit MX, the domain's own addresses
            exchanges = [(0, domain)]
            site = domain
        else:
            site = ",".join(sorted({name for _, name in exchanges}))

        hosts = await self._with_addresses(domain, exchanges, self._delivery.port)
        return Destination(domain, site, self._ordered(hosts))

    async def _routed(self, domain: str, route: str) -> Destination:
        host, port = split_host_port(route)
        site = join_host_port(host, port)
        if _is_ip(host):
            return Destination(domain, site, (MailHost(host, port, 0, (host,)),), routed=True)
        hosts = await self._with_addresses(domain, [(0, host.lower().rstrip("."))], port)
        return Destination(domain, site, tuple(hosts), routed=True)

    def _address_literal(self, domain: str) -> Destination:
        literal = domain[1:-1]
        address = literal.removeprefix("ipv6:")
        if not _is_ip(address):
            raise NoSuchDomainError(domain, f"{domain} is not an address literal")
        host = MailHost(address, self._delivery.port, 0, (address,))
        return Destination(domain, domain, (host,))

    async def _with_addresses(
        self, domain: str, exchanges: Sequence[tuple[int, str]], port: int
    ) -> list[MailHost]:
        """The exchanges that have addresses. Raises when none has one."""
        found: dict[str, tuple[str, ...]] = {}
        failures: list[DnsTemporaryError] = []

        async def look_up(name: str) -> None:
            try:
                found[name] = await self._addresses(name)
            except DnsTemporaryError as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            for name in {name for _, name in exchanges}:
                nursery.start_soon(look_up, name)
        hosts = [
            MailHost(name, port, preference, found[name])
            for preference, name in exchanges
            if found.get(name)
        ]
        if hosts:
            return hosts
        if failures:
            raise DnsTemporaryError(domain, f"no address for any mail host: {failures[0]}")
        names = ", ".join(sorted({name for _, name in exchanges}))
        raise NoMailHostError(domain, f"no mail host of {domain} has an address ({names})")

    async def _addresses(self, host: str) -> tuple[str, ...]:
        """IPv4 then IPv6 addresses of `host`; empty when it has none."""
        if _is_ip(host):
            return (host,)
        addresses: list[str] = []
        for rdtype in ("A", "AAAA"):
            try:
                addresses.extend(rdata.to_text() for rdata in await self._lookup(host, rdtype))
            except _NxDomain:
                return ()
        return tuple(addresses)

    def _ordered(self, hosts: list[MailHost]) -> tuple[MailHost, ...]:
        """By preference; shuffled within equal preference (RFC 5321 5.1)."""
        self._rng.shuffle(hosts)
        return tuple(sorted(hosts, key=lambda host: host.preference))  # a stable sort

    async def _lookup(self, name: str, rdtype: str) -> tuple[dns.rdata.Rdata, ...]:
        """The records, cached for their TTL; empty for no data. Raises _NxDomain."""
        key = (name, rdtype)
        now = self._clock()
        cached = self._cache.get(key)
        if cached is None or cached.expires_at <= now:
            cached = await self._query(name, rdtype)
            self._store(key, cached, now)
        if cached.nxdomain:
            raise _NxDomain(name)
        return cached.records

    async def _query(self, name: str, rdtype: str) -> _Cached:
        try:
            answer = await self._resolver.resolve(name, rdtype)
        except dns.resolver.NXDOMAIN:
            return _Cached(self._clock() + self._negative_ttl, (), nxdomain=True)
        except dns.resolver.NoAnswer:
            return _Cached(self._clock() + self._negative_ttl, ())
        except dns.exception.Timeout:
            raise DnsTemporaryError(name, f"DNS timed out asking for {rdtype} of {name}") from None
        except (dns.exception.DNSException, OSError) as exc:
            # SERVFAIL or REFUSED from every server (NoNameservers), network errors, ...
            raise DnsTemporaryError(name, f"DNS failed for {rdtype} of {name}: {exc}") from None
        ttl = answer.chaining_result.minimum_ttl  # a CNAME on the way may expire first
        records = tuple(answer.rrset) if answer.rrset is not None else ()
        return _Cached(self._clock() + ttl, records)

    def _store(self, key: tuple[str, str], entry: _Cached, now: float) -> None:
        self._cache.pop(key, None)  # re-inserted last: the dict's order is insertion order
        self._cache[key] = entry
        if len(self._cache) > self._max_entries:
            for stale in [k for k, v in self._cache.items() if v.expires_at <= now]:
                del self._cache[stale]
            while len(self._cache) > self._max_entries:  # still full: drop the oldest
                del self._cache[next(iter(self._cache))]


class _NxDomain(Exception):
    """Internal: the name does not exist."""


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
