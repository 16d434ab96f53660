"""Domain health: each sending domain's complaint and hard bounce rates over the last 24 hours
and the last 7 days, against the thresholds mailbox providers publish (`metrics.health`), with
a warning when one is crossed.

`serve_domain_health` (first process only) evaluates every domain from the metrics' counters
every `metrics.health_interval_seconds`, never by reading emails. Each domain's verdict is kept
in the `domain_health` table; when a domain's state gets worse (ok -> warning -> critical) the same
commit adds a `domain.health_warning` webhook event for its team, and a warning is logged. A
domain that stays past a threshold is not warned about again; one that recovers and crosses
again is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Final

import trio

from postwire import _core
from postwire.config import Config
from postwire.domains.store import DomainRecord, scan_all_domains
from postwire.errors import SpoolError
from postwire.metrics.counters import Granularity, Scope, day_of, hour_of
from postwire.metrics.health import WINDOWS, Health, domain_health, threshold_of, worsened
from postwire.services import ServiceDeps, Wakeable
from postwire.store.deliveries import add_event
from postwire.store.domain_health import (
    DOMAIN_HEALTH,
    DomainHealthRecord,
    delete_domain_health,
    get_domain_health,
    put_domain_health,
)
from postwire.store.metric_counters import read_counts
from postwire.store.spool import Spool
from postwire.webhooks.payloads import iso_from_ms

log = logging.getLogger(__name__)

WARNING_EVENT: Final = "domain.health_warning"


def window_counts(
    spool: Spool, team_id: str, domain_id: str, now_ms: int
) -> dict[str, dict[str, int]]:
    """Window name -> the domain's summed counts over it: the last 24 hours from the hour
    counters (the current hour the last), the last 7 days from the day counters (today the
    last)."""
    scope = Scope("domain", domain_id)
    hour, day = hour_of(now_ms), day_of(now_ms)
    spans: dict[str, tuple[Granularity, int, int]] = {
        "24h": ("hour", hour - 23, hour + 1),
        "7d": ("day", day - 6, day + 1),
    }
    totals: dict[str, dict[str, int]] = {}
    for window in WINDOWS:
        granularity, first, end = spans[window.name]
        summed: dict[str, int] = {}
        for row in read_counts(spool, team_id, scope, granularity, first, end).values():
            for name, value in row.items():
                summed[name] = summed.get(name, 0) + value
        totals[window.name] = summed
    return totals


def warning_data(domain: DomainRecord, before: str, health: Health, now_ms: int) -> dict[str, Any]:
    """The `domain.health_warning` webhook's data: the domain, its new state and the rates
    past a threshold, each with the threshold it crossed."""
    crossed = []
    for check in health.crossed:
        threshold = threshold_of(check.metric)
        limit = threshold.critical if check.state == "critical" else threshold.warning
        crossed.append(
            {"window": check.window, "metric": check.metric, "rate": check.rate,
             "threshold": limit, "volume": check.volume, "state": check.state}
        )  # fmt: skip
    return {
        "id": domain.id, "name": domain.name, "state": health.state, "previous_state": before,
        "crossed": crossed, "evaluated_at": iso_from_ms(now_ms),
    }  # fmt: skip


class HealthEvaluator:
    """Evaluates every domain and records what changed, in one commit a round."""

    def __init__(
        self, spool: Spool, now_ms: Callable[[], int], webhooks: Wakeable | None = None
    ) -> None:
        self.spool = spool
        self.now_ms = now_ms
        self.webhooks = webhooks

    async def evaluate_all(self) -> int:
        """One round over every domain; returns the warnings emitted."""
        now_ms = self.now_ms()
        batch = _core.WriteBatch()
        changed = warned = 0
        seen: set[str] = set()
        for domain in scan_all_domains(self.spool):
            seen.add(f"{domain.team_id}/{domain.id}")
            counts = window_counts(self.spool, domain.team_id, domain.id, now_ms)
            outcome = self._evaluate(batch, domain, domain_health(counts), now_ms)
            changed += outcome is not None
            warned += outcome is True
        for key, _ in DOMAIN_HEALTH.scan(self.spool, limit=1_000_000):
            if key not in seen:  # the domain was deleted
                team_id, _, domain_id = key.partition("/")
                delete_domain_health(batch, team_id, domain_id)
                changed += 1
        if changed:
            await self.spool.commit(batch)
        if warned and self.webhooks is not None:
            self.webhooks.wake()
        return warned

    def _evaluate(
        self, batch: _core.WriteBatch, domain: DomainRecord, health: Health, now_ms: int
    ) -> bool | None:
        """Add the domain's new record (and warning) to `batch`: None when nothing changed,
        True when it warned, False otherwise."""
        previous = get_domain_health(self.spool, domain.team_id, domain.id)
        before = "ok" if previous is None else previous.state
        checks = [asdict(check) for check in health.checks]
        if previous is not None and (previous.state, previous.checks) == (health.state, checks):
            return None
        warn = worsened(before, health.state)
        since = now_ms if previous is None or previous.state != health.state else previous.since_ms
        warned_at = now_ms if warn else (None if previous is None else previous.warned_at_ms)
        record = DomainHealthRecord(
            domain.team_id, domain.id, domain.name, health.state, since, now_ms, checks, warned_at
        )
        put_domain_health(batch, record)
        if warn:
            data = warning_data(domain, before, health, now_ms)
            add_event(batch, domain.team_id, domain.id, WARNING_EVENT, now_ms, **data)
            worst = data["crossed"][0]
            log.warning(
                "domain %s is %s: %s %.2f%% over the last %s (threshold %s%%, %d messages)",
                domain.name, health.state, worst["metric"], worst["rate"], worst["window"],
                worst["threshold"], worst["volume"],
            )  # fmt: skip
        elif before != health.state:
            log.info("domain %s health: %s (was %s)", domain.name, health.state, before)
        return warn


async def serve_domain_health(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Evaluate domain health every `metrics.health_interval_seconds` until the stage stops
    (nothing is kept in hand: a round cut short commits nothing and the next start evaluates
    again). Idle when
    `metrics.count_events` is off: there are no counts to judge."""
    evaluator = HealthEvaluator(deps.spool, deps.spool.clock_ms, deps.webhooks)
    task_status.started()
    if not config.metrics.count_events:
        await deps.stopping.wait()
        return
    while not deps.stopping.is_set():
        try:
            await evaluator.evaluate_all()
        except SpoolError as exc:  # full, say: the next round evaluates again
            log.warning("domain health was not stored: %s", exc)
        with trio.move_on_after(config.metrics.health_interval_seconds):
            await deps.stopping.wait()
