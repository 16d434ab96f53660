"""MFA on a real spool: TOTP steps (window, replay), enrolment, recovery codes (single use,
hashed at rest), the failure ceiling, the team policy, WebAuthn challenges (single use,
expiring)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyotp
import pytest

from postwire.accounts import mfa, recovery_codes, totp
from postwire.accounts.passkeys import RelyingParty
from postwire.store import mfa_devices
from postwire.store.spool import Spool

NOW = datetime(2026, 11, 25, 4, 0, 10, tzinfo=UTC)  # 10 s into a 30-second step
SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"


def code(secret: str, moment: datetime) -> str:
    return pyotp.TOTP(secret).at(moment)


def test_totp_codes_are_those_of_authenticator_apps() -> None:
    step = totp.time_step(NOW.timestamp())
    assert totp.code_at(SECRET, step) == code(SECRET, NOW)
    uri = totp.provisioning_uri(SECRET, "ada@example.com", "Postwire")
    assert uri.startswith("otpauth://totp/Postwire:ada%40example.com?secret=" + SECRET)
    parsed = pyotp.parse_uri(uri)  # what an app reads from the QR code
    assert isinstance(parsed, pyotp.TOTP) and parsed.secret == SECRET
    assert (parsed.digits, parsed.interval, parsed.issuer) == (6, 30, "Postwire")
    svg = totp.qr_code_svg(uri)
    assert svg.startswith(b"<svg") and b"<script" not in svg


def test_totp_window_is_one_step_either_side() -> None:
    step = totp.time_step(NOW.timestamp())
    for offset in (-1, 0, 1):
        moment = NOW + timedelta(seconds=30 * offset)
        assert (
            totp.matching_step(SECRET, code(SECRET, moment), NOW.timestamp(), -1) == step + offset
        )
    for offset in (-3, -2, 2, 3):
        moment = NOW + timedelta(seconds=30 * offset)
        assert totp.matching_step(SECRET, code(SECRET, moment), NOW.timestamp(), -1) is None
    typed = code(SECRET, NOW)
    assert totp.matching_step(SECRET, f" {typed[:3]} {typed[3:]} ", NOW.timestamp(), -1) == step
    assert totp.matching_step(SECRET, "12345", NOW.timestamp(), -1) is None
    fullwidth = "\uff11\uff12\uff13\uff14\uff15\uff16"  # digits, to str.isdigit
    assert totp.matching_step(SECRET, fullwidth, NOW.timestamp(), -1) is None


def test_totp_step_used_once_is_not_accepted_again() -> None:
    step = totp.time_step(NOW.timestamp())
    assert totp.matching_step(SECRET, code(SECRET, NOW), NOW.timestamp(), step) is None
    earlier = NOW - timedelta(seconds=30)
    assert totp.matching_step(SECRET, code(SECRET, earlier), NOW.timestamp(), step) is None
    later = NOW + timedelta(seconds=30)
    assert totp.matching_step(SECRET, code(SECRET, later), NOW.timestamp(), step) == step + 1


def test_recovery_codes_are_random_and_compared_by_digest() -> None:
    codes = recovery_codes.new_codes()
    assert len(codes) == len(set(codes)) == recovery_codes.CODE_COUNT
    assert all(len(c) == 19 and c.count("-") == 3 for c in codes)
    digests = [recovery_codes.code_sha256(c) for c in codes]
    assert recovery_codes.matching_digest(codes[3].upper().replace("-", " "), digests) == digests[3]
    assert recovery_codes.matching_digest("aaaa-aaaa-aaaa-aaaa", digests) is None


async def enrolled(spool: Spool, user_id: str) -> tuple[str, list[str]]:
    device = await mfa.start_totp_enrolment(spool, user_id, NOW)
    assert not mfa.user_has_mfa(spool, user_id)
    with pytest.raises(mfa.MfaError):
        await mfa.confirm_totp(spool, user_id, device.id, "000000", "Phone", NOW)
    codes = await mfa.confirm_totp(
        spool, user_id, device.id, code(device.totp_secret, NOW), "Phone", NOW
    )
    assert codes is not None and mfa.user_has_mfa(spool, user_id)
    return device.totp_secret, codes


async def test_totp_login_refuses_a_replayed_code(spool: Spool) -> None:
    secret, _ = await enrolled(spool, "u1")
    later = NOW + timedelta(seconds=30)
    assert await mfa.check_code(spool, "u1", code(secret, later), later, max_failures=5) == "ok"
    # The same code again within its window, and the one before it: both refused.
    again = later + timedelta(seconds=5)
    assert await mfa.check_code(spool, "u1", code(secret, later), again, max_failures=5) == "wrong"
    assert await mfa.check_code(spool, "u1", code(secret, NOW), again, max_failures=5) == "wrong"
    # Another user's code is nothing to this one.
    assert await mfa.check_code(spool, "u2", code(secret, later), again, max_failures=5) == "wrong"


async def test_recovery_code_works_once_and_is_hashed_at_rest(spool: Spool) -> None:
    _, codes = await enrolled(spool, "u1")
    assert await mfa.unused_recovery_codes(spool, "u1") == 10
    raw = b"".join(value for _, value in spool.scan("mfa_devices", prefix=b"", limit=100))
    for shown in codes:
        assert recovery_codes.normalize(shown).encode() not in raw
        assert shown.encode() not in raw
    assert await mfa.check_code(spool, "u1", codes[0], NOW, max_failures=5) == "ok"
    assert await mfa.check_code(spool, "u1", codes[0], NOW, max_failures=5) == "wrong"
    assert await mfa.unused_recovery_codes(spool, "u1") == 9
    # New codes replace the old ones.
    fresh = await mfa.new_recovery_codes(spool, "u1", NOW)
    assert await mfa.check_code(spool, "u1", codes[1], NOW, max_failures=5) == "wrong"
    assert await mfa.check_code(spool, "u1", fresh[1], NOW, max_failures=5) == "ok"


async def test_wrong_codes_past_the_ceiling_lock_until_the_window_ends(spool: Spool) -> None:
    secret, _ = await enrolled(spool, "u1")
    for _ in range(3):
        assert await mfa.check_code(spool, "u1", "000000", NOW, max_failures=3) == "wrong"
    right = NOW + timedelta(seconds=30)
    assert await mfa.check_code(spool, "u1", code(secret, right), right, max_failures=3) == (
        "too_many"
    )
    after = NOW + timedelta(minutes=16)
    assert await mfa.check_code(spool, "u1", code(secret, after), after, max_failures=3) == "ok"


async def test_removing_the_last_device_removes_recovery_codes(spool: Spool) -> None:
    _, codes = await enrolled(spool, "u1")
    (device,) = mfa.confirmed_devices(spool, "u1")
    await mfa.remove_device(spool, "u1", device.id)
    assert not mfa.user_has_mfa(spool, "u1")
    assert await mfa.check_code(spool, "u1", codes[0], NOW, max_failures=5) == "wrong"
    with pytest.raises(mfa.MfaError):
        await mfa.remove_device(spool, "u1", device.id)


async def test_an_expired_enrolment_cannot_be_confirmed(spool: Spool) -> None:
    device = await mfa.start_totp_enrolment(spool, "u1", NOW)
    late = NOW + timedelta(hours=1)
    with pytest.raises(mfa.MfaError, match="expired"):
        await mfa.confirm_totp(spool, "u1", device.id, code(device.totp_secret, late), "", late)
    # Starting again drops the earlier one, expired or not: one setup waits at a time.
    await mfa.start_totp_enrolment(spool, "u1", late)
    second = await mfa.start_totp_enrolment(spool, "u1", late)
    assert [d.id for d in mfa_devices.list_devices(spool, "u1")] == [second.id]


async def test_team_policy(spool: Spool) -> None:
    assert not mfa.team_requires_mfa(spool, "t1")
    await mfa.set_team_requires_mfa(spool, "t1", True, "u1", NOW)
    assert mfa.team_requires_mfa(spool, "t1") and not mfa.team_requires_mfa(spool, "t2")
    await mfa.set_team_requires_mfa(spool, "t1", False, "u1", NOW)
    assert not mfa.team_requires_mfa(spool, "t1")


async def test_webauthn_challenges_are_single_use_and_expire(spool: Spool) -> None:
    rp = RelyingParty.from_public_url("http://localhost:3001")
    assert rp == RelyingParty("localhost", "Postwire", "http://localhost:3001")
    options = await mfa.begin_passkey_login(spool, "session-a", rp, None, NOW)
    assert '"rpId":"localhost"' in options.replace(" ", "")
    assert await mfa_devices.take_challenge(spool, "session-a", mfa._ms(NOW)) is not None
    assert await mfa_devices.take_challenge(spool, "session-a", mfa._ms(NOW)) is None
    await mfa.begin_passkey_login(spool, "session-b", rp, None, NOW)
    late = NOW + timedelta(minutes=5)
    with pytest.raises(mfa.MfaError, match="expired"):
        await mfa.finish_passkey_login(spool, "session-b", rp, '{"id": "x"}', late)
    with pytest.raises(mfa.MfaError, match="no passkey"):
        await mfa.begin_passkey_login(spool, "session-c", rp, "u1", NOW)


async def test_unanswered_challenges_are_pruned_as_new_ones_come(spool: Spool) -> None:
    rp = RelyingParty.from_public_url("http://localhost:3001")
    for n in range(6):
        await mfa.begin_passkey_login(spool, f"browser-{n}", rp, None, NOW)
    await mfa.begin_passkey_login(spool, "browser-0", rp, None, NOW)  # renewed: one record

    def stored() -> list[str]:
        return [key for key, _ in spool.scan("mfa_devices", prefix=b"challenge", limit=100)]

    assert len(stored()) == 12
    later = NOW + timedelta(minutes=5)
    await mfa.begin_passkey_login(spool, "browser-new", rp, None, later)
    assert stored() == [key for key in stored() if b"browser-new" in key], (
        "the expired ones went with the new one"
    )
    assert len(stored()) == 2
    assert await mfa_devices.take_challenge(spool, "browser-new", mfa._ms(later)) is not None
    assert stored() == []
