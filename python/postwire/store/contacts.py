"""Contacts: a team's recipients of broadcasts, found by id or by address.

A contact's record holds its own segment memberships (`segment_ids`) and explicit topic
choices (`topics`); `put_contact` writes the record with its address index and the segments'
member rows in one batch, so the three never disagree. Writers that read a contact, change it
and commit it hold `Spool.guarded(contact_key(...))` across the three steps, so that two
edits (two PATCHes, an unsubscribe during an edit) do not lose each other's change.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from postwire._core import WriteBatch
from postwire.store import segments
from postwire.store.accounts import iso_from_contract_timestamp
from postwire.store.deliveries import add_event
from postwire.store.spool import Spool
from postwire.store.tables import Table
from postwire.store.team_records import team_key

PropertyValue = str | int | float
CONTACT_EVENTS = ("contact.created", "contact.updated", "contact.deleted")


@dataclass(frozen=True, slots=True)
class ContactRecord:
    id: str
    team_id: str
    email: str  # as given; the address index is lower case
    first_name: str | None
    last_name: str | None
    unsubscribed: bool  # the global opt-out from broadcasts
    created_at: str  # store.accounts.contract_timestamp
    updated_at: str
    # Property key -> value; the team's contact properties say each key's type.
    properties: dict[str, PropertyValue] = field(default_factory=dict)
    # In step with the segments' member rows (written together by `put_contact`).
    segment_ids: list[str] = field(default_factory=list)
    # Topic id -> "opt_in" | "opt_out": the contact's explicit choices only.
    topics: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContactAddress:
    """Which contact of a team has an address (one at most)."""

    contact_id: str


CONTACTS = Table("contacts", ContactRecord)
CONTACT_EMAILS = Table("contact_emails", ContactAddress)


def contact_key(team_id: str, contact_id: str) -> str:
    """The contact's key, also the one to hold with `Spool.guarded` while changing it."""
    return team_key(team_id, contact_id)


def contact_email_key(team_id: str, email: str) -> str:
    return f"{team_id}/{email.lower()}"


def get_contact(spool: Spool, team_id: str, contact_id: str) -> ContactRecord | None:
    return CONTACTS.get(spool, contact_key(team_id, contact_id))


def find_contact(spool: Spool, team_id: str, id_or_email: str) -> ContactRecord | None:
    """The team's contact with this id, or with this address (any case) when it holds `@`."""
    if "@" not in id_or_email:
        return get_contact(spool, team_id, id_or_email)
    entry = CONTACT_EMAILS.get(spool, contact_email_key(team_id, id_or_email))
    return None if entry is None else get_contact(spool, team_id, entry.contact_id)


async def get_contact_parked(spool: Spool, team_id: str, contact_id: str) -> ContactRecord | None:
    return await CONTACTS.aget(spool, contact_key(team_id, contact_id))


async def find_contact_parked(spool: Spool, team_id: str, id_or_email: str) -> ContactRecord | None:
    """`find_contact` with parked reads."""
    if "@" not in id_or_email:
        return await get_contact_parked(spool, team_id, id_or_email)
    entry = await CONTACT_EMAILS.aget(spool, contact_email_key(team_id, id_or_email))
    return None if entry is None else await get_contact_parked(spool, team_id, entry.contact_id)


def put_contact(
    batch: WriteBatch,
    spool: Spool,
    previous: ContactRecord | None,
    contact: ContactRecord,
    now_ms: int,
    *,
    event: str | None,
    segments_found: Collection[str] = (),
) -> ContactRecord:
    """Write `contact` (which was `previous`, None for a new one) with its address index and
    segment member rows, and the `event` webhook ("contact.created" | "contact.updated");
    return the record written.

    A new address is inserted, so an address another contact of the team holds fails the
    batch with `KeyExistsError`, even against a racing writer. Segments that no longer exist
    (deleted since the caller looked, or before) are left out of the record written, and a
    segment listed twice is listed once. `segments_found` names segments the caller has just
    found, not looked up again (an import checks its segments once for a thousand contacts).
    """
    team = contact.team_id
    before = [] if previous is None else previous.segment_ids
    wanted = dict.fromkeys(contact.segment_ids)  # once each, in order
    existing = [
        s for s in wanted if s in segments_found or segments.get_segment(spool, team, s) is not None
    ]
    if existing != contact.segment_ids:
        contact = replace(contact, segment_ids=existing)
    CONTACTS.put(batch, contact_key(team, contact.id), contact)
    old_email = None if previous is None else previous.email.lower()
    if old_email != contact.email.lower():
        if old_email is not None:
            CONTACT_EMAILS.delete(batch, contact_email_key(team, old_email))
        address = ContactAddress(contact.id)
        CONTACT_EMAILS.insert(batch, contact_email_key(team, contact.email), address)
    for segment_id in contact.segment_ids:
        if segment_id not in before:
            segments.add_member(batch, team, segment_id, contact.id, now_ms)
    for segment_id in before:
        if segment_id not in contact.segment_ids:
            segments.remove_member(batch, team, segment_id, contact.id)
    if event is not None:
        add_event(batch, team, contact.id, event, now_ms, **contact_webhook_data(contact))
    return contact


def delete_contact(batch: WriteBatch, contact: ContactRecord, now_ms: int) -> None:
    """Remove the contact, its address and memberships, with its `contact.deleted` webhook."""
    team = contact.team_id
    CONTACTS.delete(batch, contact_key(team, contact.id))
    CONTACT_EMAILS.delete(batch, contact_email_key(team, contact.email))
    for segment_id in contact.segment_ids:
        segments.remove_member(batch, team, segment_id, contact.id)
    add_event(batch, team, contact.id, "contact.deleted", now_ms, **contact_webhook_data(contact))


def contact_webhook_data(contact: ContactRecord) -> dict[str, Any]:
    """The `data` of a contact.* webhook (contract section 8.2). `audience_id` is the first
    segment's id, or "" outside every segment: the Rust SDK requires a string. A name the
    contact lacks is left out (the Node SDK types `first_name` and `last_name` optional, not
    nullable)."""
    names = {"first_name": contact.first_name, "last_name": contact.last_name}
    return {
        "id": contact.id,
        "audience_id": contact.segment_ids[0] if contact.segment_ids else "",
        "segment_ids": list(contact.segment_ids),
        "created_at": iso_from_contract_timestamp(contact.created_at),
        "updated_at": iso_from_contract_timestamp(contact.updated_at),
        "email": contact.email,
        **{key: name for key, name in names.items() if name is not None},
        "unsubscribed": contact.unsubscribed,
    }
