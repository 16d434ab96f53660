"""`/templates` (contract section 15): create, list, get, update, delete, publish, duplicate,
and the published versions (a Postwire addition).

A path names a template by id or by alias. The rules and writes are `templates.editing`'s,
shared with the dashboard's Templates pages.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import DeletedReference, ListBody, Reference
from postwire.api.pagination import list_response, parse_page_request
from postwire.api.request_body import json_body, json_object
from postwire.api.template_models import (
    TemplateObject,
    TemplateSummary,
    TemplateVariableObject,
    TemplateVersionObject,
    UpdateTemplateBody,
)
from postwire.errors import ApiError
from postwire.store import templates as store
from postwire.store.templates import TemplateRecord, TemplateVersionRecord
from postwire.templates import editing

DEFAULT_PAGE = 20


# --- answers -------------------------------------------------------------------------------


def variables_json(variables: list[dict[str, Any]]) -> list[TemplateVariableObject]:
    return [
        {
            "id": v["id"],
            "key": v["key"],
            "type": v["type"],
            "fallback_value": v["fallback_value"],
            "created_at": v["created_at"],
            "updated_at": v["updated_at"],
        }
        for v in variables
    ]


def template_json(record: TemplateRecord) -> TemplateObject:
    return {
        "object": "template",
        "id": record.id,
        "current_version_id": record.current_version_id,
        "alias": record.alias,
        "name": record.name,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "status": record.status,
        "published_at": record.published_at,
        "from": record.sender,
        "subject": record.subject,
        "reply_to": record.reply_to,
        "html": record.html,
        "text": record.text,
        "variables": variables_json(record.variables),
        "has_unpublished_versions": record.has_unpublished_versions,
    }


def template_summary(record: TemplateRecord) -> TemplateSummary:
    return {
        "id": record.id,
        "name": record.name,
        "status": record.status,
        "published_at": record.published_at,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "alias": record.alias,
    }


def version_json(version: TemplateVersionRecord) -> TemplateVersionObject:
    return {
        "object": "template_version",
        "id": version.id,
        "template_id": version.template_id,
        "version_number": version.number,
        "published_at": version.published_at,
        "from": version.sender,
        "subject": version.subject,
        "reply_to": version.reply_to,
        "html": version.html,
        "text": version.text,
        "variables": variables_json(version.variables),
    }


# --- routes --------------------------------------------------------------------------------


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("templates", __name__)

    def team_id() -> str:
        return current_caller().team_id

    @blueprint.post("/templates")
    async def create_template() -> tuple[Reference, int]:
        record = await editing.create_template(ctx.spool, team_id(), await json_object(), ctx.now())
        return {"object": "template", "id": record.id}, 201

    @blueprint.get("/templates")
    async def list_templates() -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        records, has_more = store.templates_page(
            ctx.spool,
            team_id(),
            after=page.after,
            before=page.before,
            limit=page.limit or DEFAULT_PAGE,
        )
        return list_response([dict(template_summary(record)) for record in records], has_more)

    @blueprint.get("/templates/<id_or_alias>")
    async def get_template(id_or_alias: str) -> TemplateObject:
        return template_json(editing.team_template(ctx.spool, team_id(), id_or_alias))

    @blueprint.patch("/templates/<id_or_alias>")
    async def update_template(id_or_alias: str) -> Reference:
        # Unknown keys are ignored: SDKs may repeat the id. A field given as null is cleared.
        body = await json_object()
        fields = list(UpdateTemplateBody.__annotations__)
        if not any(field in body for field in fields):
            listed = ", ".join(f"`{field}`" for field in fields)
            raise ApiError(422, "missing_required_field", f"Missing a field to change: {listed}.")
        record = await editing.update_template(ctx.spool, team_id(), id_or_alias, body, ctx.now())
        return {"object": "template", "id": record.id}

    @blueprint.delete("/templates/<id_or_alias>")
    async def delete_template(id_or_alias: str) -> DeletedReference:
        await json_body()  # tolerated and ignored
        record = await editing.delete_template(ctx.spool, team_id(), id_or_alias)
        return {"object": "template", "id": record.id, "deleted": True}

    @blueprint.post("/templates/<id_or_alias>/publish")
    async def publish_template(id_or_alias: str) -> Reference:
        await json_body()  # tolerated and ignored
        record = await editing.publish_template(ctx.spool, team_id(), id_or_alias, ctx.now())
        return {"object": "template", "id": record.id}

    @blueprint.post("/templates/<id_or_alias>/duplicate")
    async def duplicate_template(id_or_alias: str) -> tuple[Reference, int]:
        await json_body()  # tolerated and ignored
        copy = await editing.duplicate_template(ctx.spool, team_id(), id_or_alias, ctx.now())
        return {"object": "template", "id": copy.id}, 201

    @blueprint.get("/templates/<id_or_alias>/versions")
    async def list_versions(id_or_alias: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        versions, has_more = store.versions_page(
            ctx.spool,
            editing.team_template(ctx.spool, team_id(), id_or_alias),
            after=page.after,
            before=page.before,
            limit=page.limit or DEFAULT_PAGE,
        )
        return list_response([dict(version_json(version)) for version in versions], has_more)

    return blueprint
