"""Multi-factor authentication: which users have a second factor, the teams that require one,
enrolment of TOTP authenticators and passkeys, recovery codes, and the checks of each.

A user "has MFA" once a TOTP device is confirmed (its first code entered) or a passkey is
registered. Recovery codes are made when the first device is, shown once, and go away with
the last device. Wrong codes are counted per user over a window and refused past a ceiling,
whatever the code's kind, so a 6-digit code cannot be guessed at speed.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final, Literal

from postwire import _core
from postwire.accounts import passkeys, recovery_codes, totp, users
from postwire.accounts.passkeys import PasskeyError, RelyingParty
from postwire.concurrency import in_order
from postwire.errors import ConflictError
from postwire.store import mfa_devices as store
from postwire.store.guards import never_after_change
from postwire.store.mfa_devices import (
    CodeFailures,
    MfaDevice,
    RecoveryCodes,
    WebAuthnChallenge,
)
from postwire.store.mfa_devices import user_has_mfa as user_has_mfa  # its home is the store
from postwire.store.spool import Spool
from postwire.store.users import UserRecord

log = logging.getLogger("postwire.accounts.mfa")

FAILURE_WINDOW_MS: Final = 15 * 60 * 1000
# An unconfirmed TOTP enrolment is forgotten after this long.
ENROLMENT_MS: Final = 30 * 60 * 1000
TOTP_ISSUER: Final = "Postwire"

CodeOutcome = Literal["ok", "wrong", "too_many"]


class MfaError(Exception):
    """A request about a second factor was refused; the message is fit to show."""


def _ms(now: datetime) -> int:
    return int(now.timestamp() * 1000)


# Policy and state


def confirmed_devices(spool: Spool, user_id: str) -> list[MfaDevice]:
    return [device for device in store.list_devices(spool, user_id) if device.confirmed]


async def confirmed_devices_parked(spool: Spool, user_id: str) -> list[MfaDevice]:
    """`confirmed_devices`, parked rather than blocking on a table store on the network."""
    return [d for d in await store.list_devices_parked(spool, user_id) if d.confirmed]


def team_requires_mfa(spool: Spool, team_id: str) -> bool:
    """Whether the team's policy (the record the request guard reads) requires MFA."""
    return users.team_policy(spool, team_id).require_mfa


async def set_team_requires_mfa(
    spool: Spool, team_id: str, required: bool, by_user_id: str, now: datetime
) -> None:
    """Set the team's "require MFA"; its other settings (SSO) are kept as they are."""
    async for attempt in spool.guarded(f"policy/{team_id}"):
        with attempt:
            policy = users.team_policy(spool, team_id)
            await users.set_team_policy(spool, replace(policy, require_mfa=required))
    log.info("team %s: require MFA %s, set by user %s at %s", team_id, required, by_user_id, now)


async def members_without_mfa(spool: Spool, team_id: str) -> list[str]:
    """The addresses of the team's members who have no second factor yet (parked reads)."""
    members = [user for _, user in await users.members_of_parked(spool, team_id)]
    has = await with_mfa(spool, members)
    return [user.email for user, has_mfa in zip(members, has, strict=True) if not has_mfa]


async def with_mfa(spool: Spool, members: list[UserRecord]) -> list[bool]:
    """Whether each user has a second factor, read parked and together."""

    async def has_mfa(user: UserRecord) -> bool:
        return await store.user_has_mfa_parked(spool, user.id)

    return await in_order(has_mfa, members, at_once=users.TEAMS_READ_AT_ONCE)


async def unused_recovery_codes(spool: Spool, user_id: str) -> int:
    codes = await store.get_recovery_codes_parked(spool, user_id)
    return 0 if codes is None else len(codes.sha256)


async def new_recovery_codes(spool: Spool, user_id: str, now: datetime) -> list[str]:
    """Replace the user's recovery codes with fresh ones, returned to be shown once."""
    codes = recovery_codes.new_codes()
    digests = [recovery_codes.code_sha256(code) for code in codes]
    await store.put_recovery_codes(spool, user_id, RecoveryCodes(digests, _ms(now)))
    return codes


# TOTP enrolment


async def start_totp_enrolment(spool: Spool, user_id: str, now: datetime) -> MfaDevice:
    """A new TOTP device, not yet counted: its secret goes to the QR code, and the first code
    typed from the app confirms it. The user's earlier unconfirmed enrolment, if any, is
    dropped: one waits at a time, so setups begun and abandoned do not pile up."""
    confirmed = []
    for listed in store.list_devices(spool, user_id):
        if listed.confirmed:
            confirmed.append(listed)
        else:
            await store.delete_device(spool, listed)
    if len(confirmed) >= store.MAX_DEVICES_PER_USER - 1:  # room for this one
        raise MfaError("You have too many devices; remove one first.")
    device = MfaDevice(
        id=_core.new_id(),
        user_id=user_id,
        kind="totp",
        name="Authenticator app",
        created_at_ms=_ms(now),
        confirmed=False,
        totp_secret=totp.new_secret(),
    )
    await store.save_device(spool, device)
    return device


