"""A login kept for a provider's answer is taken once, and only by the provider and browser
that started it, before it expires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from postwire.accounts import oauth
from postwire.accounts.provider_http import ProviderError
from postwire.store.spool import Spool
from postwire.store.sso import PendingLoginRecord, save_pending_login, secret_sha256

NOW = datetime(2026, 11, 25, 5, 0, tzinfo=UTC)


async def _keep(spool: Spool, state: str, *, provider: str = "google") -> None:
    record = PendingLoginRecord(
        provider=provider,
        team_id=None,
        nonce="n",
        code_verifier="v",
        next_url="/emails",
        browser_sha256=secret_sha256("browser-1"),
        redirect_uri="http://localhost:3001/auth/callback/google",
        created_at=NOW.isoformat(),
        expires_at=(NOW + oauth.LOGIN_TTL).isoformat(),
    )
    await save_pending_login(spool, state, record, now=NOW.isoformat())


async def _take(spool: Spool, **changes: object) -> PendingLoginRecord:
    settings: dict[str, object] = {
        "state": "s1",
        "provider": "google",
        "browser_secret": "browser-1",
        "now": NOW,
    }
    settings.update(changes)
    return await oauth.take_login(spool, **settings)  # type: ignore[arg-type]


async def test_the_browser_that_started_it_takes_it_once(spool: Spool) -> None:
    await _keep(spool, "s1")
    assert (await _take(spool)).nonce == "n"
    with pytest.raises(ProviderError, match="already used or is unknown"):
        await _take(spool)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"browser_secret": "browser-2"}, "started in another browser"),
        ({"browser_secret": None}, "started in another browser"),
        ({"provider": "github"}, "started with another provider"),
        ({"now": NOW + oauth.LOGIN_TTL + timedelta(seconds=1)}, "expired"),
        ({"state": ""}, "already used or is unknown"),
    ],
)
async def test_a_login_is_refused_elsewhere_or_late(
    spool: Spool, changes: dict[str, object], words: str
) -> None:
    await _keep(spool, "s1")
    with pytest.raises(ProviderError, match=words):
        await _take(spool, **changes)
