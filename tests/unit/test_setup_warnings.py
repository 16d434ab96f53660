"""Table tests of the rules that warn about settings the Internet will not accept."""

from __future__ import annotations

from pathlib import Path

import pytest

from postwire.config import ApiConfig, Config, DeliveryConfig, DomainsConfig
from postwire.domains.setup_warnings import (
    domain_warnings,
    is_public_host_name,
    record_warnings,
    tracking_warnings,
)


def config(
    helo: str = "mail.example-mail.net",
    sending_ips: tuple[str, ...] = (),
    bounce_host: str | None = None,
    public_url: str = "https://mail.example-mail.net",
) -> Config:
    return Config(
        data_dir=Path("/nonexistent"),
        api=ApiConfig(public_url=public_url),
        delivery=DeliveryConfig(helo_name=helo, sending_ips=sending_ips),
        domains=DomainsConfig(bounce_host=bounce_host),
    )


@pytest.mark.parametrize(
    ("name", "public"),
    [
        ("mail.example-mail.net", True),
        ("MX1.Mail.Example-Mail.NET.", True),
        ("localhost", False),
        ("localhost.", False),
        ("3f2a9c1d5e7b", False),  # a container's host name
        ("mail.localhost", False),
        ("box.local", False),
        ("mail.test", False),
        ("router.home.arpa", False),
        ("mx.example.com", False),
        ("db.internal", False),
        ("laptop.lan", False),
        ("192.0.2.25", False),
        ("::1", False),
        ("example.network", True),
    ],
)
def test_public_host_names(name: str, public: bool) -> None:
    assert is_public_host_name(name) is public


def test_a_public_setup_has_no_warnings() -> None:
    assert record_warnings(config(sending_ips=("185.12.64.25", "2001:4860::25"))) == []
    assert domain_warnings(config(), open_tracking=True, click_tracking=True) == []


def test_a_localhost_helo_names_the_records_that_use_it_and_the_setting() -> None:
    (warning,) = record_warnings(config(helo="localhost"))
    assert warning.setting == "delivery.helo_name"
    assert "'localhost'" in warning.message
    assert "MX 10 localhost" in warning.message and "v=spf1 a:localhost -all" in warning.message
    assert "Set delivery.helo_name" in warning.message
    # With its own bounce host and sending IPs, only EHLO still shows the name.
    (warning,) = record_warnings(
        config(
            helo="localhost", bounce_host="bounces.example-mail.net", sending_ips=("185.12.64.25",)
        )
    )
    assert "MX" not in warning.message and "SPF" not in warning.message


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"bounce_host": "bounces.local"}, ["domains.bounce_host"]),
        ({"sending_ips": ("10.0.0.5", "185.12.64.25")}, ["delivery.sending_ips"]),
        ({"sending_ips": ("192.0.2.25",)}, ["delivery.sending_ips"]),  # documentation range
        ({"sending_ips": ("fd00::25",)}, ["delivery.sending_ips"]),
        (
            {"helo": "localhost", "sending_ips": ("127.0.0.1",)},
            ["delivery.helo_name", "delivery.sending_ips"],
        ),
    ],
)
def test_record_warnings_name_the_setting_that_fixes_them(
    settings: dict[str, object], expected: list[str]
) -> None:
    warnings = record_warnings(config(**settings))  # type: ignore[arg-type]
    assert [warning.setting for warning in warnings] == expected
    if "sending_ips" in settings:
        assert "185.12.64.25" not in warnings[-1].message  # only the unroutable ones


@pytest.mark.parametrize(
    ("public_url", "why"),
    [
        ("http://127.0.0.1:3000", "cannot reach"),
        ("http://localhost:3000", "cannot reach"),
        ("http://[::1]:3000", "cannot reach"),
        ("http://10.1.2.3", "cannot reach"),
        ("http://postwire.internal", "cannot reach"),
        ("https://185.12.64.9", "HTTP_TO_IP"),
        ("http://[2001:4860::9]:8080", "HTTP_TO_IP"),
    ],
)
def test_tracking_warns_about_a_public_url_recipients_cannot_use(public_url: str, why: str) -> None:
    (warning,) = tracking_warnings(config(public_url=public_url))
    assert warning.setting == "api.public_url"
    assert public_url in warning.message and why in warning.message


def test_tracking_warnings_concern_only_domains_with_tracking_on() -> None:
    loopback = config(public_url="http://127.0.0.1:3000")
    assert domain_warnings(loopback, open_tracking=False, click_tracking=False) == []
    for opens, clicks in [(True, False), (False, True)]:
        (warning,) = domain_warnings(loopback, open_tracking=opens, click_tracking=clicks)
        assert warning.to_json()["setting"] == "api.public_url"
