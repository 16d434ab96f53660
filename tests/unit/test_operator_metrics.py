"""The operator metrics without a server: the catalogue against docs/metrics.md and the Grafana
dashboard, the exposition as the `prometheus_client` parser reads it, outcome classes, the
messages in hand per destination, the workers' rows in the spool and the spool's facts."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from postwire._core import WriteBatch
from postwire.delivery.bounces import classify_failure, classify_reply
from postwire.delivery.resolver import DestinationError
from postwire.errors import DestinationRefused
from postwire.metrics.operator_exposition import SERIES, SpoolFacts, render, spool_facts
from postwire.metrics.operator_publication import (
    PROCESS_STARTED_MS,
    STALE_AFTER_MS,
    ProcessMetricsRecord,
    forget_earlier_runs,
    publish,
    published_records,
)
from postwire.metrics.operator_registry import (
    MAX_DESTINATIONS,
    OPERATOR_METRICS,
    OTHER_DESTINATIONS,
    RETRY_BACKLOG_KEY,
    RETRY_DESTINATION_PREFIX,
    SIGNING_BUCKETS,
    OperatorMetrics,
    destinations,
    outcome_class,
    retry_destination_changes,
    retry_destination_key,
)
from postwire.store.retry_waiting import mark_waiting, oldest_waiting_ms
from postwire.store.spool import Spool

NOW_MS = 1_795_000_000_000

DOCS = Path(__file__).parents[2] / "docs"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def documented_series() -> dict[str, tuple[str, tuple[str, ...]]]:
    """docs/metrics.md's table: series -> (type, labels)."""
    rows = {}
    for line in (DOCS / "metrics.md").read_text().splitlines():
        match = re.match(r"\| `(postwire_\w+)` \| (\w+) \|([^|]*)\|", line)
        if match:
            labels = tuple(re.findall(r"`(\w+)`", match.group(3)))
            rows[match.group(1)] = (match.group(2), labels)
    return rows


def test_every_series_is_documented_with_its_type_and_labels() -> None:
    assert documented_series() == {s.name: (s.kind, s.labels) for s in SERIES}


def test_the_grafana_dashboard_loads_and_queries_documented_series_only() -> None:
    dashboard = json.loads((DOCS / "grafana" / "postwire.json").read_text())
    assert dashboard["__inputs"][0]["name"] == "DS_PROMETHEUS"
    documented = {s.name for s in SERIES}
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert len(exprs) >= 12
    queried = set()
    for expr in exprs:
        for name in re.findall(r"postwire_\w+", expr):
            for suffix in HISTOGRAM_SUFFIXES:
                if name.endswith(suffix) and name.removesuffix(suffix) in documented:
                    name = name.removesuffix(suffix)
            assert name in documented, f"{name} in {expr!r} is not a documented series"
            queried.add(name)
    # Every series but the start times (a detail for the curious) has a panel.
    assert documented - queried == {"postwire_process_start_time_seconds"}
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert all(p["datasource"]["uid"] == "${DS_PROMETHEUS}" for p in panels)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def record(index: int, metrics: OperatorMetrics, now_ms: int) -> ProcessMetricsRecord:
    return ProcessMetricsRecord(
        index, 100 + index, 1_700_000_000_000, now_ms, metrics.snapshot(now_ms)
    )


def test_the_exposition_parses_and_labels_each_process() -> None:
    first, worker = OperatorMetrics(), OperatorMetrics()
    first.count_accepted("rest", 3)
    worker.count_accepted("smtp", 2)
    first.count_accepted(None, 5)  # an acceptor that is not counted
    first.signing.observe(0.0007, 4)
    worker.signing.observe(2.0)  # beyond the last bucket: +Inf only
    worker.destination_taken('we"ird\\domain', "m1", 1_000)
    facts = SpoolFacts(
        7, 2, {"gmail.com": 2, "other": 5}, {"gmail.com": 90.5}, 3, 4096, 1 << 30, 8192
    )
    page = render([record(1, worker, 5_000), record(0, first, 5_000)], facts, 2)

    families = {f.name: f for f in text_string_to_metric_families(page)}
    # The parser names counter families without `_total`.
    names = {s.name.removesuffix("_total") for s in SERIES}
    assert set(families) == names
    accepted = {
        (s.labels["process"], s.labels["path"]): s.value
        for s in families["postwire_accepted_messages"].samples
    }
    assert accepted[("0", "rest")] == 3 and accepted[("1", "smtp")] == 2
    assert sum(accepted.values()) == 5
    signing = families["postwire_signing_seconds"].samples
    buckets = {
        (s.labels["process"], s.labels["le"]): s.value
        for s in signing
        if s.name.endswith("_bucket")
    }
    assert buckets[("0", "0.0005")] == 0 and buckets[("0", "0.001")] == 4
    assert buckets[("0", "+Inf")] == 4 and buckets[("1", "1.0")] == 0
    assert buckets[("1", "+Inf")] == 1
    assert len([k for k in buckets if k[0] == "0"]) == len(SIGNING_BUCKETS) + 1
    (in_hand,) = families["postwire_queue_in_hand_messages"].samples
    assert in_hand.labels == {"process": "1", "destination": 'we"ird\\domain'}
    (age,) = families["postwire_queue_oldest_age_seconds"].samples
    assert age.value == 4.0
    waiting = families["postwire_retry_backlog_destination_messages"].samples
    assert {s.labels["destination"]: s.value for s in waiting} == {"gmail.com": 2, "other": 5}
    (waited,) = families["postwire_retry_backlog_destination_oldest_age_seconds"].samples
    assert waited.labels == {"destination": "gmail.com"} and waited.value == 90.5
    gauges = {
        name: families[name].samples[0].value
        for name in (
            "postwire_queue_messages",
            "postwire_retry_backlog_messages",
            "postwire_processes",
            "postwire_processes_alive",
        )
    }
    assert gauges == {
        "postwire_queue_messages": 7,
        "postwire_retry_backlog_messages": 2,
        "postwire_processes": 2,
        "postwire_processes_alive": 2,
    }


