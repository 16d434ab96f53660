"""The accounts layer under the dashboard: Argon2id passwords, sessions and their timeouts on
an injected clock, login limits per account and address, and where `next` may lead."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio

from postwire.accounts import login_limits, passwords, sessions, users
from postwire.accounts.sessions import SessionLimits
from postwire.config import AuthConfig
from postwire.dashboard.assets import Assets, hashed_name
from postwire.dashboard.next_url import DEFAULT_NEXT, safe_next
from postwire.store import sessions as store_sessions
from postwire.store.sessions import SESSIONS
from postwire.store.spool import Spool
from postwire.store.users import UserRecord, role_at_least

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
T0 = NOW.timestamp()
LIMITS = SessionLimits(idle_seconds=600.0, absolute_seconds=3600.0)


async def make_user(spool: Spool, email: str = "ada@example.com") -> UserRecord:
    return await users.create_user(spool, email=email, name="Ada", now=NOW)


# Passwords


def test_passwords_are_argon2id_and_verified() -> None:
    stored = passwords.hash_password_sync("correct horse battery")
    assert stored.startswith("$argon2id$")
    assert passwords.verify_password_sync(stored, "correct horse battery")
    assert not passwords.verify_password_sync(stored, "correct horse batterY")
    assert not passwords.needs_rehash(stored)


def test_no_stored_hash_never_matches_and_garbage_is_refused() -> None:
    assert not passwords.verify_password_sync(None, "not the password of anyone")
    assert not passwords.verify_password_sync("not-a-hash", "x")
    assert passwords.needs_rehash("$argon2id$v=19$m=1024,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2g")


@pytest.mark.parametrize(
    ("password", "ok"), [("short", False), ("ten chars!", True), ("x" * 1025, False)]
)
def test_password_rules(password: str, ok: bool) -> None:
    assert (passwords.password_problem(password) is None) == ok


# Users and memberships


async def test_an_address_belongs_to_one_user_whatever_its_case(spool: Spool) -> None:
    ada = await make_user(spool)
    assert users.find_user_by_email(spool, " ADA@Example.com ") == ada
    with pytest.raises(users.EmailTakenError):
        await make_user(spool, "Ada@example.com")


async def test_memberships_are_found_from_both_sides(spool: Spool) -> None:
    ada = await make_user(spool)
    membership = await users.add_membership(spool, ada.id, "team-1", "admin", NOW)
    assert users.members_of(spool, "team-1") == [(membership, ada)]
    owner = await users.set_role(spool, membership, "owner")
    assert users.get_membership(spool, ada.id, "team-1") == owner
    await users.remove_membership(spool, owner)
    assert users.members_of(spool, "team-1") == []
    assert users.get_membership(spool, ada.id, "team-1") is None


@pytest.mark.parametrize(
    ("role", "needed", "ok"),
    [
        ("owner", "admin", True),
        ("admin", "admin", True),
        ("member", "admin", False),
        ("member", "member", True),
        ("admin", "owner", False),
        ("stranger", "member", False),
    ],
)
def test_roles_are_ordered(role: str, needed: str, ok: bool) -> None:
    assert role_at_least(role, needed) == ok


# Sessions


async def test_only_the_tokens_hash_is_stored(spool: Spool) -> None:
    ada = await make_user(spool)
    token, session = await sessions.start_session(
        spool, ada, "team-1", mfa_pending=False, method="password", now=T0
    )
    assert len(token) >= 43  # 32 random bytes, URL-safe base64
    assert session.token_sha256 == sessions.token_sha256(token)
    raw_keys = [key for key, _ in SESSIONS.scan(spool, prefix="token/")]
    assert all(token not in key for key in raw_keys)
    assert sessions.load_session(spool, token, T0 + 1, LIMITS) == session


async def test_idle_and_absolute_timeouts(spool: Spool) -> None:
    ada = await make_user(spool)
    token, session = await sessions.start_session(
        spool, ada, "team-1", mfa_pending=False, method="password", now=T0
    )
    assert sessions.load_session(spool, token, T0 + 599, LIMITS) is not None
    assert sessions.load_session(spool, token, T0 + 600, LIMITS) is None  # idle
    # Kept busy, it still ends an hour after login.
    for minute in range(1, 60, 5):
        assert sessions.needs_touch(session, T0 + minute * 60)
        session = await sessions.touch_session(spool, session, T0 + minute * 60)
        assert sessions.load_session(spool, token, T0 + minute * 60 + 1, LIMITS) is not None
    assert sessions.load_session(spool, token, T0 + 3600, LIMITS) is None  # absolute
    assert not sessions.needs_touch(session, session.last_seen_at + 59)


async def test_login_replaces_the_browsers_session_and_mfa_renews_the_token(spool: Spool) -> None:
    ada = await make_user(spool)
    old_token, old = await sessions.start_session(
        spool, ada, "team-1", mfa_pending=False, method="password", now=T0
    )
    pending_token, pending = await sessions.start_session(
        spool, ada, "team-1", mfa_pending=True, method="password", now=T0, replaces=old
    )
    assert sessions.load_session(spool, old_token, T0, LIMITS) is None
    assert pending_token != old_token and pending.csrf_token != old.csrf_token
    full_token, full = await sessions.complete_mfa(spool, pending, T0 + 5)
    assert not full.mfa_pending and full_token != pending_token
    assert sessions.load_session(spool, pending_token, T0 + 5, LIMITS) is None
    assert sessions.load_session(spool, full_token, T0 + 5, LIMITS) == full


async def test_a_login_sweeps_the_users_expired_sessions(spool: Spool) -> None:
    ada = await make_user(spool)
    _, stale = await sessions.start_session(
        spool, ada, "team-1", mfa_pending=False, method="password", now=T0
    )
    _, live = await sessions.start_session(
        spool, ada, "team-1", mfa_pending=False, method="password", now=T0 + 500
    )
    await sessions.start_session(
        spool, ada, "team-1", mfa_pending=False, method="password", now=T0 + 700, limits=LIMITS
    )
    stored = {s.id for s in store_sessions.sessions_of_user(spool, ada.id)}
    assert stale.id not in stored and live.id in stored and len(stored) == 2


async def test_list_and_end_other_sessions(spool: Spool) -> None:
    ada = await make_user(spool)
    bob = await make_user(spool, "bob@example.com")
    tokens = []
    for n in range(3):
        token, _ = await sessions.start_session(
            spool, ada, "team-1", mfa_pending=False, method="password", now=T0 + n
        )
        tokens.append(token)
    bob_token, _ = await sessions.start_session(
        spool, bob, "team-1", mfa_pending=False, method="password", now=T0
    )
    listed = sessions.list_sessions(spool, ada.id, T0 + 10, LIMITS)
    assert [s.created_at for s in listed] == [T0 + 2, T0 + 1, T0]  # most recent first
    keep = listed[0]
    assert await sessions.end_other_sessions(spool, keep) == 2
    assert [s.id for s in sessions.list_sessions(spool, ada.id, T0 + 10, LIMITS)] == [keep.id]
    assert sessions.load_session(spool, bob_token, T0 + 10, LIMITS) is not None
    assert await sessions.end_all_sessions(spool, ada.id) == 1
    assert sessions.list_sessions(spool, ada.id, T0 + 10, LIMITS) == []


# Login limits


AUTH = AuthConfig(max_login_failures=4, max_login_failures_per_address=100)
RIGHT = "correct horse battery"
RIGHT_HASH = passwords.hash_password_sync(RIGHT)


async def attempt(
    spool: Spool, password: str, now: float, address: str = "10.0.0.1", auth: AuthConfig = AUTH
) -> bool | int:
    """The check's answer, or the seconds to wait when it was throttled."""
    try:
        return await login_limits.check_password(
            spool, auth, "ada@example.com", address, RIGHT_HASH, password, now
        )
    except login_limits.Throttled as throttled:
        return throttled.retry_after


