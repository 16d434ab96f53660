"""The metrics' counts in the spool's `counters` table: added in the batch of the event they
count, read back a range of buckets at a time (key layout: `postwire.metrics.counters`)."""

from __future__ import annotations

from typing import Any, Final

from postwire._core import WriteBatch
from postwire.metrics.counters import (
    Granularity,
    bucket_label,
    bucket_prefix,
    counter_keys,
    event_counter_names,
    first_engagement_key,
)
from postwire.store.spool import Spool

COUNTERS_TABLE: Final = "counters"
# Keys read per scan of a range: a bucket holds one key per counter name.
_SCAN_CHUNK: Final = 2_000


def count_event(
    batch: WriteBatch,
    team_id: str,
    domain_id: str | None,
    kind: str,
    now_ms: int,
    data: dict[str, Any],
) -> None:
    """Add an event of type `kind` to the team's (and its domain's) counts of this hour and day."""
    for name in event_counter_names(kind, data):
        add_count(batch, team_id, domain_id, name, now_ms)


def add_count(
    batch: WriteBatch, team_id: str, domain_id: str | None, name: str, now_ms: int, delta: int = 1
) -> None:
    if delta:
        for key in counter_keys(team_id, domain_id, now_ms, name):
            batch.add_counter(COUNTERS_TABLE, key, delta)


def count_first_engagement(
    batch: WriteBatch,
    spool: Spool,
    team_id: str,
    domain_id: str | None,
    email_id: str,
    name: str,
    now_ms: int,
) -> None:
    """Count `unique_{name}` (name "opened" | "clicked") if this is the email's first. The
    caller holds the email's record lock, so one writer reads and sets the mark."""
    mark = first_engagement_key(team_id, email_id, name)
    if spool.counter(COUNTERS_TABLE, mark) == 0:
        batch.add_counter(COUNTERS_TABLE, mark, 1)
        add_count(batch, team_id, domain_id, f"unique_{name}", now_ms)


def read_counts(
    spool: Spool,
    team_id: str,
    domain_id: str | None,
    granularity: Granularity,
    first: int,
    end: int,
) -> dict[int, dict[str, int]]:
    """Bucket -> counter name -> count, for buckets `first` <= b < `end` (hours or days since
    the epoch) of the team (`domain_id` None) or of one domain. Buckets with no count are left
    out. One prefix scan, in chunks."""
    prefix = bucket_prefix(team_id, domain_id, granularity).encode()
    stop = prefix + bucket_label(granularity, end).encode()
    # Keys of bucket `first` are `{prefix}{first}/{name}`: all after this cursor.
    cursor = prefix + bucket_label(granularity, first).encode()
    # Labels are fixed width: the bucket and the name are slices of the key, not a parse (this
    # loop is most of the page's time on a long range).
    start, width = len(prefix), len(bucket_label(granularity, 0))
    counts: dict[int, dict[str, int]] = {}
    while True:
        rows = spool.scan(COUNTERS_TABLE, prefix=prefix, cursor=cursor, limit=_SCAN_CHUNK)
        for key, raw in rows:
            if key >= stop:
                return counts
            bucket = int(key[start : start + width])
            row = counts.get(bucket)
            if row is None:
                row = counts[bucket] = {}
            row[key[start + width + 1 :].decode()] = int(raw)
        if len(rows) < _SCAN_CHUNK:
            return counts
        cursor = rows[-1][0]
