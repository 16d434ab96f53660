"""Creating, changing, publishing, duplicating and deleting a team's templates: the rules and
writes the REST API (`/templates`) and the dashboard's Templates pages share.

Fields are given as the API's JSON body names them (`name`, `alias`, `from`, `subject`,
`reply_to`, `html`, `text`, `variables`); a refusal is an `ApiError` worded for the API (a 404
`not_found` for a template the team does not have). Each read-modify-commit holds
`Spool.guarded` on the template's key, so a publish never snapshots half of a concurrent
edit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from postwire import _core
from postwire._core import WriteBatch
from postwire.errors import ApiError, KeyExistsError, validation_error
from postwire.store import templates as store
from postwire.store.accounts import contract_timestamp
from postwire.store.guards import Attempt
from postwire.store.spool import Spool
from postwire.store.templates import TemplateRecord
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

NOT_FOUND: Final = "Template not found"


def team_template(spool: Spool, team_id: str, id_or_alias: str) -> TemplateRecord:
    """The team's template by id or alias; 404 `not_found` for any other."""
    record = store.find_template(spool, team_id, id_or_alias)
    if record is None:
        raise ApiError(404, "not_found", NOT_FOUND)
    return record


def _sent_content(record: TemplateRecord) -> tuple[object, ...]:
    return tuple(getattr(record, name) for name in store.SENT_FIELDS)


async def _locked(
    spool: Spool, team_id: str, id_or_alias: str
) -> AsyncIterator[tuple[Attempt, TemplateRecord]]:
    """Attempts of a guarded change of the template, each with the template as it is then:
    `async for attempt, record in _locked(...): with attempt: ...` (`Spool.guarded`)."""
    template_id = team_template(spool, team_id, id_or_alias).id
    async for attempt in spool.guarded(store.template_key(team_id, template_id)):
        try:
            record = team_template(spool, team_id, template_id)
        except BaseException as error:
            attempt.__exit__(type(error), error, None)
            raise
        yield attempt, record


async def _commit(spool: Spool, record: TemplateRecord, previous: TemplateRecord | None) -> None:
    batch = WriteBatch()
    store.put_template(batch, record, previous)
    try:
        await spool.commit(batch)
    except KeyExistsError:
        raise validation_error(
            f"The alias `{record.alias}` is already used by another template."
        ) from None


async def create_template(
    spool: Spool, team_id: str, body: Mapping[str, Any], now: datetime
) -> TemplateRecord:
    """A new draft from `body` (`name` and `html` required)."""
    name = template_name(required(dict(body), "name"))
    html = template_html(required(dict(body), "html"))
    stamp = contract_timestamp(now)
    record = TemplateRecord(
        id=_core.new_id(),
        team_id=team_id,
        name=name,
        alias=template_alias(body.get("alias")),
        sender=template_sender(body.get("from")),
        subject=template_subject(body.get("subject")),
        reply_to=template_reply_to(body.get("reply_to")),
        html=html,
        text=optional_text(body.get("text"), "text"),
        variables=variable_records(parse_declared_variables(body.get("variables")), [], stamp),
        created_at=stamp,
        updated_at=stamp,
        current_version_id=_core.new_id(),
    )
    await _commit(spool, record, None)
    return record


async def update_template(
    spool: Spool, team_id: str, id_or_alias: str, body: Mapping[str, Any], now: datetime
) -> TemplateRecord:
    """The working copy with the fields `body` gives (a field given as None is cleared;
    `name` and `html` cannot be). A change to what sends use opens a new version once the
    current one is published."""
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
    async for attempt, previous in _locked(spool, team_id, id_or_alias):
        with attempt:
            stamp = contract_timestamp(now)
            if declared is not None:
                changes["variables"] = variable_records(declared, previous.variables, stamp)
            record = replace(previous, updated_at=stamp, **changes)
            if (
                _sent_content(record) != _sent_content(previous)
                and previous.current_version_id == previous.published_version_id
            ):
                record = replace(record, current_version_id=_core.new_id())
            await _commit(spool, record, previous)
    return record


async def publish_template(
    spool: Spool, team_id: str, id_or_alias: str, now: datetime
) -> TemplateRecord:
    """Freeze the working copy as the next version, which sends use from now on; with nothing
    new since the last publish, nothing changes."""
    async for attempt, record in _locked(spool, team_id, id_or_alias):
        with attempt:
            if not record.has_unpublished_versions:
                return record
            version, published = store.publish(record, contract_timestamp(now))
            batch = WriteBatch()
            store.put_version(batch, version)
            store.put_template(batch, published, record)
            await spool.commit(batch)
    return published


async def duplicate_template(
    spool: Spool, team_id: str, id_or_alias: str, now: datetime
) -> TemplateRecord:
    """A new draft copying the working copy, named `<name> (copy)`, without the alias."""
    source = team_template(spool, team_id, id_or_alias)
    stamp = contract_timestamp(now)
    copy = replace(
        source,
        id=_core.new_id(),
        name=f"{source.name} (copy)"[:MAX_NAME_LENGTH],
        alias=None,  # aliases are unique
        variables=variable_records(
            [DeclaredVariable(v["key"], v["type"], v["fallback_value"]) for v in source.variables],
            [],
            stamp,
        ),
        created_at=stamp,
        updated_at=stamp,
        current_version_id=_core.new_id(),
        published_version_id=None,
        published_at=None,
        versions=0,
    )
    await _commit(spool, copy, None)
    return copy


async def delete_template(spool: Spool, team_id: str, id_or_alias: str) -> TemplateRecord:
    """Remove the template, its alias and all its versions; return what was removed."""
    async for attempt, record in _locked(spool, team_id, id_or_alias):
        with attempt:
            batch = WriteBatch()
            store.delete_template(batch, spool, record)
            await spool.commit(batch)
    return record