def test_outcome_classes_follow_what_answered() -> None:
    assert outcome_class(classify_reply(250, (2, 0, 0), "ok")) == "2"
    assert outcome_class(classify_reply(451, (4, 3, 0), "later")) == "4"
    assert outcome_class(classify_reply(550, (5, 1, 1), "no such user")) == "5"
    assert outcome_class(classify_reply(554, None, "no")) == "5"
    assert outcome_class(classify_failure(ConnectionRefusedError("refused"))) == "connection"
    assert outcome_class(classify_failure(TimeoutError())) == "connection"
    assert outcome_class(classify_failure(DestinationError("x.test", "no MX"))) == "dns"
    refused = DestinationRefused("loopback is not a destination")
    assert outcome_class(classify_failure(refused)) == "local"


def test_destinations_keep_the_deepest_and_sum_the_rest() -> None:
    metrics = OperatorMetrics()
    for number in range(MAX_DESTINATIONS + 5):
        for message in range(number + 1):
            metrics.destination_taken(f"d{number}.test", f"m{number}-{message}", 1_000 * number)
    shown = destinations(metrics.in_hand, 100_000)
    assert len(shown) == MAX_DESTINATIONS + 1
    assert f"d{MAX_DESTINATIONS + 4}.test" in shown and "d0.test" not in shown
    # The five shallowest (1..5 messages), their oldest age among them (d0's, enqueued at 0).
    assert shown[OTHER_DESTINATIONS] == [15, 100.0]
    metrics.destination_done("d0.test", "m0-0")
    assert "d0.test" not in metrics.in_hand


async def test_workers_publish_and_stale_or_earlier_rows_are_left_out(spool: Spool) -> None:
    OPERATOR_METRICS.count_accepted("smtp", 2)
    await publish(spool, 1)
    await publish(spool, 2)
    now_ms = int(time.time() * 1000)
    rows = published_records(spool, now_ms)
    assert [r.index for r in rows] == [1, 2]
    assert rows[0].numbers["accepted"]["smtp"] >= 2
    assert rows[0].started_ms == PROCESS_STARTED_MS
    # A worker gone quiet for longer than STALE_AFTER_MS no longer counts.
    assert published_records(spool, now_ms + STALE_AFTER_MS + 1_000) == []
    # The first process forgets an earlier run's workers before starting its own.
    await forget_earlier_runs(spool)
    assert published_records(spool, now_ms) == []


async def test_the_retry_backlog_is_read_from_the_counters_table(spool: Spool) -> None:
    batch = WriteBatch()
    batch.add_counter("counters", RETRY_BACKLOG_KEY, 3)
    await spool.commit(batch)
    facts = spool_facts(spool, Path("/nonexistent/data.mdb"), NOW_MS)
    assert facts.retry_backlog == 3 and facts.file_bytes == 0
    used, map_size = spool.core.usage()
    assert facts.used_bytes == used and facts.map_size_bytes == map_size
    batch = WriteBatch()
    batch.add_counter("counters", RETRY_BACKLOG_KEY, -5)  # a spool older than the count
    await spool.commit(batch)
    assert spool_facts(spool, Path("/nonexistent/data.mdb"), NOW_MS).retry_backlog == 0


def test_a_retried_message_counts_for_each_domain_it_waits_on_until_it_leaves_it() -> None:
    entering = retry_destination_changes([], ["a@Gmail.com", "b@gmail.com", "c@example.org"])
    assert entering == [("example.org", 1), ("gmail.com", 1)]
    assert retry_destination_key("gmail.com") == RETRY_DESTINATION_PREFIX + b"gmail.com"
    # example.org delivered at the next attempt, gmail.com still deferred.
    assert retry_destination_changes(
        ["a@gmail.com", "b@gmail.com", "c@example.org"], ["a@gmail.com"]
    ) == [("example.org", -1)]
    assert retry_destination_changes(["a@gmail.com"], []) == [("gmail.com", -1)]
    assert retry_destination_changes([], []) == []


async def test_a_domains_retry_queue_is_aged_by_its_longest_waiting_message(
    spool: Spool,
) -> None:
    batch = WriteBatch()
    batch.add_counter("counters", retry_destination_key("gmail.com"), 2)
    mark_waiting(batch, "gmail.com", NOW_MS - 60_000, "m-late", waiting=True)
    mark_waiting(batch, "gmail.com", NOW_MS - 600_000, "m-early", waiting=True)
    mark_waiting(batch, "gmail.co", NOW_MS - 900_000, "m-other-domain", waiting=True)
    await spool.commit(batch)
    facts = spool_facts(spool, Path("/nonexistent/data.mdb"), NOW_MS)
    assert facts.retry_ages == {"gmail.com": 600.0}
    batch = WriteBatch()
    mark_waiting(batch, "gmail.com", NOW_MS - 600_000, "m-early", waiting=False)
    await spool.commit(batch)
    assert oldest_waiting_ms(spool, "gmail.com") == NOW_MS - 60_000
