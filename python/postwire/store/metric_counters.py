"""The metrics' counts in the spool's `counters` table: added in the batch of the event they
count, read back a range of buckets at a time (key layout: `postwire.metrics.counters`).

Nothing is added while `metrics.count_events` is off (`event_counting()`)."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Final

from postwire._core import WriteBatch
from postwire.metrics.counters import (
    HOUR_MS,
    MAX_COUNTED_TAGS,
    OTHER_TAG,
    RECIPIENT_DOMAIN_COUNTS,
    Granularity,
    Scope,
    bucket_label,
    bucket_prefix,
    counted_tag_key,
    counted_tag_total_key,
    counted_tags_prefix,
    counter_keys,
    event_counter_names,
    event_counting,
    first_engagement_key,
    hour_keys,
    recipient_domain_key,
    recipient_domain_of,
    recipient_domain_prefix,
    tag_label,
)
from postwire.store.broadcasts import get_contact_outcome
from postwire.store.emails import EMAILS, email_key
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
    *,
    broadcast_id: str | None = None,
    tags: tuple[str, ...] = (),
) -> None:
    """Add an event of type `kind` to the counts of this hour and day of the team and of the
    email's domain, broadcast and counted tags (`counted_tags`); a delivery outcome also to
    its recipient's domain's."""
    if not event_counting():
        return
    names = event_counter_names(kind, data)
    if not names:
        return
    hour = now_ms // HOUR_MS
    add = batch.add_counter
    for name in names:
        for key in hour_keys(team_id, domain_id, broadcast_id, tags, hour, name):
            add(COUNTERS_TABLE, key, 1)
    if names[0] in RECIPIENT_DOMAIN_COUNTS:
        recipient_domain = recipient_domain_of(data.get("to"))
        if recipient_domain is not None:
            for name in names:
                add(COUNTERS_TABLE, recipient_domain_key(recipient_domain, hour, name), 1)


def add_count(
    batch: WriteBatch,
    team_id: str,
    domain_id: str | None,
    name: str,
    now_ms: int,
    delta: int = 1,
    *,
    broadcast_id: str | None = None,
    tags: tuple[str, ...] = (),
) -> None:
    """Add `delta` to counter `name` of the team and of the email's dimensions."""
    if delta and event_counting():
        for key in counter_keys(team_id, domain_id, now_ms, name, broadcast_id, tags):
            batch.add_counter(COUNTERS_TABLE, key, delta)


def count_first_engagement(
    batch: WriteBatch,
    spool: Spool,
    team_id: str,
    domain_id: str | None,
    email_id: str,
    name: str,
    now_ms: int,
    *,
    broadcast_id: str | None = None,
    tags: tuple[str, ...] = (),
) -> None:
    """Count `unique_{name}` (name "opened" | "clicked") if this is the email's first. The
    caller holds the email's guard, so one writer reads and sets the mark."""
    if not event_counting():
        return
    mark = first_engagement_key(team_id, email_id, name)
    if spool.counter(COUNTERS_TABLE, mark) == 0:
        batch.add_counter(COUNTERS_TABLE, mark, 1)
        add_count(
            batch, team_id, domain_id, f"unique_{name}", now_ms,
            broadcast_id=broadcast_id, tags=tags,
        )  # fmt: skip


def count_unsubscribed(
    batch: WriteBatch, spool: Spool, team_id: str, broadcast_id: str, contact_id: str, now_ms: int
) -> None:
    """Count `unsubscribed` for a contact who left through a broadcast's link (once per
    contact and broadcast: the caller checks), on the team, the broadcast and the domain and
    tags of the email it received (when that email is still kept)."""
    if not event_counting():
        return
    outcome = get_contact_outcome(spool, team_id, broadcast_id, contact_id)
    email = None
    if outcome is not None and outcome.email_id is not None:
        email = EMAILS.get(spool, email_key(team_id, outcome.email_id))
    domain_id = None if email is None else email.domain_id
    tags = () if email is None else counted_tags(spool, team_id, email.tags)
    add_count(
        batch, team_id, domain_id, "unsubscribed", now_ms, broadcast_id=broadcast_id, tags=tags
    )


