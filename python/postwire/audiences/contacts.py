"""Contact writes, each one read-modify-commit guarded by the contact's key, so that two
writers (two PATCHes, an unsubscribe during an edit, an import) never lose each other's change;
and the end of a deleted segment's memberships."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from postwire import _core
from postwire._core import WriteBatch
from postwire.audiences.contact_rules import (
    contact_changes,
    contact_email,
    missing_field,
    segment_ids,
    topic_choices,
)
from postwire.audiences.records import require_segment, require_topic
from postwire.errors import ApiError, KeyExistsError, validation_error
from postwire.store import segments
from postwire.store.accounts import contract_timestamp
from postwire.store.contact_properties import team_properties
from postwire.store.contacts import (
    ContactRecord,
    contact_key,
    delete_contact,
    find_contact,
    get_contact,
    put_contact,
)
from postwire.store.guards import Attempt, never_after_change
from postwire.store.segments import SegmentRecord
from postwire.store.spool import Spool

# Contacts taken out of a deleted segment per commit.
SEGMENT_CLEANUP_CHUNK = 500


def contact_not_found() -> ApiError:
    return ApiError(404, "not_found", "Contact not found")


def duplicate_contact(email: str) -> ApiError:
    return validation_error(f"A contact with the email `{email}` already exists.")


def _ms(now: datetime) -> int:
    return int(now.timestamp() * 1000)


def new_contact(team_id: str, email: str, now: datetime) -> ContactRecord:
    stamp = contract_timestamp(now)
    return ContactRecord(_core.new_id(), team_id, email, None, None, False, stamp, stamp)


def contact_to_add(
    spool: Spool,
    team_id: str,
    body: Mapping[str, Any],
    now: datetime,
    *,
    first_segment: str | None = None,
) -> ContactRecord:
    """The new contact a create body describes (`email`, names, `unsubscribed`, `properties`,
    `segments`, `topics`), each segment and topic one of the team's; with `first_segment` (an
    audience-scoped create), in that segment first. Nothing is written."""
    if body.get("email") is None:
        raise missing_field("email")
    email = contact_email(body["email"])
    wanted = segment_ids(body.get("segments"))
    if first_segment is not None:
        wanted.insert(0, first_segment)
    for segment_id in wanted:
        require_segment(spool, team_id, segment_id)
    topics = topic_choices(body.get("topics"))
    for topic_id in topics:
        require_topic(spool, team_id, topic_id)
    record = contact_changes(
        new_contact(team_id, email, now), body, team_properties(spool, team_id)
    )
    return replace(record, segment_ids=wanted, topics=topics)


async def add_contact(
    spool: Spool, team_id: str, body: Mapping[str, Any], now: datetime
) -> ContactRecord:
    """Create the contact a create body describes (`contact_to_add`)."""
    return await create_contact(spool, contact_to_add(spool, team_id, body, now), now)


async def create_contact(spool: Spool, contact: ContactRecord, now: datetime) -> ContactRecord:
    """Commit a new contact with its `contact.created` webhook; an address the team already
    has is a 422."""
    batch = WriteBatch()
    written = put_contact(batch, spool, None, contact, _ms(now), event="contact.created")
    try:
        await spool.commit(batch)
    except KeyExistsError:
        raise duplicate_contact(contact.email) from None
    return written


async def change_contact(
    spool: Spool,
    team_id: str,
    id_or_email: str,
    change: Callable[[ContactRecord], ContactRecord],
    now: datetime,
    *,
    segment_id: str | None = None,
) -> ContactRecord:
    """Apply `change` to the contact (by id or address; with `segment_id`, only a member of
    that segment) and commit it with a `contact.updated` webhook, unless nothing changed.
    `change` runs under the lock on the record as it is then, and may raise `ApiError`."""
    async for attempt, current in locked_contact(spool, team_id, id_or_email, segment_id):
        with attempt:
            changed = change(current)
            if changed == current:
                return current
            changed = replace(changed, updated_at=contract_timestamp(now))
            batch = WriteBatch()
            written = put_contact(batch, spool, current, changed, _ms(now), event="contact.updated")
            try:
                await spool.commit(batch)
            except KeyExistsError:
                raise duplicate_contact(changed.email) from None
            return written
    never_after_change()


async def remove_contact(
    spool: Spool, team_id: str, id_or_email: str, now: datetime, *, segment_id: str | None = None
) -> ContactRecord:
    """Delete the contact (with `segment_id`, only a member of it), with `contact.deleted`."""
    async for attempt, current in locked_contact(spool, team_id, id_or_email, segment_id):
        with attempt:
            batch = WriteBatch()
            delete_contact(batch, current, _ms(now))
            await spool.commit(batch)
            return current
    never_after_change()


async def locked_contact(
    spool: Spool, team_id: str, id_or_email: str, segment_id: str | None = None
) -> AsyncIterator[tuple[Attempt, ContactRecord]]:
    """Attempts of a guarded change of the contact (by id or address; with `segment_id`, only a
    member of that segment), each with the contact as it is then: `async for attempt, current
    in locked_contact(...): with attempt: ...` (`Spool.guarded`)."""
    found = find_contact(spool, team_id, id_or_email)
    if found is None or (segment_id is not None and segment_id not in found.segment_ids):
        raise contact_not_found()
    async for attempt in spool.guarded(contact_key(team_id, found.id)):
        current = get_contact(spool, team_id, found.id)
        if current is None:
            attempt.__exit__(None, None, None)
            raise contact_not_found()
        yield attempt, current


async def delete_segment(spool: Spool, segment: SegmentRecord) -> None:
    """Delete the segment for every reader at once; `empty_deleted_segment` then takes its
    members out of it."""
    batch = WriteBatch()
    segments.delete_segment_record(batch, segment)
    await spool.commit(batch)


async def empty_deleted_segment(spool: Spool, segment: SegmentRecord, now: datetime) -> None:
    """Take a deleted segment's members out of it, one commit per chunk of contacts, then
    forget it.

    Members leave guarded by their key and without a webhook. An interruption leaves
    member rows no reader shows, and the deletion noted in the store, so calling this again
    (after a restart: `empty_deleted_segments`) finishes it; two callers at once only wait for
    each other, as each takes a row out only when it is still there.
    """
    team = segment.team_id
    while members := segments.segment_members(
        spool, team, segment.id, after_contact_id=None, limit=SEGMENT_CLEANUP_CHUNK
    ):
        async for attempt in spool.guarded(contact_key(team, contact_id) for contact_id in members):
            with attempt:
                batch = WriteBatch()
                for contact_id in members:
                    contact = get_contact(spool, team, contact_id)
                    if contact is not None and segment.id in contact.segment_ids:
                        kept = [s for s in contact.segment_ids if s != segment.id]
                        left = replace(contact, segment_ids=kept)
                        put_contact(batch, spool, contact, left, _ms(now), event=None)
                    elif segments.is_member(spool, team, segment.id, contact_id):
                        # A row its contact does not list (or a contact gone): only the row goes.
                        segments.remove_member(batch, team, segment.id, contact_id)
                await spool.commit(batch)
    batch = WriteBatch()
    segments.finish_deletion(batch, segment)
    await spool.commit(batch)


async def empty_deleted_segments(spool: Spool, now: datetime) -> None:
    """Finish emptying every segment whose deletion was interrupted."""
    for segment in segments.segments_being_emptied(spool):
        await empty_deleted_segment(spool, segment, now)
