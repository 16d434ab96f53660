"""A team's suppressed addresses as its people change them: add, find, remove, list.

Hard bounces and complaints add addresses on the delivery path; these are the operator's
changes, called by the REST API and the dashboard. Refusals are `ApiError`s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from postwire._core import WriteBatch
from postwire.compose.addresses import parse_mailbox
from postwire.errors import ApiError, KeyExistsError, validation_error
from postwire.store.deliveries import (
    SUPPRESSIONS,
    SuppressionRecord,
    list_suppressions,
    list_suppressions_parked,
    new_suppression,
    suppression_key,
)
from postwire.store.spool import Spool

ORIGINS: Final = ("bounce", "complaint", "manual")
# Addresses or ids one call of /suppressions/batch/add or /batch/remove may name (contract 15).
MAX_BATCH: Final = 100


async def add_suppression(
    spool: Spool, team_id: str, email: object, now_ms: int
) -> SuppressionRecord:
    """Suppress a bare address (`manual`); an address suppressed already keeps its record."""
    address = _bare_address(email, "The `email` field must be an email address.")
    (record,) = await _suppress(spool, team_id, [address], now_ms)
    return record


async def add_suppressions(
    spool: Spool, team_id: str, emails: object, now_ms: int
) -> list[SuppressionRecord]:
    """Suppress up to `MAX_BATCH` bare addresses in one commit, each once (an address repeated,
    in any case, counts once; one suppressed already keeps its record), in the order given.
    Nothing is added when one of them is not an address."""
    items = _batch_list(emails, "emails")
    addresses: dict[str, None] = {}
    for index, email in enumerate(items):
        message = f"The `emails` item at index {index} must be an email address."
        addresses[_bare_address(email, message).lower()] = None
    return await _suppress(spool, team_id, list(addresses), now_ms)


async def _suppress(
    spool: Spool, team_id: str, addresses: Sequence[str], now_ms: int
) -> list[SuppressionRecord]:
    """The records of `addresses`, adding those missing. Each is inserted: when another
    request (of any process) adds one of them meanwhile, the batch fails and is made again,
    so every caller answers the id that was kept."""
    while True:
        records: list[SuppressionRecord] = []
        batch = WriteBatch()
        for address in addresses:
            key = suppression_key(team_id, address)
            record = SUPPRESSIONS.get(spool, key)
            if record is None:
                record = new_suppression(address, "manual", now_ms)
                SUPPRESSIONS.insert(batch, key, record)
            records.append(record)
        if len(batch):
            try:
                await spool.commit(batch)
            except KeyExistsError:
                continue
        return records


async def remove_suppressions(
    spool: Spool, team_id: str, body: dict[str, object]
) -> list[SuppressionRecord]:
    """Remove up to `MAX_BATCH` suppressions named by address (`emails`) or by id (`ids`),
    never both, in one commit; the records removed (a name that is not suppressed is skipped)."""
    if ("emails" in body) == ("ids" in body):
        raise validation_error("Provide either `emails` or `ids`, but not both.")
    field = "emails" if "emails" in body else "ids"
    wanted = {str(item).strip().lower() for item in _batch_list(body[field], field)}
    records = [
        record
        for record in list_suppressions(spool, team_id)
        if (record.email if field == "emails" else record.id) in wanted
    ]
    if records:
        batch = WriteBatch()
        for record in records:
            SUPPRESSIONS.delete(batch, suppression_key(team_id, record.email))
        await spool.commit(batch)
    return records


def _bare_address(value: object, message: str) -> str:
    mailbox = parse_mailbox(value) if isinstance(value, str) else None
    if mailbox is None or mailbox[0] is not None:
        raise validation_error(message)
    return mailbox[1]


def _batch_list(value: object, field: str) -> list[object]:
    if value is None:
        raise ApiError(422, "missing_required_field", f"Missing `{field}` field.")
    if not isinstance(value, list) or not value:
        raise validation_error(f"The `{field}` field must be a non-empty array.")
    if len(value) > MAX_BATCH:
        raise validation_error(
            f"The `{field}` field must contain at most {MAX_BATCH} items, got {len(value)}."
        )
    if not all(isinstance(item, str) for item in value):
        raise validation_error(f"Every item of the `{field}` field must be a string.")
    return value


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
    _check_origin(origin)
    return _newest_matching(list_suppressions(spool, team_id), origin, containing)


async def team_suppressions_parked(
    spool: Spool, team_id: str, *, origin: str | None = None, containing: str = ""
) -> list[SuppressionRecord]:
    """`team_suppressions`, parked rather than blocking on a table store on the network."""
    _check_origin(origin)
    return _newest_matching(await list_suppressions_parked(spool, team_id), origin, containing)


def _check_origin(origin: str | None) -> None:
    if origin is not None and origin not in ORIGINS:
        raise validation_error("The `origin` must be `bounce`, `complaint` or `manual`.")


def _newest_matching(
    stored: list[SuppressionRecord], origin: str | None, containing: str
) -> list[SuppressionRecord]:
    needle = containing.strip().lower()
    records = [
        record
        for record in reversed(stored)
        if (origin is None or record.origin == origin) and needle in record.email
    ]
    records.sort(key=lambda record: record.created_at_ms, reverse=True)
    return records
