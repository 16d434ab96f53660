"""Deliverability insights as stored: tables "email_insights" and "insights_due".

    email_insights  <team_id>/<email_id>                      StoredInsights: one email's
    insights_due    cursor/<team_id>                          TailCursor: emails up to it done
    insights_due    auth/<team_id>/<domain_id>/<from_domain>  AuthCheck: a sending identity's
                                                              authentication, last checked when
    insights_due    body/<team_id>/<email_id>                 the message's bytes, as sent: kept
                                                              from its delivery's ack until its
                                                              insights are stored

Findings are kept as a catalogue code and the values of its message (`postwire.insights
.catalogue`), so the wording lives in one place and a million emails do not each store it;
rspamd's own findings, whose text rspamd chooses, are kept whole. An email's authentication
is its identity's: every email sent as `news@example.com` through the same domain shares one
`AuthCheck`, rechecked against live DNS on a schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table

CURSOR_PREFIX: Final = "cursor/"
AUTH_PREFIX: Final = "auth/"
BODY_PREFIX: Final = "body/"


@dataclass(frozen=True, slots=True)
class StoredInsights:
    computed_at_ms: int
    # Content, recipient and scoring findings: {"code", "values"} or, for rspamd's,
    # {"code", "severity", "message", "fix"}.
    findings: list[dict[str, Any]] = field(default_factory=list)
    # The identity's `AuthCheck` key and when it had been checked for this email. Its findings
    # are read from the check itself (kept once per identity, not copied into every email);
    # `authentication` holds findings only where there is no check (none today).
    auth_key: str | None = None
    authentication: list[dict[str, Any]] = field(default_factory=list)
    auth_checked_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AuthCheck:
    team_id: str
    domain_id: str
    from_domain: str
    checked_at_ms: int
    findings: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TailCursor:
    """Every email of the team with a key up to `after` (an email id or an id floor) has
    been looked at."""

    after: str


EMAIL_INSIGHTS: Final = Table("email_insights", StoredInsights)
AUTH_CHECKS: Final = Table("insights_due", AuthCheck)
TAIL_CURSORS: Final = Table("insights_due", TailCursor)


def insights_key(team_id: str, email_id: str) -> str:
    return f"{team_id}/{email_id}"


def auth_key(team_id: str, domain_id: str, from_domain: str) -> str:
    return f"{AUTH_PREFIX}{team_id}/{domain_id}/{from_domain}"


def get_stored_insights(spool: Spool, team_id: str, email_id: str) -> StoredInsights | None:
    return EMAIL_INSIGHTS.get(spool, insights_key(team_id, email_id))


def has_insights(spool: Spool, team_id: str, email_id: str) -> bool:
    return spool.get(EMAIL_INSIGHTS.name, insights_key(team_id, email_id).encode()) is not None


async def has_insights_parked(spool: Spool, team_id: str, email_id: str) -> bool:
    """`has_insights`, parked rather than blocking on a table store on the network."""
    return (
        await spool.aget(EMAIL_INSIGHTS.name, insights_key(team_id, email_id).encode()) is not None
    )


def put_insights(batch: WriteBatch, team_id: str, email_id: str, stored: StoredInsights) -> None:
    EMAIL_INSIGHTS.put(batch, insights_key(team_id, email_id), stored)


def get_auth_check(spool: Spool, key: str) -> AuthCheck | None:
    return AUTH_CHECKS.get(spool, key)


def put_auth_check(batch: WriteBatch, check: AuthCheck) -> None:
    AUTH_CHECKS.put(batch, auth_key(check.team_id, check.domain_id, check.from_domain), check)


def scan_auth_checks(spool: Spool, cursor: str | None, limit: int) -> list[tuple[str, AuthCheck]]:
    """Every team's identities' checks in key order, after `cursor` (a key)."""
    return AUTH_CHECKS.scan(spool, prefix=AUTH_PREFIX, cursor=cursor, limit=limit)


def get_tail_cursor(spool: Spool, team_id: str) -> str | None:
    cursor = TAIL_CURSORS.get(spool, CURSOR_PREFIX + team_id)
    return None if cursor is None else cursor.after


def put_tail_cursor(batch: WriteBatch, team_id: str, after: str) -> None:
    TAIL_CURSORS.put(batch, CURSOR_PREFIX + team_id, TailCursor(after))


# The message bytes delivery lets go of before the insights service reads them: raw bytes
# (no record around them), in the same table as the service's other state. Their total size
# is counted in the commits that keep and drop them, so delivery keeps no more than a bound
# (a stalled service must not fill the spool).
KEPT_BYTES_KEY: Final = b"insights/kept_bytes"


def kept_body_key(team_id: str, email_id: str) -> str:
    return f"{BODY_PREFIX}{team_id}/{email_id}"


def kept_bytes(spool: Spool) -> int:
    """The size of every copy kept now."""
    return spool.counter("counters", KEPT_BYTES_KEY)


def keep_body(batch: WriteBatch, team_id: str, email_id: str, message: bytes) -> None:
    batch.put(TAIL_CURSORS.name, kept_body_key(team_id, email_id).encode(), message)
    batch.add_counter("counters", KEPT_BYTES_KEY, len(message))


def kept_body(spool: Spool, team_id: str, email_id: str) -> bytes | None:
    return spool.get(TAIL_CURSORS.name, kept_body_key(team_id, email_id).encode())


async def kept_body_parked(spool: Spool, team_id: str, email_id: str) -> bytes | None:
    """`kept_body`, parked rather than blocking on a table store on the network."""
    return await spool.aget(TAIL_CURSORS.name, kept_body_key(team_id, email_id).encode())


def drop_kept_body(batch: WriteBatch, team_id: str, email_id: str, size: int) -> None:
    """Drop a copy of `size` bytes known to be kept (nothing else drops it meanwhile)."""
    batch.delete(TAIL_CURSORS.name, kept_body_key(team_id, email_id).encode())
    batch.add_counter("counters", KEPT_BYTES_KEY, -size)


def scan_kept_bodies(spool: Spool, cursor: str | None, limit: int) -> list[tuple[str, str, int]]:
    """Every team's kept copies in key order, after `cursor` (a key), as (team id, email id,
    size)."""
    rows = spool.scan(
        TAIL_CURSORS.name,
        prefix=BODY_PREFIX.encode(),
        cursor=None if cursor is None else cursor.encode(),
        limit=limit,
    )
    found = []
    for key, message in rows:
        team_id, _, email_id = key.decode()[len(BODY_PREFIX) :].partition("/")
        found.append((team_id, email_id, len(message)))
    return found
