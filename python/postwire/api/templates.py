"""`/templates` (contract section 15): create, list, get, update, delete, publish, duplicate,
and the published versions (a Postwire addition).

A path names a template by id or by alias. Each read-modify-commit holds `Spool.record_lock`
on the template's key, so a publish never snapshots half of a concurrent edit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from quart import Blueprint, request

from postwire import _core
from postwire._core import WriteBatch
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
from postwire.errors import ApiError, KeyExistsError, validation_error
from postwire.store import templates as store
from postwire.store.accounts import contract_timestamp
from postwire.store.templates import TemplateRecord, TemplateVersionRecord
from postwire.templates.fields import (
    MAX_NAME_LENGTH,
    optional_text,
    required,
    template_alias,
    template_html,
    template_name,
    template_reply_to,
    template_sender,
    template_subject,
    variable_records,
)
from postwire.templates.variables import DeclaredVariable, parse_declared_variables

DEFAULT_PAGE = 20
NOT_FOUND = "Template not found"


def sent_content(record: TemplateRecord) -> tuple[object, ...]:
    return tuple(getattr(record, name) for name in store.SENT_FIELDS)


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

    def find(id_or_alias: str) -> TemplateRecord:
        record = store.find_template(ctx.spool, current_caller().team_id, id_or_alias)
        if record is None:
            raise ApiError(404, "not_found", NOT_FOUND)
        return record

    @asynccontextmanager
    async def locked(id_or_alias: str) -> AsyncIterator[TemplateRecord]:
        """The template, read again under its record lock, for one read-modify-commit."""
        template_id = find(id_or_alias).id
        async with ctx.spool.record_lock(store.template_key(current_caller().team_id, template_id)):
            yield find(template_id)

    async def commit(record: TemplateRecord, previous: TemplateRecord | None) -> None:
        batch = WriteBatch()
        store.put_template(batch, record, previous)
        try:
            await ctx.spool.commit(batch)
        except KeyExistsError:
            raise validation_error(
                f"The alias `{record.alias}` is already used by another template."
            ) from None

    @blueprint.post("/templates")
    async def create_template() -> tuple[Reference, int]:
        body = await json_object()
        name = template_name(required(body, "name"))
        html = template_html(required(body, "html"))
        now = contract_timestamp(ctx.now())
        record = TemplateRecord(
            id=_core.new_id(),
            team_id=current_caller().team_id,
            name=name,
            alias=template_alias(body.get("alias")),
            sender=template_sender(body.get("from")),
            subject=template_subject(body.get("subject")),
            reply_to=template_reply_to(body.get("reply_to")),
            html=html,
            text=optional_text(body.get("text"), "text"),
            variables=variable_records(parse_declared_variables(body.get("variables")), [], now),
            created_at=now,
            updated_at=now,
            current_version_id=_core.new_id(),
        )
        await commit(record, None)
        return {"object": "template", "id": record.id}, 201

    @blueprint.get("/templates")
    async def list_templates() -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        records, has_more = store.templates_page(
            ctx.spool,
            current_caller().team_id,
            after=page.after,
            before=page.before,
            limit=page.limit or DEFAULT_PAGE,
        )
        return list_response([dict(template_summary(record)) for record in records], has_more)

    @blueprint.get("/templates/<id_or_alias>")
    async def get_template(id_or_alias: str) -> TemplateObject:
        return template_json(find(id_or_alias))

    @blueprint.patch("/templates/<id_or_alias>")
    async def update_template(id_or_alias: str) -> Reference:
        # Unknown keys are ignored: SDKs may repeat the id. A field given as null is cleared.
        body = await json_object()
        fields = list(UpdateTemplateBody.__annotations__)
        if not any(field in body for field in fields):
            listed = ", ".join(f"`{field}`" for field in fields)
            raise ApiError(422, "missing_required_field", f"Missing a field to change: {listed}.")
        changes: dict[str, Any] = {}
        for field in ("name", "html"):
            if field in body:
                value = body[field]
                if value is None:
                    raise validation_error(f"The `{field}` field cannot be null.")
                changes[field] = template_name(value) if field == "name" else template_html(value)
        if "alias" in body:
            changes["alias"] = template_alias(body["alias"])
        if "from" in body:
            changes["sender"] = template_sender(body["from"])
        if "subject" in body:
            changes["subject"] = template_subject(body["subject"])
        if "reply_to" in body:
            changes["reply_to"] = template_reply_to(body["reply_to"])
        if "text" in body:
            changes["text"] = optional_text(body["text"], "text")
        declared = parse_declared_variables(body["variables"]) if "variables" in body else None
        async with locked(id_or_alias) as previous:
            now = contract_timestamp(ctx.now())
            if declared is not None:
                changes["variables"] = variable_records(declared, previous.variables, now)
            record = replace(previous, updated_at=now, **changes)
            # A change to what sends use opens a new version once the current one is published.
            if (
                sent_content(record) != sent_content(previous)
                and previous.current_version_id == previous.published_version_id
            ):
                record = replace(record, current_version_id=_core.new_id())
            await commit(record, previous)
        return {"object": "template", "id": record.id}

    @blueprint.delete("/templates/<id_or_alias>")
    async def delete_template(id_or_alias: str) -> DeletedReference:
        await json_body()  # tolerated and ignored
        async with locked(id_or_alias) as record:
            batch = WriteBatch()
            store.delete_template(batch, ctx.spool, record)
            await ctx.spool.commit(batch)
        return {"object": "template", "id": record.id, "deleted": True}

    @blueprint.post("/templates/<id_or_alias>/publish")
    async def publish_template(id_or_alias: str) -> Reference:
        await json_body()  # tolerated and ignored
        async with locked(id_or_alias) as record:
            if record.has_unpublished_versions:
                version, published = store.publish(record, contract_timestamp(ctx.now()))
                batch = WriteBatch()
                store.put_version(batch, version)
                store.put_template(batch, published, record)
                await ctx.spool.commit(batch)
        return {"object": "template", "id": record.id}

    @blueprint.post("/templates/<id_or_alias>/duplicate")
    async def duplicate_template(id_or_alias: str) -> tuple[Reference, int]:
        await json_body()  # tolerated and ignored
        source = find(id_or_alias)
        now = contract_timestamp(ctx.now())
        copy = replace(
            source,
            id=_core.new_id(),
            name=f"{source.name} (copy)"[:MAX_NAME_LENGTH],
            alias=None,  # aliases are unique
            variables=variable_records(
                [
                    DeclaredVariable(v["key"], v["type"], v["fallback_value"])
                    for v in source.variables
                ],
                [],
                now,
            ),
            created_at=now,
            updated_at=now,
            current_version_id=_core.new_id(),
            published_version_id=None,
            published_at=None,
            versions=0,
        )
        await commit(copy, None)
        return {"object": "template", "id": copy.id}, 201

    @blueprint.get("/templates/<id_or_alias>/versions")
    async def list_versions(id_or_alias: str) -> ListBody:
        page = parse_page_request(request.args, default_limit=DEFAULT_PAGE)
        versions, has_more = store.versions_page(
            ctx.spool,
            find(id_or_alias),
            after=page.after,
            before=page.before,
            limit=page.limit or DEFAULT_PAGE,
        )
        return list_response([dict(version_json(version)) for version in versions], has_more)

    return blueprint