def test_allowances_grow_with_their_windows() -> None:
    assert login_limits.growing_windows(10) == (
        login_limits.Window(60, 5),
        login_limits.Window(900, 10),
        login_limits.Window(3600, 20),
        login_limits.Window(86400, 40),
    )
    assert login_limits.growing_windows(1)[0] == login_limits.Window(60, 1)


async def test_a_guesser_waits_longer_and_longer_and_the_owner_still_signs_in(
    spool: Spool,
) -> None:
    # Two a minute (half of 4), then the minute's end; four a quarter hour, then its end.
    assert [await attempt(spool, "wrong", T0 + n) for n in range(3)] == [False, False, 58]
    assert await attempt(spool, RIGHT, T0 + 3) == 57  # refused before the check: not counted
    assert await attempt(spool, RIGHT, T0 + 4, address="10.0.0.2") is True  # the owner
    assert [await attempt(spool, "wrong", T0 + 60 + n) for n in range(3)] == [False, False, 838]
    # Eight an hour, sixteen a day: the waits grow to the hour's end, then the day's.
    for quarter in (1, 2):
        for n in range(2):
            assert await attempt(spool, "wrong", T0 + quarter * 900 + n * 60) is False
    assert await attempt(spool, "wrong", T0 + 2 * 900 + 120) == 3600 - 2 * 900 - 120
    for n in range(8):
        assert await attempt(spool, "wrong", T0 + 3600 * (1 + n // 2) + 900 * (n % 2)) is False
    wait = await attempt(spool, "wrong", T0 + 5 * 3600)
    assert wait == 86400 - 10 * 3600 - 5 * 3600  # T0 is 10:00 UTC
    assert await attempt(spool, RIGHT, T0 + 5 * 3600, address="10.0.0.3") is True


async def test_a_right_password_clears_its_pair_not_the_address(spool: Spool) -> None:
    auth = AuthConfig(max_login_failures=4, max_login_failures_per_address=6)
    assert await attempt(spool, "wrong", T0, auth=auth) is False
    assert await attempt(spool, RIGHT, T0 + 1, auth=auth) is True
    assert await attempt(spool, "wrong", T0 + 2, auth=auth) is False
    assert await attempt(spool, "wrong", T0 + 3, auth=auth) is False  # the pair's 2: cleared
    # The address's 3 a minute are used (the right password took back only its own count).
    with pytest.raises(login_limits.Throttled):
        await login_limits.check_password(
            spool, auth, "bob@example.com", "10.0.0.1", None, "wrong", T0 + 4
        )


async def test_an_ipv6_client_counts_per_64(spool: Spool) -> None:
    auth = AuthConfig(max_login_failures=100, max_login_failures_per_address=2)
    assert await attempt(spool, "wrong", T0, "2001:db8:1:2::1", auth) is False
    assert await attempt(spool, "wrong", T0, "2001:db8:1:2:ffff::9", auth) == 60
    assert await attempt(spool, "wrong", T0, "2001:db8:1:3::1", auth) is False


async def test_parallel_guesses_get_no_more_checks_than_the_allowance(spool: Spool) -> None:
    answers: list[bool | int] = []

    async def guess(password: str) -> None:
        answers.append(await attempt(spool, password, T0 + 2))

    async with trio.open_nursery() as nursery:
        for _ in range(30):
            nursery.start_soon(guess, "wrong")
    assert (answers.count(False), answers.count(58), len(answers)) == (2, 28, 30)


async def test_unlock_clears_the_account_from_every_address(spool: Spool) -> None:
    for address in ("10.0.0.1", "10.0.0.2"):
        for n in range(2):
            assert await attempt(spool, "wrong", T0 + n, address=address) is False
        assert await attempt(spool, RIGHT, T0 + 2, address=address) == 58
    assert await login_limits.unlock(spool, "ADA@example.com") == 8  # 2 pairs x 4 windows
    assert await attempt(spool, RIGHT, T0 + 3, address="10.0.0.1") is True
    assert await attempt(spool, RIGHT, T0 + 3, address="10.0.0.2") is True


async def test_signups_are_counted_before_the_account_is_made(spool: Spool) -> None:
    auth = AuthConfig(max_signups_per_address=2)
    first = await login_limits.count_signup(spool, auth, "10.0.0.1", T0)
    await login_limits.count_signup(spool, auth, "10.0.0.1", T0)
    with pytest.raises(login_limits.Throttled):
        await login_limits.count_signup(spool, auth, "10.0.0.1", T0)
    await login_limits.signup_not_made(spool, first)
    await login_limits.count_signup(spool, auth, "10.0.0.1", T0)
    await login_limits.count_signup(spool, auth, "10.0.0.9", T0)


# Where a login may lead


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        ("/domains", "/domains"),
        ("/emails?status=bounced&q=a%20b", "/emails?status=bounced&q=a%20b"),
        (None, DEFAULT_NEXT),
        ("", DEFAULT_NEXT),
        ("//evil.example/", DEFAULT_NEXT),
        ("/\\evil.example/", DEFAULT_NEXT),
        ("/a\\b", DEFAULT_NEXT),
        ("https://evil.example/", DEFAULT_NEXT),
        ("javascript:alert(1)", DEFAULT_NEXT),
        ("evil.example", DEFAULT_NEXT),
        ("/ok\r\nSet-Cookie: x=1", DEFAULT_NEXT),
        ("/\tevil", DEFAULT_NEXT),
        ("/café", DEFAULT_NEXT),
        ("/" + "a" * 3000, DEFAULT_NEXT),
    ],
)
def test_next_is_a_local_path_or_the_emails_page(candidate: str | None, expected: str) -> None:
    assert safe_next(candidate) == expected


# Static files


def test_assets_are_served_under_content_hashed_names(tmp_path: Path) -> None:
    (tmp_path / "site.css").write_text("body { color: red; }")
    (tmp_path / "app.js").write_text("'use strict';")
    assets = Assets(tmp_path)
    url = assets.url("site.css")
    assert url == "/static/" + hashed_name("site.css", b"body { color: red; }")
    assert url.startswith("/static/site.") and url.endswith(".css")
    found = assets.find(url.removeprefix("/static/"))
    assert found is not None and found.mimetype == "text/css; charset=utf-8"
    assert assets.find("site.css") is None  # only hashed names are served
    with pytest.raises(KeyError):
        assets.url("missing.css")
