"""The end of a provider's sign-in (Google, GitHub, a team's OpenID Connect or SAML): the
account the proven identity leads to (`accounts/identity_linking.py` decides), then a session,
or, when a signed-in user asked to link the team's provider, the link.

A session started through a team's provider carries that team (`sso_team_id`): it shows that
team alone and is the only kind that passes the team's "enforce SSO".

When a team's provider names an existing account it was never linked to, the proven identity
is kept (`sso_logins`, under a random ticket, bound to this browser) and the page asks for that
account's password: its owner links it there (`pages/sso_link.py`), anyone else gets nowhere.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Final

from quart import Response, flash, g, render_template, request

from postwire.accounts.identity_linking import (
    UnlinkedAccount,
    account_for_identity,
    account_for_team_identity,
    link_team_identity,
)
from postwire.accounts.oidc import Identity
from postwire.accounts.saml import SamlIdentity
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.login_flow import finish_login
from postwire.dashboard.redirects import see_other
from postwire.store.accounts import TEAMS
from postwire.store.sso import (
    ProvenLoginRecord,
    save_proven_login,
    secret_sha256,
    take_proven_login,
)

# Binds a sign-in to the browser that started it (random; only its SHA-256 is kept).
BROWSER_COOKIE: Final = "pw_sso"
# Time to type an account's password to link the team's provider to it.
LINK_BY_PASSWORD_TTL: Final = timedelta(minutes=10)


class LinkNotAllowed(Exception):
    """The answer to a link came back to a browser no longer signed in to the account that
    asked; the text says what to do."""


class StaleSignIn(Exception):
    """A kept sign-in that was used, expired, or started in another browser; the text says
    so, for the page."""


async def keep_proven_identity(
    ctx: DashboardContext,
    key: str,
    team_id: str,
    identity: Identity | SamlIdentity,
    *,
    next_url: str,
    browser_sha256: str,
    ttl: timedelta,
    link_user_id: str = "",
) -> None:
    """Keep the identity the team's provider proved under `key` for `ttl`, for the browser
    whose cookie hashes to `browser_sha256` (`take_proven_identity` takes it back)."""
    proven = ProvenLoginRecord(
        team_id=team_id,
        email=identity.email,
        name=identity.name,
        next_url=next_url,
        browser_sha256=browser_sha256,
        expires_at=(ctx.now() + ttl).isoformat(),
        subject=identity.subject,
        issuer=identity.issuer,
        link_user_id=link_user_id,
    )
    await save_proven_login(ctx.spool, key, proven)


async def take_proven_identity(
    ctx: DashboardContext, ticket: str, team_id: str
) -> tuple[ProvenLoginRecord, Identity]:
    """The identity proven for the team and kept under `ticket`, consumed; `StaleSignIn`
    unless it is unexpired and this browser's."""
    proven = await take_proven_login(ctx.spool, ticket)
    if proven is None or proven.team_id != team_id or ctx.now().isoformat() >= proven.expires_at:
        raise StaleSignIn("This sign-in was already used or expired. Start again.")
    browser = secret_sha256(request.cookies.get(BROWSER_COOKIE) or "")
    if not secrets.compare_digest(browser, proven.browser_sha256):
        raise StaleSignIn(
            "This sign-in was started in another browser. Start again from the login page"
            " in this browser."
        )
    identity = Identity(
        email=proven.email,
        email_verified=True,
        name=proven.name,
        subject=proven.subject,
        issuer=proven.issuer,
    )
    return proven, identity


async def sign_in_with_identity(
    ctx: DashboardContext,
    identity: Identity,
    provider: str,
    team_id: str | None,
    *,
    next_url: str,
    link_user_id: str,
    browser_sha256: str,
) -> Response:
    """Sign in (or, with `link_user_id`, link) the identity that `provider` proved; `team_id`
    is the team whose provider it is (None for Google and GitHub). The sign-in's browser
    cookie (`browser_sha256`) is spent, unless the page asks for a password to link."""
    now = ctx.now()
    if team_id is None:
        user = await account_for_identity(
            ctx.spool, identity, provider=provider, signup=ctx.config.auth.signup, now=now
        )
        response = await finish_login(ctx, user, method=provider, next_url=next_url)
    elif link_user_id:
        response = await _link(ctx, identity, team_id, link_user_id)
    else:
        try:
            user = await account_for_team_identity(ctx.spool, identity, team_id, now=now)
        except UnlinkedAccount as unlinked:
            return await _ask_password_to_link(
                ctx, identity, team_id, str(unlinked), next_url, browser_sha256
            )
        response = await finish_login(
            ctx, user, method="sso", next_url=next_url, team_id=team_id, sso_team_id=team_id
        )
    response.delete_cookie(BROWSER_COOKIE, path="/", secure=True, httponly=True, samesite="Lax")
    return response


async def _link(ctx: DashboardContext, identity: Identity, team_id: str, user_id: str) -> Response:
    """Link the team provider's identity to the account that asked, if this browser is still
    signed in to it (the answer to a link started by someone else links nothing)."""
    viewer = g.get("viewer")
    if viewer is None or viewer.user.id != user_id or viewer.session.sso_team_id:
        raise LinkNotAllowed(
            "Sign in to the account you are linking in this browser, then link again from your"
            " Account page."
        )
    await link_team_identity(ctx.spool, identity, team_id, viewer.user, now=ctx.now())
    team = TEAMS.get(ctx.spool, team_id)
    name = team.name if team is not None else "the team"
    await flash(
        f"Your account is linked to {name}'s single sign-on ({identity.email}): it signs you in"
        f" to {name}.",
        "success",
    )
    return see_other("/account")


async def _ask_password_to_link(
    ctx: DashboardContext,
    identity: Identity,
    team_id: str,
    why: str,
    next_url: str,
    browser_sha256: str,
) -> Response:
    ticket = secrets.token_urlsafe(32)
    await keep_proven_identity(
        ctx,
        link_ticket_key(ticket),
        team_id,
        identity,
        next_url=next_url,
        browser_sha256=browser_sha256,
        ttl=LINK_BY_PASSWORD_TTL,
    )
    page = await render_template(
        "sso_link.html",
        why=why,
        email=identity.email,
        action=f"/login/sso/{team_id}/link/{ticket}",
    )
    return Response(page, status=409, mimetype="text/html")


def link_ticket_key(ticket: str) -> str:
    # Apart from the SAML answers' tickets: neither kind can be spent as the other.
    return f"link/{ticket}"
