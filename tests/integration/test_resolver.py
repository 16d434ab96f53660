"""MX resolution against a real authoritative DNS server (Knot DNS on loopback)."""

from __future__ import annotations

import random
import socket
import types
from collections.abc import Iterator
from pathlib import Path

import dns.asyncbackend
import pytest
import trio

from postwire.config import Config, DeliveryConfig, DnsConfig
from postwire.delivery.resolver import (
    Destination,
    DnsTemporaryError,
    MailHost,
    MxResolver,
    NoMailHostError,
    NoSuchDomainError,
    NullMxError,
)
from postwire.domains.verification import build_resolver
from tests.dns_server import AuthoritativeDnsServer


@pytest.fixture(autouse=True)
def trio_dns_backend() -> None:
    # app.run does this at start; dnspython could otherwise pick asyncio.
    dns.asyncbackend.set_default_backend("trio")


class SettableClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_config(
    tmp_path: Path, nameserver: str, routes: dict[str, str] | None = None, port: int = 25
) -> Config:
    return Config(
        data_dir=tmp_path,
        dns=DnsConfig(nameservers=(nameserver,)),
        delivery=DeliveryConfig(
            helo_name="mx.postwire.test", port=port, routes=types.MappingProxyType(routes or {})
        ),
    )


def make_resolver(
    tmp_path: Path,
    nameserver: str,
    *,
    routes: dict[str, str] | None = None,
    clock: SettableClock | None = None,
    seed: int = 0,
) -> MxResolver:
    return MxResolver(
        make_config(tmp_path, nameserver, routes),
        clock=clock or SettableClock(),
        rng=random.Random(seed),
    )


def names(destination: Destination) -> list[str]:
    return [host.name for host in destination.hosts]


