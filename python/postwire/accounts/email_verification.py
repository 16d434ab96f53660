"""Checking that an account's address is its owner's: a link mailed to it, working 2 days, once.

Accounts made through an invitation, a reset link, Google, GitHub or a team's SSO under its
verified domains have their address verified already; an open sign-up's account (or one made
by a team's SSO from an invitation) has not until the link is opened. Until then the account
may use its own team, but may not invite anyone (an invitation is mail sent on its word), and
the dashboard shows a banner with a button to mail the link again.

A change of address works the same way: the new address waits beside the account
(`pending_email`) and the account moves to it, confirmed, only when the link mailed to it is
opened; until then nothing changes and the address belongs to no one.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Final

from postwire.accounts.links import VERIFY_EMAIL_TTL, LinkRefused, issue_link, link_url, redeem_link
from postwire.accounts.system_mail import SystemMailer, verification_mail
from postwire.accounts.users import EmailTakenError, confirm_email_change
from postwire.errors import KeyExistsError
from postwire.store import users as user_store
from postwire.store.invitations import count_requests, record_request
from postwire.store.spool import Spool
from postwire.store.users import UserRecord, normalize_email

# Verification mails an account may ask for in 15 minutes.
MAX_VERIFICATION_MAILS: Final = 3


async def send_verification(
    spool: Spool,
    mailer: SystemMailer,
    user: UserRecord,
    *,
    public_url: str,
    now: datetime,
    address: str | None = None,
) -> bool:
    """Mail the account a link that verifies its address (or `address`, the one it asked to
    move to); False when it asked too often."""
    to = address or user.email
    now_ms = int(now.timestamp() * 1000)
    counted = f"verify-user/{user.id}"
    if count_requests(spool, counted, now_ms) >= MAX_VERIFICATION_MAILS:
        return False
    await record_request(spool, [counted], now_ms)
    token, _ = await issue_link(
        spool,
        "verify_email",
        email=normalize_email(to),
        user_id=user.id,
        ttl=VERIFY_EMAIL_TTL,
        now=now,
    )
    await mailer.send(verification_mail(to, link_url(public_url, "verify_email", token)), now)
    return True


async def verify_email(spool: Spool, token: str, now: datetime) -> UserRecord:
    """Use a verification link: confirm the account's address, or move the account to the
    address it asked for. `LinkRefused` if the link does not work or names neither address
    any more; `EmailTakenError` if another account took the new address meanwhile."""
    try:
        async with redeem_link(spool, token, ("verify_email",), now) as redemption:
            link = redemption.link
            user = None if link.user_id is None else user_store.get_user(spool, link.user_id)
            if user is None:
                raise LinkRefused
            if normalize_email(user.email) == link.email:
                verified = replace(user, email_verified=True)
                user_store.put_user(redemption.batch, verified)
            elif user.pending_email and normalize_email(user.pending_email) == link.email:
                verified = confirm_email_change(redemption.batch, user)
            else:
                raise LinkRefused
    except KeyExistsError:
        raise EmailTakenError("the address already has an account") from None
    return verified
