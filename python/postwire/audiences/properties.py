"""Creating, changing and deleting contact properties: the rules and writes the REST API and
the dashboard share. `key` and `type` are fixed at creation (contacts hold values of that
type); only the fallback changes. A key is unique in its team: creates take the team's lock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from postwire import _core
from postwire._core import WriteBatch
from postwire.audiences.contact_rules import (
    fallback_value,
    missing_field,
    property_key,
    property_type,
)
from postwire.audiences.records import require_property
from postwire.errors import validation_error
from postwire.store.accounts import contract_timestamp
from postwire.store.contact_properties import (
    MAX_PROPERTIES_PER_TEAM,
    ContactPropertyRecord,
    delete_property,
    properties_lock_key,
    put_property,
    team_properties,
)
from postwire.store.spool import Spool


async def create_property(
    spool: Spool, team_id: str, body: Mapping[str, Any], now: datetime
) -> ContactPropertyRecord:
    key = property_key(body.get("key"))
    kind = property_type(body.get("type"))
    fallback = fallback_value(body.get("fallback_value"), kind)
    async for attempt in spool.guarded(properties_lock_key(team_id)):
        with attempt:
            existing = team_properties(spool, team_id)
            if key in existing:
                raise validation_error(f"A contact property with the key `{key}` already exists.")
            if len(existing) >= MAX_PROPERTIES_PER_TEAM:
                raise validation_error(
                    f"A team has at most {MAX_PROPERTIES_PER_TEAM} contact properties."
                )
            prop = ContactPropertyRecord(
                _core.new_id(), team_id, key, kind, fallback, contract_timestamp(now)
            )
            batch = WriteBatch()
            put_property(batch, prop)
            await spool.commit(batch)
    return prop


async def change_fallback(
    spool: Spool, team_id: str, property_id: str, body: Mapping[str, Any]
) -> ContactPropertyRecord:
    """The property with `body["fallback_value"]` (null: none); a `key` or `type` other than
    the property's is refused."""
    if "fallback_value" not in body:
        raise missing_field("fallback_value")
    async for attempt in spool.guarded(properties_lock_key(team_id)):
        with attempt:
            prop = require_property(spool, team_id, property_id)
            for fixed in ("key", "type"):
                if body.get(fixed) is not None and body[fixed] != getattr(prop, fixed):
                    raise validation_error(f"A contact property's `{fixed}` cannot be changed.")
            changed = replace(
                prop, fallback_value=fallback_value(body["fallback_value"], prop.type)
            )
            batch = WriteBatch()
            put_property(batch, changed)
            await spool.commit(batch)
    return changed


async def remove_property(spool: Spool, team_id: str, property_id: str) -> ContactPropertyRecord:
    """Delete the property; values contacts hold under its key stay on them, unread."""
    async for attempt in spool.guarded(properties_lock_key(team_id)):
        with attempt:
            prop = require_property(spool, team_id, property_id)
            batch = WriteBatch()
            delete_property(batch, prop)
            await spool.commit(batch)
    return prop
