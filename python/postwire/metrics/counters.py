"""What the metrics count, and where each count lives in the spool's `counters` table.

Every event of an email adds to counters in the event's own commit (so a crash loses no count
and counts nothing twice), never by scanning emails afterwards. A count is kept per team and
per sending domain, per UTC hour and per UTC day (the day roll-up keeps a long range one short
scan), and per name:

    metrics/{team}/h/{hour}/{name}                   the team, all its domains
    metrics/{team}/d/{day}/{name}
    metrics/{team}/domain/{domain}/h/{hour}/{name}   one sending domain
    metrics/{team}/domain/{domain}/d/{day}/{name}

`hour` is hours since the Unix epoch (7 digits) and `day` days since it (6 digits), zero-padded
so that key order is time order: a range of hours of a team, or of one domain, is one prefix
scan. This module is pure: keys and names, no spool.
"""

from __future__ import annotations

import functools
from typing import Any, Final, Literal

HOUR_MS: Final = 3_600_000
DAY_MS: Final = 24 * HOUR_MS

Granularity = Literal["hour", "day"]

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
    "suppressed",
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
_BOUNCE_TYPES: Final = {"permanent", "transient", "undetermined"}


def event_counter_names(kind: str, data: dict[str, Any]) -> tuple[str, ...]:
    """The counters one event of type `kind` (with its webhook `data`) adds 1 to: none for an
    event that is not counted, two for a bounce (`bounced` and its type when known)."""
    name = EVENT_COUNTS.get(kind)
    if name is None:
        return ()
    if name == "bounced":
        bounce = data.get("bounce")
        bounce_type = str(bounce.get("type", "")).lower() if isinstance(bounce, dict) else ""
        if bounce_type not in _BOUNCE_TYPES:
            bounce_type = "undetermined"
        return ("bounced", f"bounced_{bounce_type}")
    return (name,)


def hour_of(ms: int) -> int:
    return ms // HOUR_MS


def day_of(ms: int) -> int:
    return ms // DAY_MS


def scope_prefix(team_id: str, domain_id: str | None) -> str:
    """The keys of a team's counts (all domains) or of one of its domains'."""
    if domain_id is None:
        return f"metrics/{team_id}/"
    return f"metrics/{team_id}/domain/{domain_id}/"


def bucket_prefix(team_id: str, domain_id: str | None, granularity: Granularity) -> str:
    return scope_prefix(team_id, domain_id) + ("h/" if granularity == "hour" else "d/")


def bucket_label(granularity: Granularity, bucket: int) -> str:
    """A bucket's place in its key: fixed width, so key order is time order."""
    return f"{bucket:07d}" if granularity == "hour" else f"{bucket:06d}"


def counter_keys(team_id: str, domain_id: str | None, now_ms: int, name: str) -> tuple[bytes, ...]:
    """The keys one count at `now_ms` adds to: the team's hour and day, and the domain's when
    it is known (an email spooled before domains were counted has none)."""
    return _keys(team_id, domain_id, hour_of(now_ms), name)


@functools.lru_cache(maxsize=4096)
def _keys(team_id: str, domain_id: str | None, hour: int, name: str) -> tuple[bytes, ...]:
    # Cached: events come in runs of a few teams and domains within an hour, and formatting
    # the keys afresh was most of the cost of counting an event.
    labels = (("h", bucket_label("hour", hour)), ("d", bucket_label("day", hour // 24)))
    scopes = [scope_prefix(team_id, None)]
    if domain_id:
        scopes.append(scope_prefix(team_id, domain_id))
    return tuple(f"{scope}{g}/{label}/{name}".encode() for scope in scopes for g, label in labels)


def first_engagement_key(team_id: str, email_id: str, name: str) -> bytes:
    """Marks that an email was opened (or clicked) before, for the `unique_` counts."""
    return f"metrics/{team_id}/first/{email_id}/{name}".encode()
