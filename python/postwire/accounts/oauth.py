"""Sign-in through an OAuth 2.0 / OpenID Connect provider: Google, GitHub, or a team's own.

`begin_provider_login` keeps the login server-side in `sso_logins` under its random `state`
(with the nonce, the PKCE verifier, the page to return to and the SHA-256 of a cookie of the
browser that started it) and returns the provider's authorization URL. `complete_provider_login`
takes that record back exactly once, checks it belongs to this browser and has not expired,
exchanges the code (with the verifier) and returns who the provider says signed in: from the
checked ID token (OpenID Connect) or from GitHub's user API, which tells whether each address
is verified.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from postwire.accounts import oidc
from postwire.accounts.oidc import Identity
from postwire.accounts.provider_http import ProviderError, ProviderHttp
from postwire.config import AuthConfig
from postwire.store.spool import Spool
from postwire.store.sso import (
    PendingLoginRecord,
    SsoConfigRecord,
    save_pending_login,
    secret_sha256,
    take_pending_login,
)

# Time a person has at the provider (typing a password, approving MFA) before coming back.
LOGIN_TTL = timedelta(minutes=15)
OIDC_SCOPE = "openid email profile"
GITHUB_SCOPE = "read:user user:email"


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """What a login needs to know of its provider."""

    provider: str  # "google", "github", or "oidc" (a team's provider)
    client_id: str
    client_secret: str
    team_id: str | None = None
    issuer: str = ""  # OpenID Connect providers
    authorize_url: str = ""  # GitHub
    token_url: str = ""
    api_url: str = ""
    # A team's provider is a tenant's URL: it must be https and goes through the SSRF guard.
    tenant_chosen: bool = False


def google_settings(auth: AuthConfig) -> ProviderSettings | None:
    if not auth.google_client_id:
        return None
    return ProviderSettings(
        provider="google",
        client_id=auth.google_client_id,
        client_secret=auth.google_client_secret,
        issuer=auth.google_issuer,
    )


def github_settings(auth: AuthConfig) -> ProviderSettings | None:
    if not auth.github_client_id:
        return None
    return ProviderSettings(
        provider="github",
        client_id=auth.github_client_id,
        client_secret=auth.github_client_secret,
        authorize_url=auth.github_authorize_url,
        token_url=auth.github_token_url,
        api_url=auth.github_api_url.rstrip("/"),
    )


def team_oidc_settings(config: SsoConfigRecord) -> ProviderSettings | None:
    if config.protocol != "oidc":
        return None
    return ProviderSettings(
        provider="oidc",
        client_id=config.oidc_client_id,
        client_secret=config.oidc_client_secret,
        team_id=config.team_id,
        issuer=config.oidc_issuer,
        tenant_chosen=True,
    )


async def begin_provider_login(
    spool: Spool,
    http: ProviderHttp,
    settings: ProviderSettings,
    *,
    redirect_uri: str,
    next_url: str,
    browser_secret: str,
    now: datetime,
    allow_private: bool,
    link_user_id: str = "",
) -> str:
    """Keep a new login and return the URL that sends the browser to the provider
    (`link_user_id`: the signed-in user linking the team's provider to their account)."""
    state = secrets.token_urlsafe(32)
    nonce = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(48)  # 64 characters: RFC 7636 asks for 43 to 128
    if settings.provider == "github":
        endpoint, scope, sent_nonce = settings.authorize_url, GITHUB_SCOPE, None
    else:
        metadata = await oidc.discover(
            http, settings.issuer, require_https=settings.tenant_chosen and not allow_private
        )
        endpoint, scope, sent_nonce = metadata.authorization_endpoint, OIDC_SCOPE, nonce
    record = PendingLoginRecord(
        provider=settings.provider,
        team_id=settings.team_id,
        nonce=nonce,
        code_verifier=verifier,
        next_url=next_url,
        browser_sha256=secret_sha256(browser_secret),
        redirect_uri=redirect_uri,
        created_at=now.isoformat(),
        expires_at=(now + LOGIN_TTL).isoformat(),
        link_user_id=link_user_id,
    )
    await save_pending_login(spool, state, record, now=now.isoformat())
    return oidc.authorization_url(
        endpoint,
        client_id=settings.client_id,
        redirect_uri=redirect_uri,
        scope=scope,
        state=state,
        code_verifier=verifier,
        nonce=sent_nonce,
    )


async def take_login(
    spool: Spool, *, state: str, provider: str, browser_secret: str | None, now: datetime
) -> PendingLoginRecord:
    """The login `state` names, consumed; refused unless it is this provider's, started in
    this browser, and not expired."""
    login = await take_pending_login(spool, state) if state else None
    if login is None:
        raise ProviderError(
            "This sign-in was already used or is unknown. Start again from the login page."
        )
    if login.provider != provider:
        raise ProviderError("This sign-in was started with another provider. Start again.")
    presented = secret_sha256(browser_secret or "")
    if not hmac.compare_digest(presented, login.browser_sha256):
        raise ProviderError(
            "This sign-in was started in another browser (or its cookie is gone). Start again"
            " from the login page in this browser."
        )
    if datetime.fromisoformat(login.expires_at) <= now:
        raise ProviderError("This sign-in took too long and expired. Start again.")
    return login


async def complete_provider_login(
    http: ProviderHttp,
    settings: ProviderSettings,
    login: PendingLoginRecord,
    *,
    code: str,
    now: datetime,
    allow_private: bool,
) -> Identity:
    """Who signed in, proven by the provider's answer to the code of a taken `login`."""
    if not code:
        raise ProviderError("The provider sent no authorization code back.")
    if settings.provider == "github":
        tokens = await oidc.exchange_code(
            http,
            settings.token_url,
            code=code,
            redirect_uri=login.redirect_uri,
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            code_verifier=login.code_verifier,
        )
        return await github_identity(http, settings.api_url, _access_token(tokens))
    metadata = await oidc.discover(
        http, settings.issuer, require_https=settings.tenant_chosen and not allow_private
    )
    tokens = await oidc.exchange_code(
        http,
        metadata.token_endpoint,
        code=code,
        redirect_uri=login.redirect_uri,
        client_id=settings.client_id,
        client_secret=settings.client_secret,
        code_verifier=login.code_verifier,
    )
    id_token = tokens.get("id_token")
    if not isinstance(id_token, str):
        raise ProviderError("The identity provider sent no ID token.")
    keys = await oidc.fetch_key_set(http, metadata.jwks_uri)
    return oidc.verify_id_token(
        id_token,
        keys,
        issuer=metadata.issuer,
        client_id=settings.client_id,
        nonce=login.nonce,
        now=now,
    )


def _access_token(tokens: dict[str, Any]) -> str:
    token = tokens.get("access_token")
    if not isinstance(token, str) or not token:
        raise ProviderError("GitHub sent no access token.")
    return token


async def github_identity(http: ProviderHttp, api_url: str, access_token: str) -> Identity:
    """The GitHub user and their primary address, verified or not (the caller refuses an
    unverified one), from `GET /user` and `GET /user/emails`."""
    headers = {"Authorization": f"Bearer {access_token}", "Accept": "application/vnd.github+json"}
    user = await http.get_json(f"{api_url}/user", headers=headers)
    emails = await http.get_json(f"{api_url}/user/emails", headers=headers)
    if not isinstance(user, dict) or not isinstance(emails, list):
        raise ProviderError("GitHub's user API answered something unexpected.")
    primary = next((e for e in emails if isinstance(e, dict) and e.get("primary") is True), None)
    if primary is None or not isinstance(primary.get("email"), str):
        raise ProviderError("GitHub did not give a primary email address.")
    name = user.get("name") or user.get("login") or ""
    return Identity(
        email=str(primary["email"]).strip().lower(),
        email_verified=primary.get("verified") is True,
        name=str(name),
        subject=str(user.get("id", "")),
        issuer=api_url,
    )