async def test_mx_in_preference_order_with_addresses(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    for record in ("20 mx2.example.test.", "10 mx1.example.test.", "30 mx3.example.test."):
        add_record(dns_server, "example.test", "MX", record)
    dns_server.publish("mx1.example.test", "A", "127.0.0.11")
    dns_server.publish("mx2.example.test", "A", "127.0.0.12")
    dns_server.publish("mx3.example.test", "AAAA", "::1")

    destination = await make_resolver(tmp_path, dns_server.nameserver).resolve("Example.TEST.")

    assert destination.domain == "example.test"
    assert destination.hosts == (
        MailHost("mx1.example.test", 25, 10, ("127.0.0.11",)),
        MailHost("mx2.example.test", 25, 20, ("127.0.0.12",)),
        MailHost("mx3.example.test", 25, 30, ("::1",)),
    )
    assert destination.site == "mx1.example.test,mx2.example.test,mx3.example.test"
    assert destination.candidates == [
        ("mx1.example.test", 25),
        ("mx2.example.test", 25),
        ("mx3.example.test", 25),
    ]
    assert destination.addresses() == [("127.0.0.11", 25), ("127.0.0.12", 25), ("::1", 25)]
    assert not destination.routed


async def test_equal_preference_is_shuffled_by_the_injected_random(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    hosts = [f"mx{i}.eq.test" for i in range(1, 6)]
    for host in hosts:
        add_record(dns_server, "eq.test", "MX", f"10 {host}.")
        dns_server.publish(host, "A", "127.0.0.20")
    add_record(dns_server, "eq.test", "MX", "5 first.eq.test.")
    add_record(dns_server, "eq.test", "MX", "50 last.eq.test.")
    dns_server.publish("first.eq.test", "A", "127.0.0.21")
    dns_server.publish("last.eq.test", "A", "127.0.0.22")

    orders = set()
    for seed in range(8):
        destination = await make_resolver(tmp_path, dns_server.nameserver, seed=seed).resolve(
            "eq.test"
        )
        order = names(destination)
        assert order[0] == "first.eq.test" and order[-1] == "last.eq.test"
        assert sorted(order[1:-1]) == hosts
        assert [len(group) for group in destination.by_preference()] == [1, 5, 1]
        orders.add(tuple(order))
        # The same seed gives the same order: the shuffle is the injected random's alone.
        again = await make_resolver(tmp_path, dns_server.nameserver, seed=seed).resolve("eq.test")
        assert names(again) == order
    assert len(orders) > 1

    # One resolver reshuffles on every call, even when the answer comes from its cache.
    resolver = make_resolver(tmp_path, dns_server.nameserver, seed=1)
    seen = {tuple(names(await resolver.resolve("eq.test"))) for _ in range(10)}
    assert len(seen) > 1


async def test_implicit_mx_from_a_and_aaaa(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    dns_server.publish("implicit.test", "A", "127.0.0.30")
    dns_server.publish("implicit.test", "AAAA", "::1")

    destination = await make_resolver(tmp_path, dns_server.nameserver).resolve("implicit.test")

    assert destination.hosts == (MailHost("implicit.test", 25, 0, ("127.0.0.30", "::1")),)
    assert destination.site == "implicit.test"
    assert destination.addresses() == [("127.0.0.30", 25), ("::1", 25)]


async def test_aaaa_only_hosts_and_hosts_without_addresses(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    add_record(dns_server, "v6.test", "MX", "10 gone.v6.test.")  # no such name: skipped
    add_record(dns_server, "v6.test", "MX", "20 mx.v6.test.")
    dns_server.publish("mx.v6.test", "AAAA", "2001:db8::25")

    destination = await make_resolver(tmp_path, dns_server.nameserver).resolve("v6.test")

    assert destination.hosts == (MailHost("mx.v6.test", 25, 20, ("2001:db8::25",)),)
    assert destination.site == "gone.v6.test,mx.v6.test"  # the pool is the published MX set


async def test_mx_hosts_without_any_address(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    dns_server.publish("noaddr.test", "MX", "10 nothing.noaddr.test.")
    with pytest.raises(NoMailHostError) as caught:
        await make_resolver(tmp_path, dns_server.nameserver).resolve("noaddr.test")
    assert caught.value.permanent


async def test_existing_name_without_mx_or_address(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    dns_server.publish("bare.test", "TXT", "v=spf1 -all")
    with pytest.raises(NoMailHostError):
        await make_resolver(tmp_path, dns_server.nameserver).resolve("bare.test")


async def test_null_mx_is_permanent(dns_server: AuthoritativeDnsServer, tmp_path: Path) -> None:
    dns_server.publish("nullmx.test", "MX", "0 .")
    dns_server.publish("nullmx.test", "A", "127.0.0.40")  # has an address, but takes no mail

    with pytest.raises(NullMxError) as caught:
        await make_resolver(tmp_path, dns_server.nameserver).resolve("nullmx.test")
    assert caught.value.permanent
    assert caught.value.enhanced == (5, 1, 10)
    assert "no mail server" in str(caught.value)


async def test_nxdomain_is_permanent(dns_server: AuthoritativeDnsServer, tmp_path: Path) -> None:
    with pytest.raises(NoSuchDomainError) as caught:
        await make_resolver(tmp_path, dns_server.nameserver).resolve("missing.test")
    assert caught.value.permanent
    assert caught.value.domain == "missing.test"


async def test_refused_is_transient(dns_server: AuthoritativeDnsServer, tmp_path: Path) -> None:
    # Knot is authoritative for .test only: it refuses anything else, as a broken server would.
    with pytest.raises(DnsTemporaryError) as caught:
        await make_resolver(tmp_path, dns_server.nameserver).resolve("example.org")
    assert not caught.value.permanent


@pytest.fixture
def silent_nameserver() -> Iterator[str]:
    """A UDP port that receives queries and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


async def test_timeout_is_transient_and_not_cached(silent_nameserver: str, tmp_path: Path) -> None:
    config = make_config(tmp_path, silent_nameserver)
    dns_resolver = build_resolver(config)
    dns_resolver.timeout = dns_resolver.lifetime = 0.3
    resolver = MxResolver(config, dns_resolver, clock=SettableClock())
    for _ in range(2):  # a failure is asked again, not served from the cache
        with trio.fail_after(5), pytest.raises(DnsTemporaryError, match="timed out"):
            await resolver.resolve("slow.test")


@pytest.mark.parametrize(
    ("routes", "domain", "site", "host", "port"),
    [
        ({"routed.test": "127.0.0.50:2525"}, "routed.test", "127.0.0.50:2525", "127.0.0.50", 2525),
        ({"*.corp.test": "[::1]:25"}, "a.b.corp.test", "[::1]:25", "::1", 25),
        ({"*": "192.0.2.7:587"}, "anything.example.com", "192.0.2.7:587", "192.0.2.7", 587),
        ({"routed.test": "127.0.0.50:1", "*": "192.0.2.7:587"}, "Routed.Test", "127.0.0.50:1",
         "127.0.0.50", 1),
    ],
)  # fmt: skip
async def test_routes_override_mx_without_dns(
    silent_nameserver: str,
    tmp_path: Path,
    routes: dict[str, str],
    domain: str,
    site: str,
    host: str,
    port: int,
) -> None:
    # The nameserver never answers: a route to an address needs no DNS at all.
    resolver = make_resolver(tmp_path, silent_nameserver, routes=routes)
    with trio.fail_after(1):
        destination = await resolver.resolve(domain)
    assert destination.routed
    assert destination.site == site
    assert destination.hosts == (MailHost(host, port, 0, (host,)),)


async def test_route_to_a_host_name_resolves_its_addresses_not_its_mx(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    dns_server.publish("relay.test", "MX", "10 elsewhere.test.")
    dns_server.publish("relay.test", "A", "127.0.0.60")
    resolver = make_resolver(tmp_path, dns_server.nameserver, routes={"*": "relay.test:587"})

    destination = await resolver.resolve("customer.example.com")

    assert destination.site == "relay.test:587"
    assert destination.hosts == (MailHost("relay.test", 587, 0, ("127.0.0.60",)),)


async def test_cache_respects_ttl(dns_server: AuthoritativeDnsServer, tmp_path: Path) -> None:
    dns_server.publish("cached.test", "MX", "10 old.cached.test.", ttl=300)
    dns_server.publish("old.cached.test", "A", "127.0.0.70", ttl=300)
    dns_server.publish("new.cached.test", "A", "127.0.0.71", ttl=300)
    clock = SettableClock()
    resolver = make_resolver(tmp_path, dns_server.nameserver, clock=clock)

    assert names(await resolver.resolve("cached.test")) == ["old.cached.test"]
    dns_server.publish("cached.test", "MX", "10 new.cached.test.", ttl=300)

    clock.now += 299  # within the TTL: the cached answer
    assert names(await resolver.resolve("cached.test")) == ["old.cached.test"]
    clock.now += 1  # the TTL is over: asked again
    assert names(await resolver.resolve("cached.test")) == ["new.cached.test"]


async def test_negative_answers_are_cached_briefly(
    dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    clock = SettableClock()
    resolver = make_resolver(tmp_path, dns_server.nameserver, clock=clock)
    with pytest.raises(NoSuchDomainError):
        await resolver.resolve("late.test")
    dns_server.publish("late.test", "A", "127.0.0.80")

    clock.now += 59
    with pytest.raises(NoSuchDomainError):
        await resolver.resolve("late.test")
    clock.now += 1
    destination = await resolver.resolve("late.test")
    assert destination.addresses() == [("127.0.0.80", 25)]


async def test_address_literal_needs_no_dns(silent_nameserver: str, tmp_path: Path) -> None:
    resolver = make_resolver(tmp_path, silent_nameserver)
    with trio.fail_after(1):
        v4 = await resolver.resolve("[192.0.2.9]")
        v6 = await resolver.resolve("[IPv6:2001:db8::9]")
    assert v4.addresses() == [("192.0.2.9", 25)]
    assert v6.addresses() == [("2001:db8::9", 25)]


def add_record(server: AuthoritativeDnsServer, name: str, rtype: str, value: str) -> None:
    """Add one record beside the others of its RRset (publish replaces the whole RRset)."""
    zone, owner = server._locate(name)
    with server._transaction(zone):
        server._knotc("zone-set", zone, owner, "60", rtype, *value.split())