# --- tags ---------------------------------------------------------------------------------------

# Per spool: counted-tag marks already seen (they are never removed, so a hit stays true),
# and the teams found at their bound. Keyed weakly by the spool: tests open many.
_known_tags: weakref.WeakKeyDictionary[Spool, set[bytes]] = weakref.WeakKeyDictionary()
_full_teams: weakref.WeakKeyDictionary[Spool, set[str]] = weakref.WeakKeyDictionary()
_admitted: weakref.WeakKeyDictionary[Spool, dict[str, int]] = weakref.WeakKeyDictionary()


def admit_tags(
    batch: WriteBatch, spool: Spool, team_id: str, tags: Iterable[Mapping[str, Any]]
) -> tuple[str, ...]:
    """The labels an email's events count under (for its DeliveryRecord): each tag the team
    counts already, each new one while the team counts fewer than MAX_COUNTED_TAGS (marked
    counted in `batch`, the email's commit), and OTHER_TAG for the rest. Two processes
    admitting new tags at once may each take the last places, so a team may end a few over."""
    if not event_counting():
        return ()
    labels: list[str] = []
    known = _known_tags.setdefault(spool, set())
    for tag in tags:
        label = tag_label(str(tag.get("name", "")), tag.get("value"))
        key = counted_tag_key(team_id, label)
        if key in known or spool.counter(COUNTERS_TABLE, key) > 0:
            known.add(key)
            labels.append(label)
        elif _take_place(spool, team_id):
            batch.add_counter(COUNTERS_TABLE, key, 1)
            batch.add_counter(COUNTERS_TABLE, counted_tag_total_key(team_id), 1)
            known.add(key)  # taken now, so a second email of this batch does not add it again
            labels.append(label)
        else:
            labels.append(OTHER_TAG)
    return tuple(dict.fromkeys(labels))


