"""API keys: the team's keys (name, permission, domain, created, last used), a new key whose
token is shown once, on the page the creating POST renders (never in a URL, never stored in a
cache: `no-store`), and deletion after a confirmation page.

The rules are `accounts.api_keys`', shared with the REST API and the `keys` command.
"""

from __future__ import annotations

from quart import Blueprint, Response, g, make_response, render_template, request

from postwire.accounts.api_keys import MAX_NAME_LENGTH, create_team_api_key, find_api_key
from postwire.dashboard.access import requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.refusals import Redirect, done, found_or_404, refused
from postwire.domains import store as domain_store
from postwire.errors import ApiError
from postwire.store import accounts
from postwire.store.accounts import PERMISSIONS, ApiKeyRecord


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("api_keys", __name__)

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    def team_key(key_id: str) -> ApiKeyRecord:
        return found_or_404(lambda: find_api_key(ctx.spool, team_id(), key_id))

    async def keys_page(created: ApiKeyRecord | None = None, token: str | None = None) -> str:
        domains, _ = await domain_store.list_domains_parked(ctx.spool, team_id())
        return await render_template(
            "api_keys.html",
            keys=await accounts.list_api_keys_parked(ctx.spool, team_id()),
            domain_names={domain.id: domain.name for domain in domains},
            domains=domains,
            permissions=PERMISSIONS,
            max_name_length=MAX_NAME_LENGTH,
            created=created,
            token=token,
        )

    @blueprint.get("/api-keys")
    async def list_page() -> str:
        return await keys_page()

    @blueprint.post("/api-keys")
    async def create() -> Response | Redirect:
        form = await request.form
        permission = form.get("permission", "full_access")
        domain_id = form.get("domain_id") or None
        try:
            key, token = await create_team_api_key(
                ctx.spool,
                team_id(),
                form.get("name", ""),
                permission,
                domain_id if permission == "sending_access" else None,
                ctx.now(),
            )
        except ApiError as error:
            return await refused(error, "/api-keys")
        # The token's one showing: this answer alone holds it, and no cache may keep it.
        response = await make_response(await keys_page(key, token))
        response.headers["Cache-Control"] = "no-store"
        return response

    @blueprint.get("/api-keys/<key_id>/delete")
    @requires("admin")  # the confirmation of a change only admins may make
    async def confirm_delete(key_id: str) -> str:
        key = team_key(key_id)
        return await render_template(
            "settings_confirm_delete.html",
            thing=f"the key {key.name}",
            consequence="Whatever uses its token can no longer call the API. "
            "This cannot be undone.",
            action=f"/api-keys/{key.id}/delete",
            cancel="/api-keys",
        )

    @blueprint.post("/api-keys/<key_id>/delete")
    async def delete(key_id: str) -> Redirect:
        key = team_key(key_id)
        await accounts.delete_api_key(ctx.spool, key)
        return await done(
            f"The key {key.name} was deleted: its token no longer works.", "/api-keys"
        )

    return blueprint
