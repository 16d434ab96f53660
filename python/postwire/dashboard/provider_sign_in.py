"""The end of a provider's sign-in (Google, GitHub, a team's OpenID Connect or SAML): the
account the proven identity leads to (`accounts/identity_linking.py` decides), then a session,
or, when a signed-in user asked to link the team's provider, the link.

A session started through a team's provider carries that team (`sso_team_id`): it shows that
team alone and is the only kind that passes the team's "enforce SSO".
"""

from __future__ import annotations

from typing import Final

from quart import Response, flash, g

from postwire.accounts.identity_linking import (
    account_for_identity,
    account_for_team_identity,
    link_team_identity,
)
from postwire.accounts.oidc import Identity
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.login_flow import finish_login
from postwire.dashboard.redirects import see_other
from postwire.store.accounts import TEAMS

# Binds a sign-in to the browser that started it (random; only its SHA-256 is kept).
BROWSER_COOKIE: Final = "pw_sso"


class LinkNotAllowed(Exception):
    """The answer to a link came back to a browser no longer signed in to the account that
    asked; the text says what to do."""


async def sign_in_with_identity(
    ctx: DashboardContext,
    identity: Identity,
    provider: str,
    team_id: str | None,
    *,
    next_url: str,
    link_user_id: str,
) -> Response:
    """Sign in (or, with `link_user_id`, link) the identity that `provider` proved; `team_id`
    is the team whose provider it is (None for Google and GitHub). The sign-in's browser
    cookie is spent either way."""
    now = ctx.now()
    if team_id is None:
        user = await account_for_identity(
            ctx.spool, identity, provider=provider, signup=ctx.config.auth.signup, now=now
        )
        response = await finish_login(ctx, user, method=provider, next_url=next_url)
    elif link_user_id:
        response = await _link(ctx, identity, team_id, link_user_id)
    else:
        user = await account_for_team_identity(ctx.spool, identity, team_id, now=now)
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
