"""What a contact, topic or contact property body may say: pure checks with the contract's
refusals (422 `validation_error` naming the field), shared by the REST API and CSV imports."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from postwire.compose.addresses import recipient_problem
from postwire.errors import ApiError, validation_error
from postwire.store.contact_properties import (
    PROPERTY_TYPES,
    ContactPropertyRecord,
    fits_type,
    value_fits,
)
from postwire.store.contacts import ContactRecord, PropertyValue
from postwire.store.topics import SUBSCRIPTIONS, VISIBILITIES

# No contract limit on names; this keeps records small and is far above real names.
MAX_NAME_LENGTH = 256
MAX_TOPIC_NAME = 50
MAX_TOPIC_DESCRIPTION = 200
MAX_SEGMENT_NAME = 256
PROPERTY_KEY = re.compile(r"[A-Za-z0-9_]{1,50}")
# A string property value is text a template places in mail; numbers are JSON numbers.
MAX_PROPERTY_STRING = 2000


def missing_field(name: str) -> ApiError:
    return ApiError(422, "missing_required_field", f"Missing `{name}` field.")


def contact_email(value: object) -> str:
    """The address a contact is for: a bare address mail can be sent to."""
    if not isinstance(value, str):
        raise validation_error("The `email` field must be a string.")
    problem = recipient_problem(value.strip())
    if problem is not None:
        raise validation_error(f"The `email` field is not a valid address: {problem}.")
    return value.strip()


def optional_text(body: Mapping[str, Any], name: str, limit: int) -> str | None:
    """A string field that may be null or absent (both: None), at most `limit` characters."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise validation_error(f"The `{name}` field must be a string.")
    if len(value) > limit:
        raise validation_error(f"The `{name}` field must be at most {limit} characters.")
    return value


def required_text(body: Mapping[str, Any], name: str, limit: int) -> str:
    value = optional_text(body, name, limit)
    if value is None or not value.strip():
        raise missing_field(name)
    return value


def optional_flag(body: Mapping[str, Any], name: str) -> bool | None:
    value = body.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise validation_error(f"The `{name}` field must be a boolean.")


def choice(body: Mapping[str, Any], name: str, allowed: tuple[str, ...]) -> str | None:
    value = body.get(name)
    if value is None or value in allowed:
        return value
    listed = " or ".join(f"`{a}`" for a in allowed)
    raise validation_error(f"The `{name}` field must be {listed}.")


def property_changes(
    raw: object, properties: Mapping[str, ContactPropertyRecord]
) -> dict[str, PropertyValue | None]:
    """`properties` of a contact body: each key must be one of the team's contact properties
    and each value of its type; null removes the contact's value."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise validation_error("The `properties` field must be an object.")
    changes: dict[str, PropertyValue | None] = {}
    for key, value in raw.items():
        prop = properties.get(key)
        if prop is None:
            raise validation_error(
                f"The property `{key}` does not exist: create it with POST /contact-properties."
            )
        if value is not None and not value_fits(prop, value):
            raise validation_error(f"The property `{key}` must be a {prop.type}.")
        if isinstance(value, str) and len(value) > MAX_PROPERTY_STRING:
            raise validation_error(
                f"The property `{key}` must be at most {MAX_PROPERTY_STRING} characters."
            )
        changes[key] = value
    return changes


def with_properties(
    contact: ContactRecord, changes: Mapping[str, PropertyValue | None]
) -> ContactRecord:
    if not changes:
        return contact
    values = dict(contact.properties)
    for key, value in changes.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    return replace(contact, properties=values)


def segment_ids(raw: object) -> list[str]:
    """`segments` of a contact body: ids, or objects `{"id": ...}` as the Python SDK sends."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise validation_error("The `segments` field must be an array of segment ids.")
    ids: list[str] = []
    for item in raw:
        value = item.get("id") if isinstance(item, dict) else item
        if not isinstance(value, str) or not value:
            raise validation_error('Each of `segments` must be a segment id or {"id": ...}.')
        ids.append(value)
    return ids


def topic_choices(raw: object, field: str = "topics") -> dict[str, str]:
    """A list of `{"id", "subscription": "opt_in" | "opt_out"}` as topic id -> subscription."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise validation_error(f"The `{field}` field must be an array.")
    choices: dict[str, str] = {}
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise validation_error(f"Each of `{field}` must be an object with an `id`.")
        if item.get("subscription") not in SUBSCRIPTIONS:
            raise validation_error(
                f"Each of `{field}` must have a `subscription` of `opt_in` or `opt_out`."
            )
        choices[item["id"]] = item["subscription"]
    return choices


def contact_changes(
    contact: ContactRecord,
    body: Mapping[str, Any],
    properties: Mapping[str, ContactPropertyRecord],
) -> ContactRecord:
    """`contact` with what a create or update body says: `email`, `first_name`, `last_name`
    (null clears them), `unsubscribed` and `properties`. Segments and topics, which must be
    looked up, are the caller's."""
    changed = contact
    if body.get("email") is not None:
        changed = replace(changed, email=contact_email(body["email"]))
    if "first_name" in body:
        changed = replace(changed, first_name=optional_text(body, "first_name", MAX_NAME_LENGTH))
    if "last_name" in body:
        changed = replace(changed, last_name=optional_text(body, "last_name", MAX_NAME_LENGTH))
    unsubscribed = optional_flag(body, "unsubscribed")
    if unsubscribed is not None:
        changed = replace(changed, unsubscribed=unsubscribed)
    return with_properties(changed, property_changes(body.get("properties"), properties))


def property_key(value: object) -> str:
    if value is None:
        raise missing_field("key")
    if not isinstance(value, str) or PROPERTY_KEY.fullmatch(value) is None:
        raise validation_error(
            "The `key` must be 1 to 50 letters, digits or underscores ([A-Za-z0-9_])."
        )
    return value


def property_type(value: object) -> str:
    if value is None:
        raise missing_field("type")
    if value not in PROPERTY_TYPES:
        raise validation_error("The `type` must be `string` or `number`.")
    return str(value)


def fallback_value(value: object, kind: str) -> PropertyValue | None:
    """A property's fallback: null, or a value of the property's type."""
    if value is None:
        return None
    if not fits_type(kind, value) or not isinstance(value, str | int | float):
        raise validation_error(f"The `fallback_value` must be a {kind}, like the property.")
    if isinstance(value, str) and len(value) > MAX_PROPERTY_STRING:
        raise validation_error(
            f"The `fallback_value` must be at most {MAX_PROPERTY_STRING} characters."
        )
    return value


def topic_visibility(body: Mapping[str, Any]) -> str | None:
    return choice(body, "visibility", VISIBILITIES)
