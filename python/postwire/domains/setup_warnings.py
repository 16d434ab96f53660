"""Settings that make a domain's DNS records, or its tracked links, useless outside this machine.
Pure functions over the config.

The records every domain is asked to publish name this host: the return-path MX points at
`domains.bounce_host` (else `delivery.helo_name`), and SPF authorises `delivery.sending_ips`
(else `a:<delivery.helo_name>`). With the default HELO name of a laptop or a container,
`localhost`, they say `send MX 10 localhost` and `v=spf1 a:localhost -all`: published as asked,
they make bounces undeliverable and SPF fail. Tracking rewrites links to `api.public_url`, which
recipients cannot reach on a loopback or private address, and which spam filters score on a
bare IP address (SpamAssassin's and rspamd's HTTP_TO_IP).

Each warning names the setting that fixes it. `postwire serve` logs them at start-up, and the
domain's API answer carries them in `warnings`.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from postwire.config import Config

# Names no public DNS resolves: single labels, and these special-use or private-use suffixes
# (RFC 2606, 6761, 6762 appendix G, 8375, and ICANN's reservation of .internal).
NON_PUBLIC_SUFFIXES: Final = frozenset(
    {
        "localhost", "local", "test", "example", "invalid", "internal", "intranet", "private",
        "corp", "home", "lan", "localdomain", "home.arpa", "example.com", "example.net",
        "example.org",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SetupWarning:
    """Something about the configuration the Internet will not accept, and the key that fixes it."""

    setting: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"setting": self.setting, "message": self.message}


def is_public_host_name(name: str) -> bool:
    """Whether `name` is a DNS name the rest of the Internet could resolve: not an IP address,
    not a single label, not under a special-use or private-use suffix."""
    name = name.lower().rstrip(".")
    if _ip_address(name) is not None:
        return False
    labels = name.split(".")
    if len(labels) < 2:
        return False
    return not any(".".join(labels[i:]) in NON_PUBLIC_SUFFIXES for i in range(len(labels)))


def record_warnings(config: Config) -> list[SetupWarning]:
    """What in `delivery.helo_name`, `domains.bounce_host` and `delivery.sending_ips` makes the
    records every domain publishes (or the HELO peers see) unusable from the Internet."""
    warnings = []
    helo = config.delivery.helo_name.lower().rstrip(".")
    if not is_public_host_name(helo):
        uses = []
        if config.domains.bounce_host is None:
            uses.append(f"return-path MX record (MX 10 {helo})")
        if not config.delivery.sending_ips:
            uses.append(f"SPF record (v=spf1 a:{helo} -all)")
        verb = "name" if len(uses) > 1 else "names"
        records = f", and every domain's {' and '.join(uses)} {verb} it" if uses else ""
        warnings.append(
            SetupWarning(
                "delivery.helo_name",
                f"delivery.helo_name is {helo!r}, not a public DNS name: receiving servers see "
                f"it in EHLO{records}, so mail from here fails their checks. Set "
                "delivery.helo_name to this host's public name, whose A record is the sending "
                "address and whose PTR record names it back.",
            )
        )
    bounce_host = config.domains.bounce_host
    if bounce_host is not None and not is_public_host_name(bounce_host):
        warnings.append(
            SetupWarning(
                "domains.bounce_host",
                f"domains.bounce_host is {bounce_host!r}, not a public DNS name: every domain's "
                "return-path MX record names it, so bounces cannot come back. Set "
                "domains.bounce_host to a public name of this host.",
            )
        )
    private = [ip for ip in config.delivery.sending_ips if not _is_global(ip)]
    if private:
        warnings.append(
            SetupWarning(
                "delivery.sending_ips",
                f"delivery.sending_ips lists {', '.join(private)}, not routable on the "
                "Internet: every domain's SPF record authorises addresses no mail can come "
                "from. List the public addresses mail leaves from.",
            )
        )
    return warnings


def tracking_warnings(config: Config) -> list[SetupWarning]:
    """What in `api.public_url` keeps tracked links (opens, clicks) from working in recipients'
    mail; they matter for domains with tracking on."""
    url = config.api.public_url
    host = (urllib.parse.urlsplit(url).hostname or "").lower().rstrip(".")
    address = _ip_address(host)
    if address is not None and address.is_global:
        problem = (
            "an IP address: spam filters score links to a bare IP address (HTTP_TO_IP), and "
            "every tracked link is one"
        )
    elif address is not None or not is_public_host_name(host):
        problem = "which recipients cannot reach: the pixel and the tracked links fail"
    else:
        return []
    return [
        SetupWarning(
            "api.public_url",
            f"open or click tracking is on, but api.public_url is {url}, {problem}. Set "
            "api.public_url to the public https:// name the API is reachable at.",
        )
    ]


def domain_warnings(
    config: Config, *, open_tracking: bool, click_tracking: bool
) -> list[SetupWarning]:
    """Every warning that concerns one domain: its records, and its tracking when on."""
    tracking = tracking_warnings(config) if open_tracking or click_tracking else []
    return [*record_warnings(config), *tracking]


def _ip_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _is_global(ip: str) -> bool:
    address = _ip_address(ip)
    return address is not None and address.is_global
