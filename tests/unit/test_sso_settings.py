"""A team's SSO settings: saved whole, email domains claimed by one team only, enforcement
refusing password login to members but not owners, and pending logins taken once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
import trio

from postwire import _core
from postwire.accounts import sso
from postwire.accounts.sso import SsoSettingsError
from postwire.store.spool import Spool
from postwire.store.sso import (
    EXPIRIES,
    PendingLoginRecord,
    SsoConfigRecord,
    get_pending_login,
    put_pending_login,
    save_pending_login,
    secret_sha256,
    take_pending_login,
    team_for_email_domain,
)

NOW = datetime(2026, 11, 25, 5, 0, tzinfo=UTC)


async def test_enforcement_refuses_password_login_to_members_but_not_owners(spool: Spool) -> None:
    assert not sso.team_enforces_sso(spool, "t1")
    oidc = SsoConfigRecord(
        team_id="t1", protocol="oidc", oidc_issuer="https://idp.example", oidc_client_id="c"
    )
    await sso.save_sso_settings(spool, oidc, now=NOW)
    assert not sso.team_enforces_sso(spool, "t1")
    await sso.save_sso_settings(spool, replace(oidc, enforce=True), now=NOW)
    assert sso.team_enforces_sso(spool, "t1")
    assert sso.password_login_refused(spool, "t1", "member")
    assert sso.password_login_refused(spool, "t1", "admin")
    assert not sso.password_login_refused(spool, "t1", "owner")
    assert not sso.password_login_refused(spool, "t2", "member")


async def test_incomplete_settings_are_refused_in_words(spool: Spool) -> None:
    with pytest.raises(SsoSettingsError, match="issuer"):
        await sso.save_sso_settings(spool, SsoConfigRecord(team_id="t1", protocol="oidc"), now=NOW)
    with pytest.raises(SsoSettingsError, match="metadata"):
        await sso.save_sso_settings(spool, SsoConfigRecord(team_id="t1", protocol="saml"), now=NOW)
    with pytest.raises(SsoSettingsError, match="enforced"):
        await sso.save_sso_settings(spool, SsoConfigRecord(team_id="t1", enforce=True), now=NOW)


async def test_an_email_domain_must_be_a_verified_domain_of_the_team(spool: Spool) -> None:
    claim = SsoConfigRecord(
        team_id="t1",
        protocol="oidc",
        oidc_issuer="https://idp.example",
        oidc_client_id="c",
        email_domains=["gmail.com"],
    )
    with pytest.raises(SsoSettingsError, match="not a verified domain"):
        await sso.save_sso_settings(spool, claim, now=NOW)
    assert team_for_email_domain(spool, "gmail.com") is None


def test_email_domains_are_parsed_and_checked() -> None:
    assert sso.parse_email_domains("Example.com, a.example.org\nexample.com") == [
        "example.com",
        "a.example.org",
    ]
    with pytest.raises(SsoSettingsError, match="not a domain"):
        sso.parse_email_domains("example.com, https://evil")


async def test_a_pending_login_is_taken_once(spool: Spool) -> None:
    record = _login(NOW.isoformat())
    batch = _core.WriteBatch()
    put_pending_login(batch, "state-1", record)
    await spool.commit(batch)
    results: list[PendingLoginRecord | None] = []

    async def take() -> None:
        results.append(await take_pending_login(spool, "state-1"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take)
        nursery.start_soon(take)
    assert sorted(results, key=lambda r: r is None) == [record, None]
    assert await take_pending_login(spool, "state-2") is None


async def test_abandoned_logins_are_pruned_as_new_ones_start(spool: Spool) -> None:
    now = NOW.isoformat()
    await save_pending_login(spool, "old", _login("2026-11-25T05:00:00+00:00"), now=now)
    await save_pending_login(spool, "live", _login("2026-11-25T05:30:00+00:00"), now=now)
    assert get_pending_login(spool, "old") is not None
    await save_pending_login(
        spool, "new", _login("2026-11-25T05:31:00+00:00"), now="2026-11-25T05:16:00+00:00"
    )
    assert get_pending_login(spool, "old") is None
    assert get_pending_login(spool, "live") is not None
    assert await take_pending_login(spool, "live") is not None
    # Nothing of a taken or pruned login stays behind, its expiry entry included.
    assert [key for key, _ in EXPIRIES.scan(spool, prefix="expiry/")] == [
        "expiry/2026-11-25T05:31:00+00:00/" + _pending_key_of("new")
    ]


def _login(expires_at: str) -> PendingLoginRecord:
    return PendingLoginRecord(
        provider="google",
        team_id=None,
        nonce="n",
        code_verifier="v",
        next_url="/emails",
        browser_sha256="b",
        redirect_uri="http://localhost:3001/auth/callback/google",
        created_at=NOW.isoformat(),
        expires_at=expires_at,
    )


def _pending_key_of(handle: str) -> str:
    return f"pending/{secret_sha256(handle)}"
