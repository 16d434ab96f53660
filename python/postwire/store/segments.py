"""Segments (audiences are their deprecated name) and who belongs to each.

A segment's members are keys `{team}/{segment}/{contact}` in `segment_members`, written in the
commit that changes the contact's `segment_ids` (`store.contacts.put_contact`), so a broadcast
walks a segment of any size in key order with a cursor and never loads it. The number of
members is a counter kept in the same commits, read without a scan.
"""

from __future__ import annotations

from dataclasses import dataclass

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table
from postwire.store.team_records import TeamRecords, team_key

COUNTERS_TABLE = "counters"


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    id: str
    team_id: str
    name: str
    created_at: str  # store.accounts.contract_timestamp


@dataclass(frozen=True, slots=True)
class SegmentMember:
    """One contact in one segment; the key says which."""

    added_at_ms: int = 0


SEGMENTS = Table("segments", SegmentRecord)
SEGMENT_MEMBERS = Table("segment_members", SegmentMember)
# Deleted segments whose members are still being taken out of them, under their old key.
SEGMENT_DELETIONS = Table("segment_deletions", SegmentRecord)
_SEGMENTS: TeamRecords[SegmentRecord] = TeamRecords(SEGMENTS)


def segment_lock_key(team_id: str, segment_id: str) -> str:
    """Held while a segment is renamed or deleted, so a rename cannot bring a deleted one back."""
    return f"segments/{team_id}/{segment_id}"


def members_prefix(team_id: str, segment_id: str) -> str:
    return f"{team_id}/{segment_id}/"


def member_key(team_id: str, segment_id: str, contact_id: str) -> str:
    return f"{team_id}/{segment_id}/{contact_id}"


def member_count_key(team_id: str, segment_id: str) -> bytes:
    return f"segment/{team_id}/{segment_id}/members".encode()


def get_segment(spool: Spool, team_id: str, segment_id: str) -> SegmentRecord | None:
    return _SEGMENTS.get(spool, team_id, segment_id)


async def get_segment_parked(spool: Spool, team_id: str, segment_id: str) -> SegmentRecord | None:
    return await _SEGMENTS.aget(spool, team_id, segment_id)


def put_segment(batch: WriteBatch, segment: SegmentRecord) -> None:
    _SEGMENTS.put(batch, segment)


def segment_members(
    spool: Spool, team_id: str, segment_id: str, *, after_contact_id: str | None, limit: int
) -> list[str]:
    """Up to `limit` contact ids of the segment, in key order, after `after_contact_id`."""
    prefix = members_prefix(team_id, segment_id)
    cursor = None if after_contact_id is None else prefix + after_contact_id
    rows = SEGMENT_MEMBERS.scan(spool, prefix=prefix, cursor=cursor, limit=limit)
    return [key[len(prefix) :] for key, _ in rows]


async def segment_members_parked(
    spool: Spool, team_id: str, segment_id: str, *, after_contact_id: str | None, limit: int
) -> list[str]:
    """`segment_members`, parked rather than blocking on a table store on the network."""
    prefix = members_prefix(team_id, segment_id)
    cursor = None if after_contact_id is None else prefix + after_contact_id
    rows = await SEGMENT_MEMBERS.ascan(spool, prefix=prefix, cursor=cursor, limit=limit)
    return [key[len(prefix) :] for key, _ in rows]


def is_member(spool: Spool, team_id: str, segment_id: str, contact_id: str) -> bool:
    return SEGMENT_MEMBERS.get(spool, member_key(team_id, segment_id, contact_id)) is not None


def segment_member_count(spool: Spool, team_id: str, segment_id: str) -> int:
    return spool.counter(COUNTERS_TABLE, member_count_key(team_id, segment_id))


async def segment_member_count_parked(spool: Spool, team_id: str, segment_id: str) -> int:
    """`segment_member_count`, parked rather than blocking on a table store on the network."""
    return await spool.acounter(COUNTERS_TABLE, member_count_key(team_id, segment_id))


def add_member(
    batch: WriteBatch, team_id: str, segment_id: str, contact_id: str, now_ms: int
) -> None:
    """Put the contact in the segment and count it; the caller knows it was not a member."""
    SEGMENT_MEMBERS.put(batch, member_key(team_id, segment_id, contact_id), SegmentMember(now_ms))
    batch.add_counter(COUNTERS_TABLE, member_count_key(team_id, segment_id), 1)


def remove_member(batch: WriteBatch, team_id: str, segment_id: str, contact_id: str) -> None:
    """Take the contact out of the segment and uncount it; the caller knows it was a member."""
    SEGMENT_MEMBERS.delete(batch, member_key(team_id, segment_id, contact_id))
    batch.add_counter(COUNTERS_TABLE, member_count_key(team_id, segment_id), -1)


def delete_segment_record(batch: WriteBatch, segment: SegmentRecord) -> None:
    """Remove the segment, and note it as being emptied: its member rows (and their counter,
    which stays in step with them) and the contacts' `segment_ids` are cleaned up after, in
    bounded commits (`audiences.contacts.empty_deleted_segment`), resumed after a restart;
    until then readers skip ids whose segment is gone."""
    _SEGMENTS.delete(batch, segment)
    SEGMENT_DELETIONS.put(batch, team_key(segment.team_id, segment.id), segment)


def segments_being_emptied(spool: Spool, *, limit: int = 1000) -> list[SegmentRecord]:
    return [segment for _, segment in SEGMENT_DELETIONS.scan(spool, limit=limit)]


def finish_deletion(batch: WriteBatch, segment: SegmentRecord) -> None:
    """Forget a deleted segment once no member row of it is left, with its counter."""
    SEGMENT_DELETIONS.delete(batch, team_key(segment.team_id, segment.id))
    batch.delete(COUNTERS_TABLE, member_count_key(segment.team_id, segment.id))
