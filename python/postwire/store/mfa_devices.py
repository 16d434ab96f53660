"""Second factors of dashboard users (TOTP authenticators, passkeys, recovery codes), in the
`mfa_devices` table. (A team's "require MFA" is in its sign-in policy: store/users.py.)

Keys (one table, prefixes by kind, so a device and its index commit in one batch):
- `device/{user_id}/{device_id}`: an `MfaDevice` (a TOTP authenticator or a passkey);
- `credential/{credential_id}`: which user and device a passkey's credential id belongs to
  (a passkey login starts from the credential the browser returns);
- `recovery/{user_id}`: the SHA-256 of the user's unused recovery codes;
- `challenge/{holder}`: a WebAuthn challenge waiting for the browser's answer (single use);
- `challenge-due/{expires_at_ms}/{holder}`: the same by expiry, so each new challenge deletes a
  few expired ones (a sign-in page asks for one before anyone is known: unanswered ones must
  not pile up);
- `failures/{user_id}`: wrong codes in the current window (guessing a 6-digit code is slow).

A TOTP secret is kept as it is (base32): the server must compute codes from it, and a key to
encrypt it would live in the same data directory (mode 0700) as the secret itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from postwire._core import WriteBatch
from postwire.store.guards import never_after_change
from postwire.store.spool import Spool
from postwire.store.tables import Table

DeviceKind = Literal["totp", "passkey"]
ChallengePurpose = Literal["register", "authenticate"]
# A user has this many devices at most: the list page and every scan stay small.
MAX_DEVICES_PER_USER = 50


@dataclass(frozen=True, slots=True)
class MfaDevice:
    id: str
    user_id: str
    kind: str  # DeviceKind
    name: str
    created_at_ms: int
    # A TOTP device counts once its first code was entered (enrolment confirmed).
    confirmed: bool
    last_used_at_ms: int | None = None
    # TOTP: the base32 secret and the last time step accepted (a code is never taken twice).
    totp_secret: str = ""
    last_counter: int = -1
    # Passkey: the credential (base64url), its COSE public key (base64url), its signature counter.
    credential_id: str = ""
    public_key: str = ""
    sign_count: int = 0
    transports: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CredentialOwner:
    user_id: str
    device_id: str


@dataclass(frozen=True, slots=True)
class RecoveryCodes:
    sha256: list[str]  # hex digests of the unused codes
    created_at_ms: int


@dataclass(frozen=True, slots=True)
class WebAuthnChallenge:
    challenge: str  # base64url
    purpose: str  # ChallengePurpose
    user_id: str  # "" for a login that does not know its user yet
    expires_at_ms: int


@dataclass(frozen=True, slots=True)
class CodeFailures:
    count: int
    window_start_ms: int


DEVICES = Table("mfa_devices", MfaDevice)
CREDENTIALS = Table("mfa_devices", CredentialOwner)
RECOVERY_CODES = Table("mfa_devices", RecoveryCodes)
CHALLENGES = Table("mfa_devices", WebAuthnChallenge)
FAILURES = Table("mfa_devices", CodeFailures)


def device_key(user_id: str, device_id: str) -> str:
    return f"device/{user_id}/{device_id}"


def recovery_key(user_id: str) -> str:
    return f"recovery/{user_id}"


def failures_key(user_id: str) -> str:
    return f"failures/{user_id}"


def challenge_key(holder: str) -> str:
    return f"challenge/{holder}"


def _due_key(challenge: WebAuthnChallenge, holder: str) -> str:
    return f"challenge-due/{challenge.expires_at_ms:015d}/{holder}"


@dataclass(frozen=True, slots=True)
class DueChallenge:
    holder: str


DUE_CHALLENGES = Table("mfa_devices", DueChallenge)
# Expired challenges deleted with each new one: more than one, so they cannot accumulate.
_PRUNED_PER_CHALLENGE = 8


def list_devices(spool: Spool, user_id: str) -> list[MfaDevice]:
    rows = DEVICES.scan(spool, prefix=f"device/{user_id}/", limit=MAX_DEVICES_PER_USER)
    return [device for _, device in rows]


async def list_devices_parked(spool: Spool, user_id: str) -> list[MfaDevice]:
    """`list_devices`, parked rather than blocking on a table store on the network."""
    rows = await DEVICES.ascan(spool, prefix=f"device/{user_id}/", limit=MAX_DEVICES_PER_USER)
    return [device for _, device in rows]


def user_has_mfa(spool: Spool, user_id: str) -> bool:
    """Whether the user has a confirmed second factor (what makes a login ask for it)."""
    return any(device.confirmed for device in list_devices(spool, user_id))


async def user_has_mfa_parked(spool: Spool, user_id: str) -> bool:
    """`user_has_mfa`, parked rather than blocking on a table store on the network (the
    dashboard's guard asks it on every page of a team that requires MFA)."""
    return any(device.confirmed for device in await list_devices_parked(spool, user_id))


def get_device(spool: Spool, user_id: str, device_id: str) -> MfaDevice | None:
    return DEVICES.get(spool, device_key(user_id, device_id))


def credential_owner(spool: Spool, credential_id: str) -> CredentialOwner | None:
    return CREDENTIALS.get(spool, f"credential/{credential_id}")


async def save_device(spool: Spool, device: MfaDevice) -> None:
    """Add or replace `device`; a passkey's credential index is written in the same commit."""
    batch = WriteBatch()
    DEVICES.put(batch, device_key(device.user_id, device.id), device)
    if device.kind == "passkey":
        owner = CredentialOwner(device.user_id, device.id)
        CREDENTIALS.put(batch, f"credential/{device.credential_id}", owner)
    await spool.commit(batch)


async def delete_device(spool: Spool, device: MfaDevice) -> None:
    batch = WriteBatch()
    DEVICES.delete(batch, device_key(device.user_id, device.id))
    if device.kind == "passkey":
        CREDENTIALS.delete(batch, f"credential/{device.credential_id}")
    await spool.commit(batch)


async def mark_device_used(
    spool: Spool, device: MfaDevice, now_ms: int, *, last_counter: int, sign_count: int
) -> None:
    """Record a use; the caller holds `spool.guarded(device_key(...))` since it read it."""
    used = replace(device, last_used_at_ms=now_ms, last_counter=last_counter, sign_count=sign_count)
    batch = WriteBatch()
    DEVICES.put(batch, device_key(device.user_id, device.id), used)
    await spool.commit(batch)


def delete_all_of_user(spool: Spool, batch: WriteBatch, user_id: str) -> list[MfaDevice]:
    """Delete in `batch` every device of the user (with passkeys' credential index), their
    recovery codes and wrong-code count; the devices deleted."""
    devices = list_devices(spool, user_id)
    for device in devices:
        DEVICES.delete(batch, device_key(user_id, device.id))
        if device.kind == "passkey":
            CREDENTIALS.delete(batch, f"credential/{device.credential_id}")
    RECOVERY_CODES.delete(batch, recovery_key(user_id))
    FAILURES.delete(batch, failures_key(user_id))
    return devices


def get_recovery_codes(spool: Spool, user_id: str) -> RecoveryCodes | None:
    return RECOVERY_CODES.get(spool, recovery_key(user_id))


async def get_recovery_codes_parked(spool: Spool, user_id: str) -> RecoveryCodes | None:
    """`get_recovery_codes`, parked rather than blocking on a table store on the network."""
    return await RECOVERY_CODES.aget(spool, recovery_key(user_id))


async def put_recovery_codes(spool: Spool, user_id: str, codes: RecoveryCodes) -> None:
    batch = WriteBatch()
    RECOVERY_CODES.put(batch, recovery_key(user_id), codes)
    await spool.commit(batch)


async def delete_recovery_codes(spool: Spool, user_id: str) -> None:
    batch = WriteBatch()
    RECOVERY_CODES.delete(batch, recovery_key(user_id))
    await spool.commit(batch)


async def put_challenge(
    spool: Spool, holder: str, challenge: WebAuthnChallenge, now_ms: int
) -> None:
    """Keep `challenge` for `holder` (a session, a browser), replacing any earlier one of it,
    and delete a few challenges that expired unanswered."""
    expired = [
        (due_key, due.holder)
        for due_key, due in DUE_CHALLENGES.scan(
            spool, prefix="challenge-due/", limit=_PRUNED_PER_CHALLENGE
        )
        if int(due_key.split("/")[1]) < now_ms and due.holder != holder
    ]
    keys = [challenge_key(holder), *(challenge_key(other) for _, other in expired)]
    async for attempt in spool.guarded(keys):
        with attempt:
            batch = WriteBatch()
            earlier = CHALLENGES.get(spool, keys[0])
            if earlier is not None:
                DUE_CHALLENGES.delete(batch, _due_key(earlier, holder))
            CHALLENGES.put(batch, keys[0], challenge)
            DUE_CHALLENGES.put(batch, _due_key(challenge, holder), DueChallenge(holder))
            for due_key, other in expired:
                DUE_CHALLENGES.delete(batch, due_key)
                stale = CHALLENGES.get(spool, challenge_key(other))  # read again under the lock:
                if stale is not None and stale.expires_at_ms < now_ms:  # it may have been renewed
                    CHALLENGES.delete(batch, challenge_key(other))
            await spool.commit(batch)


async def take_challenge(spool: Spool, holder: str, now_ms: int) -> WebAuthnChallenge | None:
    """The holder's pending challenge, removed as it is read (single use); None when there is
    none or it has expired."""
    key = challenge_key(holder)
    async for attempt in spool.guarded(key):
        with attempt:
            challenge = CHALLENGES.get(spool, key)
            if challenge is None:
                return None
            batch = WriteBatch()
            CHALLENGES.delete(batch, key)
            DUE_CHALLENGES.delete(batch, _due_key(challenge, holder))
            await spool.commit(batch)
            return challenge if now_ms < challenge.expires_at_ms else None
    never_after_change()


def get_code_failures(spool: Spool, user_id: str) -> CodeFailures | None:
    return FAILURES.get(spool, failures_key(user_id))


async def put_code_failures(spool: Spool, user_id: str, failures: CodeFailures | None) -> None:
    """Store the count (the caller holds the guard of `failures_key`); None clears it."""
    batch = WriteBatch()
    if failures is None:
        FAILURES.delete(batch, failures_key(user_id))
    else:
        FAILURES.put(batch, failures_key(user_id), failures)
    await spool.commit(batch)
