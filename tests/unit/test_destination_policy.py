"""The engine's destination policy: which resolved addresses it may connect to."""

import ipaddress

import pytest

from postwire.delivery.destination_policy import (
    guard_destination,
    own_addresses,
    refusal_reason,
)
from postwire.delivery.resolver import Destination, MailHost
from postwire.errors import DestinationRefused

OWN = frozenset({ipaddress.ip_address("203.0.113.7"), ipaddress.ip_address("2001:db8::25")})


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.10", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),  # IPv4-mapped
        ("2002:7f00:1::", "a loopback address"),  # 6to4 around 127.0.0.1
        ("0.0.0.0", "the unspecified address"),
        ("::", "the unspecified address"),
        ("169.254.169.254", "a link-local address"),  # cloud metadata services
        ("fe80::1", "a link-local address"),
        ("224.0.0.251", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("10.0.0.5", "a private address"),
        ("172.16.1.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fd00::1", "a private address"),
        ("100.64.0.1", "not a public address"),  # shared address space (CGNAT)
        ("203.0.113.7", "a private address"),  # documentation range, listed private
        ("not-an-ip", "not an IP address"),
    ],
)
def test_refusal_reasons(address: str, reason: str | None) -> None:
    assert refusal_reason(address, frozenset()) == reason


def test_the_hosts_own_public_addresses_are_refused() -> None:
    public = ipaddress.ip_address("8.8.4.4")
    assert refusal_reason("8.8.4.4", frozenset({public})) == "an address of this host"
    assert refusal_reason("8.8.4.4", OWN) is None


def test_own_addresses_include_the_interfaces_and_the_sending_ips() -> None:
    found = own_addresses(["198.51.100.25", "not an address"])
    assert ipaddress.ip_address("198.51.100.25") in found
    assert ipaddress.ip_address("127.0.0.1") in found  # the loopback interface


def _destination(*hosts: tuple[str, tuple[str, ...]]) -> Destination:
    mail_hosts = tuple(MailHost(name, 25, 10, addresses) for name, addresses in hosts)
    return Destination("example.org", "mx", mail_hosts)


def test_guard_keeps_only_the_public_addresses() -> None:
    destination = _destination(
        ("mx1.example.org", ("10.0.0.5", "8.8.8.8")), ("mx2.example.org", ("127.0.0.1",))
    )
    guarded = guard_destination(destination, OWN)
    assert [(h.name, h.addresses) for h in guarded.hosts] == [("mx1.example.org", ("8.8.8.8",))]


def test_guard_refuses_a_destination_with_no_public_address() -> None:
    destination = _destination(("mx.example.org", ("127.0.0.1", "::1")))
    with pytest.raises(DestinationRefused) as refused:
        guard_destination(destination, OWN)
    message = str(refused.value)
    assert "127.0.0.1 (a loopback address)" in message and "example.org" in message
    assert refused.value.enhanced == (5, 4, 4) and not refused.value.transient
