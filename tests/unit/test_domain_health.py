"""Domain health: the thresholds and windows judged from counts (minimum volume included), and
the evaluator over a real spool: a crossing adds one `domain.health_warning` event with the
new record, staying past the threshold adds none, recovering and crossing again warns again,
and a deleted domain's record goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from postwire import _core
from postwire.config import Config
from postwire.domains.store import create_domain, delete_domain
from postwire.metrics.domain_health import WARNING_EVENT, HealthEvaluator, window_counts
from postwire.metrics.health import MIN_VOLUME, domain_health, window_checks, worsened
from postwire.store.deliveries import EVENTS
from postwire.store.domain_health import get_domain_health, unhealthy_domains
from postwire.store.metric_counters import add_count
from postwire.store.spool import Spool

TEAM = "0190a000-0000-7000-8000-000000000001"
NOW_MS = 1_795_000_000_000  # 2026-11-18
HOUR_MS = 3_600_000


def test_a_window_is_judged_past_its_minimum_volume_only() -> None:
    few = window_checks("24h", {"delivered": MIN_VOLUME - 1, "complained": 5})
    assert [check.state for check in few] == [None, None]
    assert few[0].rate == round(500 / (MIN_VOLUME - 1), 2)
    ok, bounce = window_checks("24h", {"delivered": 1000, "complained": 0,
                                       "bounced": 20, "bounced_permanent": 20})  # fmt: skip
    assert (ok.metric, ok.state) == ("complaint_rate", "ok")
    assert (bounce.metric, bounce.rate, bounce.state) == ("hard_bounce_rate", 1.96, "ok")


def test_a_rate_is_judged_before_it_is_rounded_for_show() -> None:
    # 999 complaints in a million deliveries is 0.0999%: shown as 0.1, but under the warning.
    complaints, _ = window_checks("24h", {"delivered": 1_000_000, "complained": 999})
    assert (complaints.rate, complaints.state) == (0.1, "ok")
    complaints, _ = window_checks("24h", {"delivered": 1_000_000, "complained": 1_000})
    assert (complaints.rate, complaints.state) == (0.1, "warning")


@pytest.mark.parametrize(
    ("complained", "hard", "state"),
    [(0, 0, "ok"), (1, 0, "warning"), (2, 0, "warning"), (3, 0, "critical"), (0, 21, "warning"),
     (0, 53, "critical"), (1, 53, "critical")],
)  # fmt: skip
def test_thresholds(complained: int, hard: int, state: str) -> None:
    counts = {"delivered": 1000, "complained": complained, "bounced": hard,
              "bounced_permanent": hard}  # fmt: skip
    assert domain_health({"7d": counts}).state == state


def test_soft_bounces_are_not_judged_and_states_rank() -> None:
    counts = {"delivered": 1000, "bounced": 200, "bounced_transient": 200}
    assert domain_health({"24h": counts}).state == "ok"
    assert worsened("ok", "warning") and worsened("warning", "critical")
    assert not worsened("critical", "warning") and not worsened("warning", "warning")


async def add(spool: Spool, domain_id: str, name: str, count: int, at_ms: int) -> None:
    batch = _core.WriteBatch()
    add_count(batch, TEAM, domain_id, name, at_ms, count)
    await spool.commit(batch)


def warnings(spool: Spool) -> list[dict[str, object]]:
    rows = EVENTS.scan(spool, prefix=f"{TEAM}/", limit=1000)
    return [event.data for _, event in rows if event.type == WARNING_EVENT]


async def test_one_warning_per_crossing(spool: Spool, tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path)
    domain = await create_domain(spool, config, TEAM, "news.example.com")
    now = [NOW_MS]
    evaluator = HealthEvaluator(spool, lambda: now[0])
    await add(spool, domain.id, "delivered", 500, NOW_MS - 2 * HOUR_MS)
    assert await evaluator.evaluate_all() == 0
    record = get_domain_health(spool, TEAM, domain.id)
    assert record is not None and record.state == "ok" and record.domain_name == domain.name

    # Two complaints in 500: 0.4%, past 0.3%.
    await add(spool, domain.id, "complained", 2, NOW_MS - HOUR_MS)
    assert await evaluator.evaluate_all() == 1
    [data] = warnings(spool)
    assert data["id"] == domain.id and data["name"] == "news.example.com"
    assert (data["state"], data["previous_state"]) == ("critical", "ok")
    crossed = data["crossed"]
    assert isinstance(crossed, list) and crossed[0] == {
        "window": "24h", "metric": "complaint_rate", "rate": 0.4, "threshold": 0.3,
        "volume": 500, "state": "critical",
    }  # fmt: skip
    assert [r.domain_id for r in await unhealthy_domains(spool, TEAM)] == [domain.id]

    # More mail, still past the threshold: no second warning.
    await add(spool, domain.id, "delivered", 100, NOW_MS)
    now[0] += 60_000
    assert await evaluator.evaluate_all() == 0 and len(warnings(spool)) == 1

    # A week later the complaints have left both windows: ok, then a new crossing warns again.
    now[0] = NOW_MS + 8 * 24 * HOUR_MS
    await add(spool, domain.id, "delivered", 1000, now[0])
    assert await evaluator.evaluate_all() == 0
    assert await unhealthy_domains(spool, TEAM) == []
    await add(spool, domain.id, "complained", 1, now[0])
    assert await evaluator.evaluate_all() == 1
    assert [w["state"] for w in warnings(spool)] == ["critical", "warning"]
    assert window_counts(spool, TEAM, domain.id, now[0])["24h"] == {
        "delivered": 1000, "complained": 1,
    }  # fmt: skip

    await delete_domain(spool, TEAM, domain.id)
    await evaluator.evaluate_all()
    assert get_domain_health(spool, TEAM, domain.id) is None