def pending_totp(spool: Spool, user_id: str, device_id: str, now: datetime) -> MfaDevice | None:
    """The user's enrolment `device_id` when it is still waiting for its first code."""
    device = store.get_device(spool, user_id, device_id)
    if device is None or device.kind != "totp" or device.confirmed:
        return None
    return device if device.created_at_ms >= _ms(now) - ENROLMENT_MS else None


def totp_qr_svg(device: MfaDevice, account: str) -> bytes:
    """The enrolment's otpauth:// URI as an SVG QR code, for the app's camera."""
    return totp.qr_code_svg(totp.provisioning_uri(device.totp_secret, account, TOTP_ISSUER))


async def confirm_totp(
    spool: Spool, user_id: str, device_id: str, code: str, name: str, now: datetime
) -> list[str] | None:
    """Confirm the enrolment with its first code. Returns the recovery codes made for a user
    who had none (to show once), else None. Raises MfaError when the code is wrong."""
    key = store.device_key(user_id, device_id)
    async for attempt in spool.guarded(key):
        with attempt:
            device = pending_totp(spool, user_id, device_id, now)
            if device is None:
                raise MfaError("This enrolment has expired; start again.")
            step = totp.matching_step(
                device.totp_secret, code, now.timestamp(), device.last_counter
            )
            if step is None:
                raise MfaError("That code is not the one the app shows now; try the next one.")
            label = name.strip()[:64] or device.name
            confirmed = replace(device, confirmed=True, name=label, last_counter=step)
            await store.save_device(spool, confirmed)
    if store.get_recovery_codes(spool, user_id) is None:
        return await new_recovery_codes(spool, user_id, now)
    return None


# Checks at login (or before removing a device)


async def check_code(
    spool: Spool, user_id: str, code: str, now: datetime, *, max_failures: int
) -> CodeOutcome:
    """Check a TOTP code from any of the user's authenticators, or one of their recovery
    codes (used up as it is accepted). Failures are counted; past `max_failures` within the
    window every code is refused until the window ends."""
    now_ms = _ms(now)
    devices = [d for d in confirmed_devices(spool, user_id) if d.kind == "totp"]
    # Every record the check reads and changes, held at once (a count read before parallel
    # guesses commit theirs would let them all through).
    keys = [store.failures_key(user_id), store.recovery_key(user_id)]
    keys += [store.device_key(user_id, d.id) for d in devices]
    async for attempt in spool.guarded(keys):
        with attempt:
            failures = store.get_code_failures(spool, user_id)
            if failures is not None and failures.window_start_ms <= now_ms - FAILURE_WINDOW_MS:
                failures = None
            if failures is not None and failures.count >= max_failures:
                return "too_many"
            if await _accept_totp(spool, devices, code, now) or await _accept_recovery_code(
                spool, user_id, code
            ):
                if failures is not None:
                    # The code is used up: a conflict now (a parallel guess counted meanwhile)
                    # must not run the check again, which would find it used and say wrong.
                    with contextlib.suppress(ConflictError):
                        await store.put_code_failures(spool, user_id, None)
                return "ok"
            counted = CodeFailures(
                1 if failures is None else failures.count + 1,
                now_ms if failures is None else failures.window_start_ms,
            )
            await store.put_code_failures(spool, user_id, counted)
            return "wrong"
    never_after_change()


async def _accept_totp(spool: Spool, devices: list[MfaDevice], code: str, now: datetime) -> bool:
    """Whether `code` is a fresh code of one of `devices` (whose records the caller holds)."""
    for listed in devices:
        device = store.get_device(spool, listed.user_id, listed.id)  # fresh: its last step
        if device is None:
            continue
        step = totp.matching_step(device.totp_secret, code, now.timestamp(), device.last_counter)
        if step is not None:
            await store.mark_device_used(
                spool, device, _ms(now), last_counter=step, sign_count=device.sign_count
            )
            return True
    return False


async def _accept_recovery_code(spool: Spool, user_id: str, code: str) -> bool:
    """Whether `code` is an unused recovery code of the user (whose codes the caller holds);
    an accepted code is used up in the same step."""
    if not recovery_codes.looks_like_recovery_code(code):
        return False
    codes = store.get_recovery_codes(spool, user_id)
    if codes is None:
        return False
    digest = recovery_codes.matching_digest(code, codes.sha256)
    if digest is None:
        return False
    left = [stored for stored in codes.sha256 if stored != digest]
    await store.put_recovery_codes(spool, user_id, replace(codes, sha256=left))
    return True


async def remove_device(spool: Spool, user_id: str, device_id: str) -> MfaDevice:
    """Remove one of the user's devices (the caller has checked a code or the password).
    Recovery codes go with the last device: alone they are no second factor."""
    device = store.get_device(spool, user_id, device_id)
    if device is None:
        raise MfaError("No such device.")
    await store.delete_device(spool, device)
    if not user_has_mfa(spool, user_id):
        await store.delete_recovery_codes(spool, user_id)
    return device


