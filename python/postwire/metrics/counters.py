"""What the metrics count, and where each count lives in the spool's `counters` table.

Every event of an email adds to counters in the event's own commit (so a crash loses no count
and counts nothing twice), never by scanning emails afterwards. A count is kept per team and
per dimension of the email (its sending domain, its broadcast, each of its tags), per UTC hour
and per UTC day (the day roll-up keeps a long range one short scan), and per name:

    metrics/{team}/h/{hour}/{name}                         the team, all its mail
    metrics/{team}/d/{day}/{name}
    metrics/{team}/domain/{domain}/h/{hour}/{name}         one sending domain
    metrics/{team}/broadcast/{broadcast}/h/{hour}/{name}   one broadcast
    metrics/{team}/tag/{name:value}/h/{hour}/{name}        one tag (or `other`, past the bound)
    ... each with its d/{day}/ twin

    rcpt/{recipient domain}/h/{hour}/{name}                all teams' deliveries to a domain

`hour` is hours since the Unix epoch (7 digits) and `day` days since it (6 digits), zero-padded
so that key order is time order: a range of hours of one scope is one prefix scan. This module
is pure: keys and names, no spool.
"""

from __future__ import annotations

import functools
from typing import Any, Final, Literal, NamedTuple
from urllib.parse import quote

HOUR_MS: Final = 3_600_000
DAY_MS: Final = 24 * HOUR_MS

Granularity = Literal["hour", "day"]
# What a count is kept per besides the team. ("email" names one email's own events, read by
# the API from the email's history: no counter is kept per email.)
Dimension = Literal["domain", "broadcast", "tag", "email"]

# Counter names, in the order pages and the API list them. Delivery outcomes count recipients
# (one event each); `sent` counts emails (the first attempt of each); opens and clicks count
# every event, and their `unique_` twins the first of each email.
COUNTS: Final = (
    "sent",
    "delivered",
    "delivery_delayed",
    "bounced",
    "bounced_permanent",
    "bounced_transient",
    "bounced_undetermined",
    "complained",
    "opened",
    "unique_opened",
    "clicked",
    "unique_clicked",
    "unsubscribed",
    "suppressed",
    "failed",
)

# Event type -> the counter it adds to.
EVENT_COUNTS: Final = {
    "email.sent": "sent",
    "email.delivered": "delivered",
    "email.delivery_delayed": "delivery_delayed",
    "email.bounced": "bounced",
    "email.complained": "complained",
    "email.opened": "opened",
    "email.clicked": "clicked",
}
_BOUNCE_TYPES: Final = ("permanent", "transient", "undetermined")
# Outcomes also counted per recipient domain, across teams (what insights read of a domain).
RECIPIENT_DOMAIN_COUNTS: Final = frozenset(
    {
        "delivered",
        "delivery_delayed",
        "bounced",
        "bounced_permanent",
        "bounced_transient",
        "bounced_undetermined",
    }
)

# Distinct tags (`name:value`) counted per team; the events of an email whose tag comes later
# count under OTHER_TAG. Each counted tag costs two keys per event and hour, so a tag carrying
# an id per email must not grow the table without end.
MAX_COUNTED_TAGS: Final = 1_000
OTHER_TAG: Final = "other"


class Scope(NamedTuple):
    """Which of a team's counts a read selects: all of them (`dimension` None), or those of
    one sending domain, broadcast or tag (`value`: its id, or the tag's `name:value` label)."""

    dimension: Dimension | None = None
    value: str = ""


TEAM: Final = Scope()


def event_counter_names(kind: str, data: dict[str, Any]) -> tuple[str, ...]:
    """The counters one event of type `kind` (with its webhook `data`) adds 1 to: none for an
    event that is not counted, two for a bounce (`bounced` and its type when known)."""
    name = EVENT_COUNTS.get(kind)
    if name is None:
        return ()
    if name == "bounced":
        bounce = data.get("bounce")
        bounce_type = bounce.get("type") if isinstance(bounce, dict) else None
        if not isinstance(bounce_type, str):
            return _UNDETERMINED_BOUNCE
        return _BOUNCE_NAMES.get(bounce_type) or _BOUNCE_NAMES.get(
            bounce_type.lower(), _UNDETERMINED_BOUNCE
        )
    return (name,)


# The names of a bounce by its `bounce.type` (the contract's spelling, or lower case).
_BOUNCE_NAMES: Final = {
    spelling: ("bounced", f"bounced_{bounce_type}")
    for bounce_type in _BOUNCE_TYPES
    for spelling in (bounce_type, bounce_type.capitalize())
}
_UNDETERMINED_BOUNCE: Final = ("bounced", "bounced_undetermined")


