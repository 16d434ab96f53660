"""Finding a team's segment, topic or contact property by the id a request names: another
team's id, a missing one and text that is no id at all are the same 404."""

from __future__ import annotations

import re
from typing import Final

from postwire.errors import ApiError
from postwire.store.contact_properties import (
    ContactPropertyRecord,
    get_property,
    get_property_parked,
)
from postwire.store.segments import SegmentRecord, get_segment, get_segment_parked
from postwire.store.spool import Spool
from postwire.store.topics import TopicRecord, get_topic, get_topic_parked

# Every id Postwire hands out is a UUID; anything else names nothing.
_ID: Final = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def is_record_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None


def not_found(noun: str) -> ApiError:
    return ApiError(404, "not_found", f"{noun} not found")


def require_segment(
    spool: Spool, team_id: str, segment_id: str, noun: str = "Segment"
) -> SegmentRecord:
    segment = get_segment(spool, team_id, segment_id) if is_record_id(segment_id) else None
    if segment is None:
        raise not_found(noun)
    return segment


async def require_segment_parked(
    spool: Spool, team_id: str, segment_id: str, noun: str = "Segment"
) -> SegmentRecord:
    """`require_segment` with a parked read."""
    found = (
        await get_segment_parked(spool, team_id, segment_id) if is_record_id(segment_id) else None
    )
    if found is None:
        raise not_found(noun)
    return found


def require_topic(spool: Spool, team_id: str, topic_id: str) -> TopicRecord:
    topic = get_topic(spool, team_id, topic_id) if is_record_id(topic_id) else None
    if topic is None:
        raise not_found("Topic")
    return topic


async def require_topic_parked(spool: Spool, team_id: str, topic_id: str) -> TopicRecord:
    """`require_topic` with a parked read."""
    topic = await get_topic_parked(spool, team_id, topic_id) if is_record_id(topic_id) else None
    if topic is None:
        raise not_found("Topic")
    return topic


def require_property(spool: Spool, team_id: str, property_id: str) -> ContactPropertyRecord:
    prop = get_property(spool, team_id, property_id) if is_record_id(property_id) else None
    if prop is None:
        raise not_found("Contact property")
    return prop


async def require_property_parked(
    spool: Spool, team_id: str, property_id: str
) -> ContactPropertyRecord:
    """`require_property` with a parked read."""
    found = (
        await get_property_parked(spool, team_id, property_id)
        if is_record_id(property_id)
        else None
    )
    if found is None:
        raise not_found("Contact property")
    return found
