"""A broadcast's walk in the metrics: members skipped because their address is suppressed, and
those whose message could not be built, count as `suppressed` and `failed` for the team, the
broadcast and its sending domain, in the commit of the page that walked them."""

from __future__ import annotations

from pathlib import Path

from postwire.domains.store import list_domains
from postwire.metrics.counters import Scope, hour_of
from postwire.store.metric_counters import read_counts
from postwire.store.spool import Spool
from tests.unit.test_broadcast_engine import (
    NOW,
    TEAM,
    audience,
    engine,
    queued_broadcast,
    verified_domain,
)


async def test_suppressed_and_failed_members_count(spool: Spool, tmp_path: Path) -> None:
    await verified_domain(spool, tmp_path)
    segment_id, topic_id, _ = await audience(spool, 12)  # one suppressed, one unsendable
    broadcast_id = await queued_broadcast(spool, segment_id, topic_id)
    assert await engine(spool, tmp_path).take_turns()

    (domain,), _ = list_domains(spool, TEAM)
    hour = hour_of(int(NOW.timestamp() * 1000))
    for scope in (Scope(), Scope("domain", domain.id), Scope("broadcast", broadcast_id)):
        counts = read_counts(spool, TEAM, scope, "hour", hour, hour + 1)[hour]
        assert (counts.get("suppressed"), counts.get("failed")) == (1, 1), scope
