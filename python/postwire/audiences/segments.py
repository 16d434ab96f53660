"""Creating, renaming and deleting segments: the rules and writes the REST API and the
dashboard share. A deleted segment's members leave it after the answer
(`contacts.empty_deleted_segment`), which the caller runs in the background."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from postwire import _core
from postwire._core import WriteBatch
from postwire.audiences.contact_rules import MAX_SEGMENT_NAME, required_text
from postwire.audiences.contacts import delete_segment
from postwire.audiences.records import require_segment
from postwire.errors import validation_error
from postwire.store.accounts import contract_timestamp
from postwire.store.segments import SegmentRecord, put_segment, segment_lock_key
from postwire.store.spool import Spool


async def create_segment(
    spool: Spool, team_id: str, body: Mapping[str, Any], now: datetime
) -> SegmentRecord:
    """A new segment named by `body["name"]`; filters are refused (segments hold the contacts
    added to them)."""
    name = required_text(body, "name", MAX_SEGMENT_NAME)
    if body.get("filter"):
        raise validation_error(
            "Segment filters are not supported: add contacts to the segment instead."
        )
    segment = SegmentRecord(_core.new_id(), team_id, name, contract_timestamp(now))
    batch = WriteBatch()
    put_segment(batch, segment)
    await spool.commit(batch)
    return segment


async def rename_segment(
    spool: Spool, team_id: str, segment_id: str, body: Mapping[str, Any]
) -> SegmentRecord:
    name = required_text(body, "name", MAX_SEGMENT_NAME)
    async for attempt in spool.guarded(segment_lock_key(team_id, segment_id)):
        with attempt:
            segment = replace(require_segment(spool, team_id, segment_id), name=name)
            batch = WriteBatch()
            put_segment(batch, segment)
            await spool.commit(batch)
    return segment


async def remove_segment(
    spool: Spool, team_id: str, segment_id: str, noun: str = "Segment"
) -> SegmentRecord:
    """Delete the segment for every reader at once; the caller then empties it in the
    background with `contacts.empty_deleted_segment`."""
    async for attempt in spool.guarded(segment_lock_key(team_id, segment_id)):
        with attempt:
            segment = require_segment(spool, team_id, segment_id, noun)
            await delete_segment(spool, segment)
    return segment