def tag_label(name: str, value: object) -> str:
    """A tag as its counts name it: `name:value` (the contract allows letters, digits, `_` and
    `-` only; anything else is escaped so that a key stays one path)."""
    text = "" if value is None else str(value)
    return f"{quote(name, safe='')}:{quote(text, safe='')}"


def hour_of(ms: int) -> int:
    return ms // HOUR_MS


def day_of(ms: int) -> int:
    return ms // DAY_MS


def scope_prefix(team_id: str, scope: Scope) -> str:
    """The keys of a team's counts (all its mail) or of one domain's, broadcast's or tag's."""
    if scope.dimension is None:
        return f"metrics/{team_id}/"
    return f"metrics/{team_id}/{scope.dimension}/{scope.value}/"


def bucket_prefix(team_id: str, scope: Scope, granularity: Granularity) -> str:
    return scope_prefix(team_id, scope) + ("h/" if granularity == "hour" else "d/")


def bucket_label(granularity: Granularity, bucket: int) -> str:
    """A bucket's place in its key: fixed width, so key order is time order."""
    return f"{bucket:07d}" if granularity == "hour" else f"{bucket:06d}"


def counter_keys(
    team_id: str,
    domain_id: str | None,
    now_ms: int,
    name: str,
    broadcast_id: str | None = None,
    tags: tuple[str, ...] = (),
) -> tuple[bytes, ...]:
    """The keys one count at `now_ms` adds to: the team's hour and day, and those of the
    email's domain (unknown for an email spooled before domains were counted), broadcast and
    counted tags."""
    return hour_keys(team_id, domain_id, broadcast_id, tags, hour_of(now_ms), name)


@functools.lru_cache(maxsize=16_384)
def hour_keys(
    team_id: str,
    domain_id: str | None,
    broadcast_id: str | None,
    tags: tuple[str, ...],
    hour: int,
    name: str,
) -> tuple[bytes, ...]:
    # Cached: events come in runs of a few teams, domains and tags within an hour, and
    # formatting the keys afresh was most of the cost of counting an event.
    labels = (("h", bucket_label("hour", hour)), ("d", bucket_label("day", hour // 24)))
    scopes = [TEAM]
    if domain_id:
        scopes.append(Scope("domain", domain_id))
    if broadcast_id:
        scopes.append(Scope("broadcast", broadcast_id))
    scopes.extend(Scope("tag", label) for label in tags)
    return tuple(
        f"{scope_prefix(team_id, scope)}{g}/{label}/{name}".encode()
        for scope in scopes
        for g, label in labels
    )


def recipient_domain_prefix(domain: str) -> str:
    return f"rcpt/{quote(domain.lower(), safe='')}/h/"


@functools.lru_cache(maxsize=16_384)
def recipient_domain_key(domain: str, hour: int, name: str) -> bytes:
    """Where a delivery outcome to `domain` (any team's) is counted, per UTC hour."""
    return f"{recipient_domain_prefix(domain)}{bucket_label('hour', hour)}/{name}".encode()


def recipient_domain_of(address: object) -> str | None:
    """The domain of an event's recipient (`to`), lower case; None when there is none."""
    if not isinstance(address, str):
        return None
    _, at, domain = address.rpartition("@")
    return domain.strip().strip(">").lower() or None if at else None


def first_engagement_key(team_id: str, email_id: str, name: str) -> bytes:
    """Marks that an email was opened (or clicked) before, for the `unique_` counts."""
    return f"metrics/{team_id}/first/{email_id}/{name}".encode()


def counted_tag_key(team_id: str, label: str) -> bytes:
    """Marks a tag as one of the team's counted ones (see MAX_COUNTED_TAGS)."""
    return f"metrics/{team_id}/tagset/{label}".encode()


def counted_tags_prefix(team_id: str) -> bytes:
    return f"metrics/{team_id}/tagset/".encode()


def counted_tag_total_key(team_id: str) -> bytes:
    """How many tags the team has counted so far."""
    return f"metrics/{team_id}/tagtotal".encode()


# The process's switch (`metrics.count_events`), set when the spool opens; off, no event is
# counted (only to measure what counting costs).
_counting = True


def set_event_counting(enabled: bool) -> None:
    global _counting
    _counting = enabled


def event_counting() -> bool:
    return _counting
