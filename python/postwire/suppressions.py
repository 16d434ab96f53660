"""A team's suppressed addresses as its people change them: add, find, remove, list.

Hard bounces and complaints add addresses on the delivery path; these are the operator's
changes, called by the REST API and the dashboard. Refusals are `ApiError`s.
"""

from __future__ import annotations

from typing import Final

from postwire._core import WriteBatch
from postwire.compose.addresses import parse_mailbox
from postwire.errors import ApiError, validation_error
from postwire.store.deliveries import (
    SUPPRESSIONS,
    SuppressionRecord,
    list_suppressions,
    new_suppression,
    suppression_key,
)
from postwire.store.spool import Spool

ORIGINS: Final = ("bounce", "complaint", "manual")


async def add_suppression(
    spool: Spool, team_id: str, email: object, now_ms: int
) -> SuppressionRecord:
    """Suppress a bare address (`manual`); an address suppressed already keeps its record."""
    mailbox = parse_mailbox(email) if isinstance(email, str) else None
    if mailbox is None or mailbox[0] is not None:
        raise validation_error("The `email` field must be an email address.")
    key = suppression_key(team_id, mailbox[1])
    record = SUPPRESSIONS.get(spool, key)
    if record is None:
        record = new_suppression(mailbox[1], "manual", now_ms)
        batch = WriteBatch()
        SUPPRESSIONS.put(batch, key, record)
        await spool.commit(batch)
    return record


def find_suppression(spool: Spool, team_id: str, id_or_email: str) -> SuppressionRecord:
    """The team's suppression by id or address; 404 `not_found` if none."""
    if "@" in id_or_email:
        record = SUPPRESSIONS.get(spool, suppression_key(team_id, id_or_email))
    else:
        found = (r for r in list_suppressions(spool, team_id) if r.id == id_or_email)
        record = next(found, None)
    if record is None:
        raise ApiError(404, "not_found", "Suppression not found")
    return record


async def remove_suppression(spool: Spool, team_id: str, record: SuppressionRecord) -> None:
    batch = WriteBatch()
    SUPPRESSIONS.delete(batch, suppression_key(team_id, record.email))
    await spool.commit(batch)


def team_suppressions(
    spool: Spool, team_id: str, *, origin: str | None = None, containing: str = ""
) -> list[SuppressionRecord]:
    """The team's suppressions, newest first; only of `origin` if given, only addresses that
    contain `containing` (case-insensitive) if not empty."""
    if origin is not None and origin not in ORIGINS:
        raise validation_error("The `origin` must be `bounce`, `complaint` or `manual`.")
    needle = containing.strip().lower()
    records = [
        record
        for record in reversed(list_suppressions(spool, team_id))
        if (origin is None or record.origin == origin) and needle in record.email
    ]
    records.sort(key=lambda record: record.created_at_ms, reverse=True)
    return records
