"""The team's SSO settings page (/team/sso: members read it, owners change it): the team's
OpenID Connect provider (issuer, client id and secret) or SAML 2.0 IdP (metadata XML, or a URL
it is read from once, at save), the email domains whose addresses the "Sign in with SSO" page
sends here, and "enforce SSO". Settings are checked before they are saved: the issuer's
discovery document is read, the SAML metadata parsed, so a typo shows here rather than at
someone's sign-in.
"""

from __future__ import annotations

from dataclasses import replace

import trio
from quart import Blueprint, Response, flash, g, render_template, request

from postwire.accounts import oidc, saml
from postwire.accounts.provider_http import ProviderError, open_provider_http
from postwire.accounts.saml import SamlError
from postwire.accounts.sso import (
    SsoSettingsError,
    parse_email_domains,
    save_sso_settings,
    sso_settings,
)
from postwire.dashboard.access import requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.redirects import see_other
from postwire.store.sso import SsoConfigRecord


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("sso_team", __name__)
    public_url = ctx.config.dashboard.public_url.rstrip("/")
    allow_private = ctx.config.auth.allow_private_issuers

    async def render(
        config: SsoConfigRecord, error: str | None = None, status: int = 200
    ) -> Response:
        team_id = config.team_id
        entity_id, acs_url = saml.service_provider_urls(public_url, team_id)
        page = await render_template(
            "sso_team.html",
            config=config,
            domains_text="\n".join(config.email_domains),
            has_secret=bool(config.oidc_client_secret),
            error=error,
            sign_in_url=f"{public_url}/login/sso/{team_id}",
            redirect_uri=f"{public_url}/auth/callback/oidc",
            sp_entity_id=entity_id,
            acs_url=acs_url,
        )
        return Response(page, status=status, mimetype="text/html")

    @blueprint.get("/team/sso")
    async def show() -> Response:
        # Every member may read the settings (the secret is never shown); owners change them.
        return await render(await sso_settings(ctx.spool, g.viewer.team.id))

    @blueprint.post("/team/sso")
    @requires("owner")
    async def save() -> Response:
        form = await request.form
        current = await sso_settings(ctx.spool, g.viewer.team.id)
        entered = replace(
            current,
            protocol=form.get("protocol", ""),
            oidc_issuer=form.get("oidc_issuer", "").strip().rstrip("/"),
            oidc_client_id=form.get("oidc_client_id", "").strip(),
            # Left empty, the secret saved before stays (it is never shown again).
            oidc_client_secret=form.get("oidc_client_secret", "") or current.oidc_client_secret,
            saml_metadata_url=form.get("saml_metadata_url", "").strip(),
            saml_metadata_xml=form.get("saml_metadata_xml", "").strip(),
            enforce=form.get("enforce") == "on",
        )
        try:
            entered = replace(
                entered, email_domains=parse_email_domains(form.get("email_domains", ""))
            )
            entered = await checked(entered)
            await save_sso_settings(ctx.spool, entered, now=ctx.now())
        except (SsoSettingsError, ProviderError, SamlError) as error:
            return await render(entered, str(error), status=400)
        await flash("Single sign-on settings saved.", "success")
        return see_other("/team/sso")

    async def checked(entered: SsoConfigRecord) -> SsoConfigRecord:
        """The settings with the SAML metadata read from its URL, after the provider's
        documents were read and found usable."""
        async with open_provider_http(vet=not allow_private) as http:
            if entered.protocol == "oidc" and entered.oidc_issuer:
                await oidc.discover(http, entered.oidc_issuer, require_https=not allow_private)
            if entered.protocol == "saml" and entered.saml_metadata_url:
                metadata = await http.get_text(entered.saml_metadata_url)
                entered = replace(entered, saml_metadata_xml=metadata)
        if entered.protocol == "saml" and entered.saml_metadata_xml:
            await trio.to_thread.run_sync(
                saml.check_idp_metadata, public_url, entered.team_id, entered.saml_metadata_xml
            )
        return entered

    return blueprint
