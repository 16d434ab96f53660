"""Contact properties: a team's typed keys for the values contacts carry (`plan`, `age`), each
with a fallback used where a contact has no value. A team has few of them, so they are read
whole; a key is unique in its team (checked by the API under a team lock)."""

from __future__ import annotations

from dataclasses import dataclass

from postwire._core import WriteBatch
from postwire.store.contacts import ContactRecord, PropertyValue
from postwire.store.spool import Spool
from postwire.store.tables import Table
from postwire.store.team_records import TeamRecords, team_prefix

PROPERTY_TYPES = ("string", "number")
# Far more than a team uses; `team_properties` reads them all at once.
MAX_PROPERTIES_PER_TEAM = 1000


@dataclass(frozen=True, slots=True)
class ContactPropertyRecord:
    id: str
    team_id: str
    key: str  # [A-Za-z0-9_]{1,50}, case-sensitive
    type: str  # "string" | "number"
    fallback_value: PropertyValue | None
    created_at: str  # store.accounts.contract_timestamp


CONTACT_PROPERTIES = Table("contact_properties", ContactPropertyRecord)
_PROPERTIES: TeamRecords[ContactPropertyRecord] = TeamRecords(CONTACT_PROPERTIES)


def properties_lock_key(team_id: str) -> str:
    """Held while a property is created, so two of the same key cannot both be made."""
    return f"contact_properties/{team_id}"


def get_property(spool: Spool, team_id: str, property_id: str) -> ContactPropertyRecord | None:
    return _PROPERTIES.get(spool, team_id, property_id)


async def get_property_parked(
    spool: Spool, team_id: str, property_id: str
) -> ContactPropertyRecord | None:
    return await _PROPERTIES.aget(spool, team_id, property_id)


def put_property(batch: WriteBatch, prop: ContactPropertyRecord) -> None:
    _PROPERTIES.put(batch, prop)


def delete_property(batch: WriteBatch, prop: ContactPropertyRecord) -> None:
    """Remove the property; values contacts hold under its key stay, unread."""
    _PROPERTIES.delete(batch, prop)


def team_properties(spool: Spool, team_id: str) -> dict[str, ContactPropertyRecord]:
    """The team's properties by key, oldest first."""
    rows = CONTACT_PROPERTIES.scan(
        spool, prefix=team_prefix(team_id), limit=MAX_PROPERTIES_PER_TEAM
    )
    return {prop.key: prop for _, prop in rows}


async def team_properties_parked(spool: Spool, team_id: str) -> dict[str, ContactPropertyRecord]:
    """`team_properties` with a parked read."""
    rows = await CONTACT_PROPERTIES.ascan(
        spool, prefix=team_prefix(team_id), limit=MAX_PROPERTIES_PER_TEAM
    )
    return {prop.key: prop for _, prop in rows}


def fits_type(kind: str, value: object) -> bool:
    """Whether `value` is of property type `kind` ("string" | "number"; a bool is no number)."""
    if kind == "string":
        return isinstance(value, str)
    return isinstance(value, int | float) and not isinstance(value, bool)


def value_fits(prop: ContactPropertyRecord, value: object) -> bool:
    return fits_type(prop.type, value)


def property_values(
    contact: ContactRecord, properties: dict[str, ContactPropertyRecord]
) -> dict[str, PropertyValue | None]:
    """Every property of the team as this contact reads: its own value when it holds one of
    the property's type, else the fallback (None when there is none). A value kept under a key
    whose property was deleted, or re-made with another type, is not shown."""
    values: dict[str, PropertyValue | None] = {}
    for key, prop in properties.items():
        value = contact.properties.get(key)
        values[key] = (
            value if value is not None and value_fits(prop, value) else prop.fallback_value
        )
    return values