# Passkeys


@dataclass(frozen=True, slots=True)
class PasskeyLogin:
    user_id: str
    device: MfaDevice


async def begin_passkey_registration(
    spool: Spool, holder: str, rp: RelyingParty, user_id: str, user_name: str, now: datetime
) -> str:
    """Options (JSON) for navigator.credentials.create; the challenge is kept for `holder`
    (the session asking), single use."""
    confirmed = confirmed_devices(spool, user_id)
    existing = [d.credential_id for d in confirmed if d.kind == "passkey"]
    if len(confirmed) >= store.MAX_DEVICES_PER_USER - 1:  # room for a TOTP setup under way
        raise MfaError("You have too many devices; remove one first.")
    options = passkeys.registration_options(rp, user_id, user_name, user_name, existing)
    pending = WebAuthnChallenge(
        options.challenge, "register", user_id, _ms(now) + passkeys.TIMEOUT_MS
    )
    await store.put_challenge(spool, holder, pending, _ms(now))
    return options.json


async def finish_passkey_registration(
    spool: Spool,
    holder: str,
    rp: RelyingParty,
    user_id: str,
    credential_json: str,
    name: str,
    now: datetime,
) -> tuple[MfaDevice, list[str] | None]:
    """Register the browser's new credential. Returns the device and, for a user who had no
    recovery codes, the codes made (to show once). Raises MfaError when refused."""
    pending = await store.take_challenge(spool, holder, _ms(now))
    if pending is None or pending.purpose != "register" or pending.user_id != user_id:
        raise MfaError("This registration has expired; start again.")
    try:
        new = passkeys.verify_registration(rp, credential_json, pending.challenge)
    except PasskeyError as error:
        raise MfaError(str(error)) from error
    if store.credential_owner(spool, new.credential_id) is not None:
        raise MfaError("This passkey is already registered.")
    device = MfaDevice(
        id=_core.new_id(),
        user_id=user_id,
        kind="passkey",
        name=name.strip()[:64] or "Passkey",
        created_at_ms=_ms(now),
        confirmed=True,
        credential_id=new.credential_id,
        public_key=new.public_key,
        sign_count=new.sign_count,
        transports=new.transports,
    )
    await store.save_device(spool, device)
    if store.get_recovery_codes(spool, user_id) is None:
        return device, await new_recovery_codes(spool, user_id, now)
    return device, None


async def begin_passkey_login(
    spool: Spool, holder: str, rp: RelyingParty, user_id: str | None, now: datetime
) -> str:
    """Options (JSON) for navigator.credentials.get: for `user_id`'s passkeys (a second
    factor), or for any passkey of this site when the user is not known yet (None)."""
    allowed = (
        []
        if user_id is None
        else [d.credential_id for d in confirmed_devices(spool, user_id) if d.kind == "passkey"]
    )
    if user_id is not None and not allowed:
        raise MfaError("You have no passkey registered.")
    options = passkeys.authentication_options(rp, allowed)
    pending = WebAuthnChallenge(
        options.challenge, "authenticate", user_id or "", _ms(now) + passkeys.TIMEOUT_MS
    )
    await store.put_challenge(spool, holder, pending, _ms(now))
    return options.json


async def finish_passkey_login(
    spool: Spool, holder: str, rp: RelyingParty, credential_json: str, now: datetime
) -> PasskeyLogin:
    """Check the browser's signature against the challenge kept for `holder`. Returns whose
    passkey signed; raises MfaError when refused (expired, unknown, not the expected user's,
    bad signature, or a signature counter that went back: a cloned authenticator)."""
    pending = await store.take_challenge(spool, holder, _ms(now))
    if pending is None or pending.purpose != "authenticate":
        raise MfaError("This sign-in has expired; try again.")
    try:
        owner = store.credential_owner(spool, passkeys.answered_credential_id(credential_json))
    except PasskeyError as error:
        raise MfaError(str(error)) from error
    if owner is None or (pending.user_id and owner.user_id != pending.user_id):
        raise MfaError("This passkey is not registered here.")
    async for attempt in spool.guarded(store.device_key(owner.user_id, owner.device_id)):
        with attempt:
            device = store.get_device(spool, owner.user_id, owner.device_id)
            if device is None or device.kind != "passkey":
                raise MfaError("This passkey is not registered here.")
            try:
                sign_count = passkeys.verify_authentication(
                    rp, credential_json, pending.challenge, device.public_key, device.sign_count
                )
            except PasskeyError as error:
                raise MfaError(str(error)) from error
            await store.mark_device_used(
                spool, device, _ms(now), last_counter=device.last_counter, sign_count=sign_count
            )
            return PasskeyLogin(owner.user_id, device)
    never_after_change()
