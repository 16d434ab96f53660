"""Connections to targets a user named (attachment `path` URLs, webhook endpoints), with a
guard against server-side request forgery.

A target's host is resolved once and every address vetted; the connection then goes to a
vetted address while the Host header and TLS server name keep the URL's host, so a second DNS
answer cannot send it elsewhere (DNS rebinding). Refusals are `RefusedTarget`, which each
caller turns into its own error.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

import httpx
import trio

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""`(host, port) -> addresses`: how a target's host becomes IP addresses to vet."""


class RefusedTarget(Exception):
    """The target cannot be reached safely: its host does not resolve, resolves to an address
    the guard refuses, or no vetted address accepts a connection. The text says which."""


# Instance metadata services (AWS, GCP and Azure share 169.254.169.254; AWS ECS, AWS over
# IPv6, Alibaba, Oracle). All are private anyway; named so that no allow-list lets them through.
CLOUD_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "100.100.100.200",
        "192.0.0.192",
    )
)
_NAT64_PREFIX = IPv6Network("64:ff9b::/96")


async def resolve_host(host: str, port: int) -> list[str]:
    """The host's addresses for TCP, in the resolver's order, through trio's thread pool."""
    infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def is_refused_address(address: IPAddress, allowed_networks: Sequence[IPNetwork] = ()) -> bool:
    """Whether an SSRF guard refuses `address`: anything not publicly routable (loopback,
    private, link-local, multicast, reserved, unspecified, shared) and cloud metadata services,
    also when tunnelled inside an IPv6 address. `allowed_networks` lets an operator's own
    networks through, but never a metadata address."""
    embedded = embedded_ipv4(address)
    if embedded is not None:
        return is_refused_address(embedded, allowed_networks)
    if address in CLOUD_METADATA_ADDRESSES:
        return True
    if any(address in network for network in allowed_networks):
        return False
    return (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


def embedded_ipv4(address: IPAddress) -> IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped, 6to4, Teredo or NAT64 IPv6 address."""
    if not isinstance(address, IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64_PREFIX:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def parse_http_url(value: str) -> httpx.URL | None:
    """`value` as httpx reads it when it is an http or https URL with a host, else None."""
    try:
        return as_http_url(httpx.URL(value))
    except (httpx.InvalidURL, ValueError):  # UnicodeEncodeError for unpaired surrogates
        return None


def as_http_url(url: httpx.URL) -> httpx.URL | None:
    return url if url.scheme in ("http", "https") and url.raw_host else None


async def vetted_addresses(
    host: str,
    port: int,
    *,
    allow_private: bool,
    allowed_networks: Sequence[IPNetwork] = (),
    resolve: Resolver = resolve_host,
) -> list[IPAddress]:
    """The addresses of `host`, each vetted unless `allow_private`."""
    try:
        # An IPv6 zone (`fe80::1%eth0`) is dropped: such addresses are link-local anyway.
        addresses = [
            ipaddress.ip_address(address.partition("%")[0]) for address in await resolve(host, port)
        ]
    except (OSError, ValueError):
        raise RefusedTarget(f"the host `{host}` could not be resolved") from None
    if not addresses:
        raise RefusedTarget(f"the host `{host}` could not be resolved")
    # One refused address refuses the host: a name that also points inward is not trusted.
    if not allow_private and any(is_refused_address(a, allowed_networks) for a in addresses):
        raise RefusedTarget(f"the host `{host}` is a private, loopback or reserved address")
    return addresses


async def send_to_first_reachable(
    client: httpx.AsyncClient, url: httpx.URL, addresses: list[IPAddress]
) -> httpx.Response:
    """GET `url` from each vetted address in turn until one connects; the response is
    streamed (the caller reads and closes it)."""
    host = url.raw_host.decode("ascii")
    headers = {"Host": url.netloc.decode("ascii"), "Accept-Encoding": "identity"}
    for address in addresses:
        # The URL names the vetted address; Host and the TLS server name keep the real host.
        request = client.build_request(
            "GET",
            url.copy_with(host=str(address)),
            headers=headers,
            extensions={"sni_hostname": host},
        )
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError:
            continue
        except httpx.HTTPError:
            break
    raise RefusedTarget("the connection to its host failed")