def counted_tags(spool: Spool, team_id: str, tags: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The labels an email's events count under, for events recorded without its delivery
    record (opens, clicks, reports, unsubscribes): as `admit_tags` decided when it was sent."""
    if not event_counting():
        return ()
    known = _known_tags.setdefault(spool, set())
    labels: list[str] = []
    for tag in tags:
        label = tag_label(str(tag.get("name", "")), tag.get("value"))
        key = counted_tag_key(team_id, label)
        if key in known or spool.counter(COUNTERS_TABLE, key) > 0:
            known.add(key)
            labels.append(label)
        else:
            labels.append(OTHER_TAG)
    return tuple(dict.fromkeys(labels))


def _take_place(spool: Spool, team_id: str) -> bool:
    """Take a place for one more of the team's tags if one is left: the total on disk (or
    this process's own admissions, when more: some may not be committed yet) is under the
    bound."""
    full = _full_teams.setdefault(spool, set())
    if team_id in full:
        return False
    admitted = _admitted.setdefault(spool, {})
    total = max(
        spool.counter(COUNTERS_TABLE, counted_tag_total_key(team_id)), admitted.get(team_id, 0)
    )
    if total >= MAX_COUNTED_TAGS:
        full.add(team_id)  # the bound never moves back: no more reads for this team
        return False
    admitted[team_id] = admitted.get(team_id, 0) + 1
    return True


def tags_at_bound(spool: Spool, team_id: str) -> bool:
    """Whether the team counts as many tags as it may: newer ones count under OTHER_TAG."""
    return spool.counter(COUNTERS_TABLE, counted_tag_total_key(team_id)) >= MAX_COUNTED_TAGS


async def tags_at_bound_parked(spool: Spool, team_id: str) -> bool:
    """`tags_at_bound`, parked rather than blocking on a table store on the network."""
    counted = await spool.acounter(COUNTERS_TABLE, counted_tag_total_key(team_id))
    return counted >= MAX_COUNTED_TAGS


def list_counted_tags(spool: Spool, team_id: str, limit: int = MAX_COUNTED_TAGS) -> list[str]:
    """The tags the team's counts are kept for, in label order (`name:value`)."""
    prefix = counted_tags_prefix(team_id)
    rows = spool.scan(COUNTERS_TABLE, prefix=prefix, limit=limit)
    return [key[len(prefix) :].decode() for key, _ in rows]


async def list_counted_tags_parked(
    spool: Spool, team_id: str, limit: int = MAX_COUNTED_TAGS
) -> list[str]:
    """`list_counted_tags`, parked rather than blocking on a table store on the network."""
    prefix = counted_tags_prefix(team_id)
    rows = await spool.ascan(COUNTERS_TABLE, prefix=prefix, limit=limit)
    return [key[len(prefix) :].decode() for key, _ in rows]


# --- reading ------------------------------------------------------------------------------------


def read_counts(
    spool: Spool,
    team_id: str,
    scope: Scope,
    granularity: Granularity,
    first: int,
    end: int,
) -> dict[int, dict[str, int]]:
    """Bucket -> counter name -> count, for buckets `first` <= b < `end` (hours or days since
    the epoch) of the team's counts in `scope`. Buckets with no count are left out."""
    prefix = bucket_prefix(team_id, scope, granularity).encode()
    return _read_buckets(spool, prefix, bucket_label(granularity, 0), first, end)


async def read_counts_parked(
    spool: Spool, team_id: str, scope: Scope, granularity: Granularity, first: int, end: int
) -> dict[int, dict[str, int]]:
    """`read_counts`, parked rather than blocking on a table store on the network."""
    prefix = bucket_prefix(team_id, scope, granularity).encode()
    walk = _BucketWalk(prefix, bucket_label(granularity, 0), first, end)
    while not walk.done:
        walk.take(
            await spool.ascan(
                COUNTERS_TABLE, prefix=walk.prefix, cursor=walk.cursor, limit=_SCAN_CHUNK
            )
        )
    return walk.counts


def read_recipient_domain_counts(
    spool: Spool, domain: str, first_hour: int, end_hour: int
) -> dict[str, int]:
    """Counter name -> count of every team's delivery outcomes to recipients at `domain`
    (delivered, delivery_delayed, bounced and its bounced_{type} twins) over the UTC hours
    `first_hour` <= h < `end_hour` (hours since the epoch: `metrics.counters.hour_of(ms)`).
    Names with no count are left out."""
    prefix = recipient_domain_prefix(domain).encode()
    totals: dict[str, int] = {}
    for row in _read_buckets(spool, prefix, bucket_label("hour", 0), first_hour, end_hour).values():
        for name, value in row.items():
            totals[name] = totals.get(name, 0) + value
    return totals


def _read_buckets(
    spool: Spool, prefix: bytes, zero_label: str, first: int, end: int
) -> dict[int, dict[str, int]]:
    """One prefix scan, in chunks, of `{prefix}{bucket}/{name}` keys for first <= bucket < end."""
    walk = _BucketWalk(prefix, zero_label, first, end)
    while not walk.done:
        walk.take(spool.scan(COUNTERS_TABLE, prefix=prefix, cursor=walk.cursor, limit=_SCAN_CHUNK))
    return walk.counts


class _BucketWalk:
    """The chunks of a bucket scan and the counts they hold (`_read_buckets`)."""

    def __init__(self, prefix: bytes, zero_label: str, first: int, end: int) -> None:
        self.prefix = prefix
        self.width = len(zero_label)
        self.stop = prefix + f"{end:0{self.width}d}".encode()
        # Keys of bucket `first` are `{prefix}{first}/{name}`: all after this cursor.
        self.cursor = prefix + f"{first:0{self.width}d}".encode()
        self.counts: dict[int, dict[str, int]] = {}
        self.done = False

    def take(self, rows: list[tuple[bytes, bytes]]) -> None:
        # Labels are fixed width: the bucket and the name are slices of the key, not a parse
        # (this loop is most of the page's time on a long range).
        start, width, counts = len(self.prefix), self.width, self.counts
        for key, raw in rows:
            if key >= self.stop:
                self.done = True
                return
            bucket = int(key[start : start + width])
            row = counts.get(bucket)
            if row is None:
                row = counts[bucket] = {}
            row[key[start + width + 1 :].decode()] = int(raw)
        self.done = len(rows) < _SCAN_CHUNK
        if rows:
            self.cursor = rows[-1][0]
