"""Changes of a broadcast, shared by the REST API and the dashboard: create a draft, update it,
send it now or schedule it, cancel, delete, duplicate.

Every change is a read-modify-commit guarded by the broadcast's key, which the engine takes
too before it commits a page: a cancel or an update never races a page of the walk. Refusals
are `ApiError`s in the contract's shapes; the dashboard shows their messages in plain words.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from postwire import _core
from postwire._core import WriteBatch
from postwire.accept import Acceptor
from postwire.broadcasts.messages import parse_sender
from postwire.broadcasts.rules import refusal, status_after_cancel
from postwire.errors import ApiError, validation_error
from postwire.store.accounts import ApiKeyRecord, contract_timestamp
from postwire.store.broadcast_documents import delete_document, get_document, put_document
from postwire.store.broadcasts import (
    BroadcastRecord,
    broadcast_key,
    delete_broadcast,
    get_broadcast,
    get_broadcast_parked,
    put_broadcast,
    set_due,
)
from postwire.store.segments import get_segment
from postwire.store.spool import Spool
from postwire.store.topics import get_topic

# Every id Postwire hands out is a UUID; anything else names no record (and is never a key).
_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

# When a send is due, given the time now: None sends at once. Called after the broadcast's
# status is checked, so a refused status is the refusal a person sees first.
Schedule = Callable[[datetime], datetime | None]


def send_now(_: datetime) -> datetime | None:
    return None


def looks_like_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class Change:
    record: BroadcastRecord  # as read under its lock
    batch: WriteBatch


@dataclass(frozen=True, slots=True)
class BroadcastDrafts:
    """The broadcasts of every team, changed through the rules above. `key`, where a method
    takes one, is the API key making the change (None from the dashboard): a key restricted
    to a domain may only send from it."""

    spool: Spool
    acceptor: Acceptor

    def find(self, team_id: str, broadcast_id: str) -> BroadcastRecord:
        record = None
        if looks_like_id(broadcast_id):
            record = get_broadcast(self.spool, team_id, broadcast_id.lower())
        return _found(record)

    async def find_parked(self, team_id: str, broadcast_id: str) -> BroadcastRecord:
        """`find`, parked rather than blocking on a table store on the network."""
        record = None
        if looks_like_id(broadcast_id):
            record = await get_broadcast_parked(self.spool, team_id, broadcast_id.lower())
        return _found(record)

    def check_references(self, team_id: str, fields: Mapping[str, Any]) -> None:
        """The segment and topic `fields` name are the team's (else 404). A draft's segment may
        be "" (the dashboard's "Choose later": the API always names one); sending refuses it."""
        segment = fields.get("segment_id")
        if segment and get_segment(self.spool, team_id, segment) is None:
            raise ApiError(404, "not_found", "Segment not found")
        topic = fields.get("topic_id")
        if topic is not None and get_topic(self.spool, team_id, topic) is None:
            raise ApiError(404, "not_found", "Topic not found")

    def check_sendable(self, record: BroadcastRecord, key: ApiKeyRecord | None) -> None:
        """It has content, its segment and topic exist, and its sender may send (the 403)."""
        if not record.html and not record.text:
            raise ApiError(422, "missing_required_field", "Missing `html` or `text` field")
        if not record.segment_id:
            raise ApiError(422, "missing_required_field", "Missing `segment_id` field")
        self.check_references(
            record.team_id, {"segment_id": record.segment_id, "topic_id": record.topic_id}
        )
        sender_domain = parse_sender(record.sender)[1].rpartition("@")[2].lower()
        self.acceptor.sending_domain(record.team_id, key, sender_domain)

    def ready_to_send(
        self,
        record: BroadcastRecord,
        schedule: Schedule,
        now: datetime,
        key: ApiKeyRecord | None,
    ) -> BroadcastRecord:
        """The record queued (or scheduled) to send; refused as `/emails` would refuse its mail."""
        moment = schedule(now)
        self.check_sendable(record, key)
        due = moment or now
        return replace(
            record,
            status="queued" if moment is None else "scheduled",
            scheduled_at=None if moment is None else contract_timestamp(moment),
            due_at_ms=int(due.timestamp() * 1000),
        )

    async def create(
        self,
        team_id: str,
        fields: Mapping[str, Any],
        now: datetime,
        *,
        send: bool = False,
        schedule: Schedule = send_now,
        key: ApiKeyRecord | None = None,
    ) -> BroadcastRecord:
        """A new broadcast of `fields` (by `BroadcastRecord` field name): a draft, or sent."""
        self.check_references(team_id, fields)
        record = BroadcastRecord(
            id=_core.new_id(), team_id=team_id, created_at=contract_timestamp(now), **fields
        )
        batch = WriteBatch()
        if send:
            record = self.ready_to_send(record, schedule, now, key)
            set_due(batch, replace(record, due_at_ms=None), record.due_at_ms)
        put_broadcast(batch, record)
        await self.spool.commit(batch)
        return record

    @asynccontextmanager
    async def changing(self, team_id: str, broadcast_id: str, action: str) -> AsyncIterator[Change]:
        """The broadcast read guarded by its key, `action` allowed in its status; what the
        block adds to the change's batch commits when it ends."""
        record = self.find(team_id, broadcast_id)
        async for attempt in self.spool.guarded(broadcast_key(record.team_id, record.id)):
            with attempt:
                record = self.find(team_id, broadcast_id)
                problem = refusal(record.status, action)
                if problem is not None:
                    raise validation_error(problem)
                change = Change(record, WriteBatch())
                yield change
                await self.spool.commit(change.batch)

    async def update(
        self,
        team_id: str,
        broadcast_id: str,
        fields: Mapping[str, Any],
        key: ApiKeyRecord | None = None,
    ) -> BroadcastRecord:
        self.check_references(team_id, fields)
        async with self.changing(team_id, broadcast_id, "update") as change:
            updated = replace(change.record, **fields)
            if updated.status == "scheduled":  # it will be sent as it now is
                self.check_sendable(updated, key)
            put_broadcast(change.batch, updated)
        return updated

    async def delete(self, team_id: str, broadcast_id: str) -> BroadcastRecord:
        async with self.changing(team_id, broadcast_id, "delete") as change:
            delete_broadcast(change.batch, change.record)
            delete_document(change.batch, change.record.team_id, change.record.id)
        return change.record

    async def send(
        self,
        team_id: str,
        broadcast_id: str,
        now: datetime,
        *,
        schedule: Schedule = send_now,
        key: ApiKeyRecord | None = None,
        check: Callable[[BroadcastRecord], Awaitable[None]] | None = None,
    ) -> BroadcastRecord:
        """Queue the broadcast now, or schedule it for `schedule(now)`. `check` (the dashboard's
        checklist) sees the broadcast guarded by its key, which document saves take too, so
        what it passes is what is sent; it raises to refuse."""
        async with self.changing(team_id, broadcast_id, "send") as change:
            if check is not None:
                await check(change.record)
            sent = self.ready_to_send(change.record, schedule, now, key)
            set_due(change.batch, change.record, sent.due_at_ms)
            put_broadcast(change.batch, sent)
        return sent

    async def cancel(self, team_id: str, broadcast_id: str, now: datetime) -> BroadcastRecord:
        """A scheduled broadcast becomes a draft again; a queued or sending one stops."""
        async with self.changing(team_id, broadcast_id, "cancel") as change:
            record = change.record
            status = status_after_cancel(record.status)
            updated = replace(record, status=status, due_at_ms=None)
            if status == "draft":
                updated = replace(updated, scheduled_at=None)
            else:
                updated = replace(updated, finished_at=contract_timestamp(now))
            set_due(change.batch, record, None)
            put_broadcast(change.batch, updated)
        return updated

    async def duplicate(self, team_id: str, broadcast_id: str, now: datetime) -> BroadcastRecord:
        """A new draft with the broadcast's content, and its block document if it has one."""
        source = self.find(team_id, broadcast_id)
        copy = BroadcastRecord(
            id=_core.new_id(),
            team_id=source.team_id,
            segment_id=source.segment_id,
            sender=source.sender,
            subject=source.subject,
            created_at=contract_timestamp(now),
            name=f"{source.name} (copy)" if source.name else "",
            reply_to=source.reply_to,
            html=source.html,
            text=source.text,
            preview_text=source.preview_text,
            topic_id=source.topic_id,
        )
        batch = WriteBatch()
        put_broadcast(batch, copy)
        document = get_document(self.spool, source.team_id, source.id)
        if document is not None:
            stamp = contract_timestamp(now)
            put_document(
                batch, replace(document, broadcast_id=copy.id, revision=1, updated_at=stamp)
            )
        await self.spool.commit(batch)
        return copy


def _found(record: BroadcastRecord | None) -> BroadcastRecord:
    if record is None:
        raise ApiError(404, "not_found", "Broadcast not found")
    return record
