"""Unsubscribe tokens, URLs, mailto addresses and header fields: pure functions, no spool."""

from __future__ import annotations

import base64
import re

import pytest

from postwire import _core
from postwire.compose.addresses import recipient_problem
from postwire.unsubscribe.links import (
    MAILTO_TOKEN_LENGTH,
    TOKEN_LENGTH,
    BroadcastLinks,
    UnsubscribeTarget,
    list_unsubscribe_headers,
    mailto_token,
    make_token,
    parse_mailto_address,
    parse_mailto_token,
    parse_token,
    unsubscribe_mailto,
    unsubscribe_url,
)

SECRET = bytes(range(32))
TEAM, OTHER_TEAM = _core.new_id(), _core.new_id()
CONTACT, OTHER_CONTACT = _core.new_id(), _core.new_id()
BROADCAST, OTHER_BROADCAST = _core.new_id(), _core.new_id()
BASE = "https://mail.example.com"
HOST = "send.example.com"


def _raw(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def _text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_token_round_trips_and_is_compact() -> None:
    token = make_token(SECRET, TEAM, CONTACT, BROADCAST)
    assert re.fullmatch(r"[A-Za-z0-9_-]{78}", token) and len(token) == TOKEN_LENGTH
    assert parse_token(SECRET, token) == UnsubscribeTarget(TEAM, CONTACT, BROADCAST)
    team_id, contact_id, broadcast_id = parse_token(SECRET, token) or ("", "", "")
    assert (team_id, contact_id, broadcast_id) == (TEAM, CONTACT, BROADCAST)


def _swap(token: str, start: int, replacement: str) -> str:
    """`token` with the 16 bytes at `start` replaced by the id `replacement`, tag kept."""
    raw = bytearray(_raw(token))
    raw[start : start + 16] = bytes.fromhex(replacement.replace("-", ""))
    return _text(bytes(raw))


@pytest.mark.parametrize(
    ("case", "edit"),
    [
        ("another team", lambda t: _swap(t, 0, OTHER_TEAM)),
        ("another broadcast", lambda t: _swap(t, 16, OTHER_BROADCAST)),
        ("another contact's id swapped in", lambda t: _swap(t, 32, OTHER_CONTACT)),
        ("tag flipped", lambda t: _text(_raw(t)[:-1] + bytes([_raw(t)[-1] ^ 1]))),
        ("truncated", lambda t: t[:-1]),
        ("lengthened", lambda t: t + "A"),
        ("empty", lambda t: ""),
        ("not base64", lambda t: t[:-2] + "!!"),
        ("another spelling of the same bytes", lambda t: t[:-1] + chr(ord(t[-1]) ^ 1)),
        ("signed under another secret", lambda t: make_token(b"x" * 32, TEAM, CONTACT, BROADCAST)),
        ("case changed", lambda t: t.swapcase()),
    ],
)
def test_edited_or_forged_tokens_are_refused(case: str, edit: object) -> None:
    token = make_token(SECRET, TEAM, CONTACT, BROADCAST)
    assert callable(edit)
    edited = edit(token)
    assert edited != token, case
    assert parse_token(SECRET, edited) is None, case


def test_a_token_names_exactly_its_contact() -> None:
    mine = make_token(SECRET, TEAM, CONTACT, BROADCAST)
    theirs = make_token(SECRET, TEAM, OTHER_CONTACT, BROADCAST)
    assert mine != theirs
    assert parse_token(SECRET, theirs) == (TEAM, OTHER_CONTACT, BROADCAST)


def test_url_and_headers() -> None:
    token = make_token(SECRET, TEAM, CONTACT, BROADCAST)
    url = unsubscribe_url(BASE + "/", token)
    assert url == f"{BASE}/u/{token}"
    mailto = unsubscribe_mailto(token, "Send.Example.COM")
    assert list_unsubscribe_headers(url, mailto) == [
        ("List-Unsubscribe", f"<{url}>, <mailto:{mailto}>"),
        ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
    ]
    assert list_unsubscribe_headers(url, None)[0] == ("List-Unsubscribe", f"<{url}>")


def test_mailto_address_is_a_valid_recipient_within_64_octets() -> None:
    token = make_token(SECRET, TEAM, CONTACT, BROADCAST)
    mailto = unsubscribe_mailto(token, HOST)
    local, _, host = mailto.rpartition("@")
    assert host == HOST and len(local) <= 64
    assert recipient_problem(mailto) is None
    assert parse_mailto_address(f"<{mailto}>") == (mailto_token(token), HOST)
    assert len(mailto_token(token)) == MAILTO_TOKEN_LENGTH


def test_mailto_token_names_its_team_among_the_candidates() -> None:
    token = mailto_token(make_token(SECRET, TEAM, CONTACT, BROADCAST))
    expected = UnsubscribeTarget(TEAM, CONTACT, BROADCAST)
    assert parse_mailto_token(SECRET, token, [OTHER_TEAM, TEAM]) == expected
    assert parse_mailto_token(SECRET, token, [OTHER_TEAM]) is None  # another team's host
    assert parse_mailto_token(SECRET, token, []) is None
    swapped = _text(
        _raw(token)[:16] + bytes.fromhex(OTHER_CONTACT.replace("-", "")) + _raw(token)[32:]
    )
    assert parse_mailto_token(SECRET, swapped, [TEAM]) is None
    assert parse_mailto_token(SECRET, token.swapcase(), [TEAM]) is None


@pytest.mark.parametrize(
    "address",
    [
        "bounces+x@send.example.com",
        "unsub+short@send.example.com",
        "unsub@send.example.com",
        "unsub+" + "a" * 56,  # no domain
        "unsub+" + "a" * 55 + "!@send.example.com",
    ],
)
def test_other_addresses_are_not_unsubscribe_addresses(address: str) -> None:
    assert parse_mailto_address(address) is None


def test_broadcast_links_match_the_functions() -> None:
    links = BroadcastLinks(SECRET, BASE, TEAM, BROADCAST, "Send.Example.com")
    for contact in (CONTACT, OTHER_CONTACT):
        token = make_token(SECRET, TEAM, contact, BROADCAST)
        made = links.for_contact(contact)
        assert links.token(contact) == token
        assert made.url == unsubscribe_url(BASE, token)
        assert made.mailto == unsubscribe_mailto(token, HOST)
        assert made.headers == list_unsubscribe_headers(made.url, made.mailto)
    no_mailto = BroadcastLinks(SECRET, BASE, TEAM, BROADCAST, None).for_contact(CONTACT)
    assert no_mailto.mailto is None and no_mailto.headers[0][1] == f"<{no_mailto.url}>"
