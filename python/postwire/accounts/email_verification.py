"""Checking that an account's address is its owner's: a link mailed to it, working 2 days, once.

Accounts made through an invitation, a reset link, Google, GitHub or a team's SSO under its
verified domains have their address verified already; an open sign-up's account (or one made
by a team's SSO from an invitation) has not until the link is opened. Until then the account
may use its own team, but may not invite anyone (an invitation is mail sent on its word), and
the dashboard shows a banner with a button to mail the link again.

A change of address works the same way: the new address waits beside the account
(`pending_email`) and the account moves to it, confirmed, only when the link mailed to it is
opened; until then nothing changes and the address belongs to no one.

The link first confirming an address for the account keeps everything only when it is opened
in a browser signed in to that account (its holder's session): opened by anyone else, it has
proved the mailbox, not that they made the account, so the account is started afresh without
a password (`fresh_start`), and the page leads on to choosing one.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Final

from postwire.accounts.fresh_start import FreshStart, start_afresh
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


def starts_afresh(user: UserRecord, link_email: str, signed_in_as: str | None) -> bool:
    """Whether opening a confirmation link for `link_email` starts `user` afresh: the address
    is first confirmed for the account (its own, never confirmed, or one it moves to) by
    someone not signed in to it, who proved the mailbox but not that they made the account."""
    if signed_in_as == user.id:
        return False
    return normalize_email(user.email) != link_email or not user.email_verified


async def verify_email(
    spool: Spool, token: str, now: datetime, *, signed_in_as: str | None, own_team: bool = False
) -> tuple[UserRecord, FreshStart | None]:
    """Use a verification link: confirm the account's address, or move the account to the
    address it asked for. Opened by anyone but the account's holder (`signed_in_as`, the user
    of the browser's session), the account is started afresh, without a password
    (`fresh_start`; `own_team` gives it a team of its own). `LinkRefused` if the link does not
    work or names neither address any more; `EmailTakenError` if another account took the new
    address meanwhile."""
    try:
        async with redeem_link(spool, token, ("verify_email",), now) as redemption:
            link = redemption.link
            user = None if link.user_id is None else user_store.get_user(spool, link.user_id)
            if user is None:
                raise LinkRefused
            own = normalize_email(user.email) == link.email
            if not own and normalize_email(user.pending_email) != link.email:
                raise LinkRefused
            if starts_afresh(user, link.email, signed_in_as):
                address = user.email if own else user.pending_email
                return start_afresh(
                    spool,
                    redemption.batch,
                    user,
                    email=address,
                    password_hash=None,
                    own_team=own_team,
                    now=now,
                )
            if own:
                verified = replace(user, email_verified=True)
                user_store.put_user(redemption.batch, verified)
            else:
                verified = confirm_email_change(redemption.batch, user)
    except KeyExistsError:
        raise EmailTakenError("the address already has an account") from None
    return verified, None
