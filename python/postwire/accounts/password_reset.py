"""Password resets, and the first password of an account made from the shell.

Asking for a reset always gets the same answer, whether or not the address has an account, so
the form tells nobody who has one. Requests are counted per address and per client in 15-minute
windows; past the limits nothing more is mailed, and the answer is still the same. A reset's
link works for an hour, once; using it sets the password and ends every session of the
account, in one commit. If the account's address was never confirmed, the link is the first
proof of who holds it, so the account is started afresh (`fresh_start`) in that commit.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from datetime import datetime
from typing import Final

from postwire.accounts.fresh_start import FreshStart, start_afresh
from postwire.accounts.links import (
    RESET_PASSWORD_TTL,
    LinkRefused,
    issue_link,
    link_url,
    redeem_link,
)
from postwire.accounts.passwords import hash_password, password_problem
from postwire.accounts.system_mail import SystemMailer, password_reset_mail
from postwire.errors import PostwireError
from postwire.store import sessions as session_store
from postwire.store import users as user_store
from postwire.store.invitations import count_requests, record_request
from postwire.store.spool import Spool
from postwire.store.users import UserRecord, normalize_email

log = logging.getLogger("postwire.accounts.reset")

# Reset mails per address, and requests per client address, in 15 minutes.
MAX_RESETS_PER_ADDRESS: Final = 3
MAX_RESETS_PER_CLIENT: Final = 20


class PasswordRefused(PostwireError):
    """The new password cannot be chosen; the message says why in plain words."""


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _address_key(email: str) -> str:
    # Hashed: the table need not hold the addresses people typed, accounts or not.
    return "reset-address/" + hashlib.sha256(normalize_email(email).encode()).hexdigest()


async def request_password_reset(
    spool: Spool,
    mailer: SystemMailer,
    *,
    email: str,
    client: str,
    public_url: str,
    now: datetime,
) -> None:
    """Mail a reset link if `email` has an account and the limits allow; nothing to tell. It
    never raises: it runs detached from the request that asked (whose answer must not depend
    on it), so a failure is logged rather than allowed to take the dashboard down."""
    try:
        user = await _counted_user(spool, email, client, _millis(now))
        if user is None:
            return
        token, _ = await issue_link(
            spool,
            "reset_password",
            email=normalize_email(user.email),
            user_id=user.id,
            ttl=RESET_PASSWORD_TTL,
            now=now,
        )
        url = link_url(public_url, "reset_password", token)
        await mailer.send(password_reset_mail(user.email, url), now)
    except Exception:
        log.exception("a password reset request failed")


async def _counted_user(spool: Spool, email: str, client: str, now_ms: int) -> UserRecord | None:
    """Count the request; the account to mail, or None (no account, or over a limit)."""
    client_key = f"reset-client/{client[:64]}"
    if count_requests(spool, client_key, now_ms) >= MAX_RESETS_PER_CLIENT:
        log.info("password reset requests from %s are over the limit", client)
        return None
    address_key = _address_key(email)
    over = count_requests(spool, address_key, now_ms) >= MAX_RESETS_PER_ADDRESS
    await record_request(spool, [client_key] if over else [client_key, address_key], now_ms)
    if over:
        return None
    user_id = user_store.find_user_id_by_email(spool, email)
    return None if user_id is None else user_store.get_user(spool, user_id)


async def set_password_by_link(
    spool: Spool, token: str, password: str, now: datetime, *, own_team: bool = False
) -> tuple[UserRecord, FreshStart | None]:
    """Use a reset (or first-password) link: set the password and end the account's sessions.
    An account whose address was never confirmed is started afresh (`fresh_start`): the
    link proves the mailbox, not that its holder made the account; `own_team` gives it a team
    of its own then. `PasswordRefused` for a password that cannot be chosen (the link stays
    usable), `LinkRefused` for a link that does not work."""
    problem = password_problem(password)
    if problem is not None:
        raise PasswordRefused(problem)
    password_hash = await hash_password(password)
    async with redeem_link(spool, token, ("reset_password", "set_password"), now) as redemption:
        link = redemption.link
        user = None if link.user_id is None else user_store.get_user(spool, link.user_id)
        # The address may have changed since the link was mailed: then it proves nothing.
        if user is None or normalize_email(user.email) != link.email:
            raise LinkRefused
        if not user.email_verified:
            return start_afresh(
                spool,
                redemption.batch,
                user,
                email=user.email,
                password_hash=password_hash,
                own_team=own_team,
                now=now,
            )
        changed = replace(user, password_hash=password_hash)
        user_store.put_user(redemption.batch, changed)
        for session in session_store.sessions_of_user(spool, user.id):
            session_store.delete_session(redemption.batch, session)
    return changed, None
