"""Single-use links in the spool: a token opens its link until it expires or is used, only its
hash is stored, and every refusal (unknown, altered, expired, used, wrong purpose) is one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import trio

from postwire.accounts.links import (
    REFUSAL,
    LinkPurpose,
    LinkRefused,
    check_link,
    issue_link,
    link_url,
    redeem_link,
)
from postwire.store.invitations import AUTH_LINKS, LINK_EXPIRIES, get_link
from postwire.store.spool import Spool

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


async def test_a_link_opens_until_used_and_only_its_hash_is_stored(spool: Spool) -> None:
    token, record = await issue_link(
        spool, "reset_password", email="ada@example.com", user_id="u1", ttl=HOUR, now=NOW
    )
    lookup, secret = token.split(".")
    stored = get_link(spool, lookup)
    assert stored == record and stored.used_at_ms is None
    assert secret not in repr(stored) and len(secret) >= 43  # 256 bits, hashed at rest
    assert check_link(spool, token, ("reset_password",), NOW + HOUR / 2) == record

    async with redeem_link(spool, token, ("reset_password",), NOW) as redemption:
        assert redemption.link.user_id == "u1"
    used = get_link(spool, lookup)
    assert used is not None and used.used_at_ms == int(NOW.timestamp() * 1000)
    with pytest.raises(LinkRefused):
        check_link(spool, token, ("reset_password",), NOW)
    with pytest.raises(LinkRefused):
        async with redeem_link(spool, token, ("reset_password",), NOW):
            pass


async def test_expired_tampered_unknown_and_other_purposes_are_one_refusal(spool: Spool) -> None:
    token, _ = await issue_link(spool, "invite", email="bo@example.com", ttl=HOUR, now=NOW)
    lookup, secret = token.split(".")
    # The first character: the last one's low bits may be padding that decoding drops.
    flipped = ("A" if secret[0] != "A" else "B") + secret[1:]
    refused: list[tuple[str, tuple[LinkPurpose, ...], datetime]] = [
        (token, ("invite",), NOW + HOUR),  # expired: the hour is up
        (f"{lookup}.{flipped}", ("invite",), NOW),  # secret altered
        (f"{lookup[:-1]}x.{secret}", ("invite",), NOW),  # lookup altered
        (lookup, ("invite",), NOW),  # cut short
        ("", ("invite",), NOW),
        (token, ("reset_password", "set_password"), NOW),  # not what it was issued for
    ]
    for presented, purposes, at in refused:
        with pytest.raises(LinkRefused) as refusal:
            check_link(spool, presented, purposes, at)
        assert str(refusal.value) == REFUSAL
    assert check_link(spool, token, ("invite",), NOW + HOUR - timedelta(milliseconds=1))


async def test_a_failed_change_leaves_the_link_usable(spool: Spool) -> None:
    token, _ = await issue_link(spool, "verify_email", email="cy@example.com", ttl=HOUR, now=NOW)
    with pytest.raises(RuntimeError):
        async with redeem_link(spool, token, ("verify_email",), NOW):
            raise RuntimeError("the change it authorises failed")
    assert check_link(spool, token, ("verify_email",), NOW)


async def test_two_uses_at_once_let_one_through(spool: Spool) -> None:
    token, _ = await issue_link(spool, "set_password", email="di@example.com", ttl=HOUR, now=NOW)
    passed: list[str] = []

    async def use(name: str) -> None:
        try:
            async with redeem_link(spool, token, ("set_password",), NOW):
                await trio.sleep(0.01)  # the other use arrives meanwhile
                passed.append(name)
        except LinkRefused:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(use, "first")
        nursery.start_soon(use, "second")
    assert len(passed) == 1


async def test_issuing_deletes_expired_links(spool: Spool) -> None:
    old, _ = await issue_link(spool, "invite", email="ed@example.com", ttl=HOUR, now=NOW)
    later = NOW + 2 * HOUR
    fresh, _ = await issue_link(spool, "invite", email="fa@example.com", ttl=HOUR, now=later)
    assert get_link(spool, old.split(".")[0]) is None
    assert [key for key, _ in AUTH_LINKS.scan(spool, prefix="link/")] == [
        f"link/{fresh.split('.')[0]}"
    ]
    assert len(LINK_EXPIRIES.scan(spool, prefix="expiry/")) == 1


def test_link_urls_are_under_the_public_url() -> None:
    assert link_url("https://mail.example.com/", "invite", "ab.cd") == (
        "https://mail.example.com/invite/ab.cd"
    )
    assert link_url("http://localhost:3001", "reset_password", "x.y").endswith(
        "/password/reset/x.y"
    )
