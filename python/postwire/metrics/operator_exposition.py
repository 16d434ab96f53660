"""The Prometheus text format (version 0.0.4) of every process's operator metrics.

`SERIES` is the catalogue: docs/metrics.md lists the same series, and a test holds the two
together. Counters and histograms are labelled by `process` (the index of `processes`), so a
worker started again is a counter reset of its own series, which `rate()` handles; sum them
in queries (`sum by (path) (rate(postwire_accepted_messages_total[1m]))`). Gauges about the
spool are the service's, read from the shared spool at each scrape.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from postwire.metrics.operator_publication import ProcessMetricsRecord
from postwire.metrics.operator_registry import (
    MAX_DESTINATIONS,
    OTHER_DESTINATIONS,
    RETRY_BACKLOG_KEY,
    RETRY_DESTINATION_PREFIX,
    SIGNING_BUCKETS,
    WEBHOOK_BUCKETS,
)
from postwire.store.retry_waiting import oldest_waiting_ms
from postwire.store.spool import Spool

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
# Counter keys read per scan of the retry backlog's domains.
_SCAN_CHUNK: Final = 1_000


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    kind: str  # counter, gauge, histogram
    labels: tuple[str, ...]
    help: str


SERIES: Final = (
    Series("postwire_accepted_messages_total", "counter", ("process", "path"),
           "Messages accepted and on disk, by where they came from"),
    Series("postwire_delivery_outcomes_total", "counter", ("process", "class"),
           "Delivery attempts per recipient, by reply class (2, 4, 5) or failure "
           "(dns, connection, local)"),
    Series("postwire_queue_in_hand_messages", "gauge", ("process", "destination"),
           "Messages the delivery engine holds for a recipient domain"),
    Series("postwire_queue_oldest_age_seconds", "gauge", ("process", "destination"),
           "Age since acceptance of the oldest message held for a recipient domain"),
    Series("postwire_queue_messages", "gauge", (),
           "Messages in the spool not yet finished (due, scheduled, waiting to retry, in hand)"),
    Series("postwire_retry_backlog_messages", "gauge", (),
           "Messages that failed at least one attempt and wait to be tried again"),
    Series("postwire_retry_backlog_destination_messages", "gauge", ("destination",),
           "Messages waiting to be tried again with a recipient at this domain (the deepest "
           "20 domains, the rest as other)"),
    Series("postwire_retry_backlog_destination_oldest_age_seconds", "gauge", ("destination",),
           "Age since acceptance of the oldest message waiting to be tried again for this "
           "domain (the deepest 20 domains)"),
    Series("postwire_webhook_backlog_messages", "gauge", (),
           "Webhook events not yet fanned out plus webhook messages waiting for a POST"),
    Series("postwire_webhook_attempts_total", "counter", ("process", "result"),
           "Webhook POSTs, by result"),
    Series("postwire_webhook_delivery_seconds", "histogram", ("process",),
           "From an event to its endpoint's 2xx answer, retries included"),
    Series("postwire_signing_seconds", "histogram", ("process",),
           "Time to DKIM-sign one message, from asking to having the signature"),
    Series("postwire_spool_used_bytes", "gauge", (), "Bytes of the spool's map in use"),
    Series("postwire_spool_map_size_bytes", "gauge", (), "The spool's map size (spool.map_size)"),
    Series("postwire_spool_file_bytes", "gauge", (), "Disk space the spool's data file takes"),
    Series("postwire_processes", "gauge", (), "Service processes configured (processes)"),
    Series("postwire_processes_alive", "gauge", (),
           "Service processes whose numbers are current (the first one and live workers)"),
    Series("postwire_process_start_time_seconds", "gauge", ("process",),
           "When each service process started, seconds since the epoch"),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SpoolFacts:
    """What the shared spool says at the scrape."""

    messages: int
    retry_backlog: int
    retry_destinations: dict[str, int]  # the deepest domains, the rest as "other"
    retry_ages: dict[str, float]  # seconds the oldest of each deepest domain has waited
    webhook_backlog: int
    used_bytes: int
    map_size_bytes: int
    file_bytes: int


def spool_facts(spool: Spool, data_file: Path, now_ms: int) -> SpoolFacts:
    used, map_size = spool.usage()
    try:
        # The file is sparse, created at the map's size: what it takes is its blocks.
        file_bytes = os.stat(data_file).st_blocks * 512
    except OSError:
        file_bytes = 0
    destinations = retry_destinations(spool)
    ages = {}
    for domain in destinations:
        enqueued_ms = None if domain == OTHER_DESTINATIONS else oldest_waiting_ms(spool, domain)
        if enqueued_ms is not None:  # none for retries older than the rows (see retry_waiting)
            ages[domain] = max(0.0, (now_ms - enqueued_ms) / 1000)
    return SpoolFacts(
        messages=spool.message_count(),
        # Kept as messages enter and leave retry; never shown below zero (a spool older than
        # the count may hold retries it never saw enter).
        retry_backlog=max(0, spool.counter("counters", RETRY_BACKLOG_KEY)),
        retry_destinations=destinations,
        retry_ages=ages,
        webhook_backlog=spool.count("outbox") + spool.count("webhook_due"),
        used_bytes=used,
        map_size_bytes=map_size,
        file_bytes=file_bytes,
    )


def retry_destinations(spool: Spool) -> dict[str, int]:
    """Recipient domain -> messages waiting to retry for it: the deepest `MAX_DESTINATIONS`,
    the others summed as "other". One scan of the domains' keys (each a domain with a retry
    now or before; those at zero are skipped)."""
    counts: dict[str, int] = {}
    cursor: bytes | None = None
    while True:
        rows = spool.scan(
            "counters", prefix=RETRY_DESTINATION_PREFIX, cursor=cursor, limit=_SCAN_CHUNK
        )
        for key, raw in rows:
            count = int(raw)
            if count > 0:
                counts[key[len(RETRY_DESTINATION_PREFIX) :].decode()] = count
        if len(rows) < _SCAN_CHUNK:
            break
        cursor = rows[-1][0]
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = dict(ranked[:MAX_DESTINATIONS])
    rest = sum(count for _, count in ranked[MAX_DESTINATIONS:])
    if rest:
        shown[OTHER_DESTINATIONS] = rest
    return shown


def render(
    records: Sequence[ProcessMetricsRecord], facts: SpoolFacts, configured_processes: int
) -> str:
    """The exposition of `records` (one per live process) and the spool's `facts`."""
    values: dict[str, list[str]] = {series.name: [] for series in SERIES}
    for record in sorted(records, key=lambda r: r.index):
        _add_process(values, record)
    gauges = {
        "postwire_queue_messages": facts.messages,
        "postwire_retry_backlog_messages": facts.retry_backlog,
        "postwire_webhook_backlog_messages": facts.webhook_backlog,
        "postwire_spool_used_bytes": facts.used_bytes,
        "postwire_spool_map_size_bytes": facts.map_size_bytes,
        "postwire_spool_file_bytes": facts.file_bytes,
        "postwire_processes": configured_processes,
        "postwire_processes_alive": len(records),
    }
    for name, value in gauges.items():
        values[name].append(_sample(name, {}, value))
    by_destination_series: tuple[tuple[str, dict[str, Any]], ...] = (
        ("postwire_retry_backlog_destination_messages", facts.retry_destinations),
        ("postwire_retry_backlog_destination_oldest_age_seconds", facts.retry_ages),
    )
    for name, by_destination in by_destination_series:
        for destination, amount in by_destination.items():
            values[name].append(_sample(name, {"destination": destination}, amount))
    lines: list[str] = []
    for series in SERIES:
        lines.append(f"# HELP {series.name} {series.help}.")
        lines.append(f"# TYPE {series.name} {series.kind}")
        lines.extend(values[series.name])
    return "\n".join(lines) + "\n"


def _add_process(values: dict[str, list[str]], record: ProcessMetricsRecord) -> None:
    process = str(record.index)
    numbers = record.numbers

    def labelled(name: str, label: str, counts: dict[str, Any]) -> None:
        for key, count in counts.items():
            values[name].append(_sample(name, {"process": process, label: key}, count))

    labelled("postwire_accepted_messages_total", "path", numbers.get("accepted", {}))
    labelled("postwire_delivery_outcomes_total", "class", numbers.get("outcomes", {}))
    labelled("postwire_webhook_attempts_total", "result", numbers.get("webhook_attempts", {}))
    for destination, (depth, oldest) in sorted(numbers.get("destinations", {}).items()):
        labels = {"process": process, "destination": destination}
        values["postwire_queue_in_hand_messages"].append(
            _sample("postwire_queue_in_hand_messages", labels, depth)
        )
        values["postwire_queue_oldest_age_seconds"].append(
            _sample("postwire_queue_oldest_age_seconds", labels, oldest)
        )
    for name, key, bounds in (
        ("postwire_webhook_delivery_seconds", "webhook_delivery", WEBHOOK_BUCKETS),
        ("postwire_signing_seconds", "signing", SIGNING_BUCKETS),
    ):
        values[name].extend(_histogram(name, process, bounds, numbers.get(key)))
    values["postwire_process_start_time_seconds"].append(
        _sample("postwire_process_start_time_seconds", {"process": process},
                record.started_ms / 1000)
    )  # fmt: skip


def _histogram(
    name: str, process: str, bounds: tuple[float, ...], snapshot: dict[str, Any] | None
) -> Iterator[str]:
    counts = [0] * (len(bounds) + 1)
    total = 0.0
    if snapshot is not None and len(snapshot["counts"]) == len(counts):
        counts, total = snapshot["counts"], snapshot["sum"]
    cumulative = 0
    for bound, count in zip((*bounds, math.inf), counts, strict=True):
        cumulative += count
        # Bounds as floats ("1.0"), as Prometheus's own clients write them.
        labels = {"process": process, "le": "+Inf" if bound == math.inf else repr(bound)}
        yield _sample(f"{name}_bucket", labels, cumulative)
    yield _sample(f"{name}_sum", {"process": process}, total)
    yield _sample(f"{name}_count", {"process": process}, cumulative)


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    if not labels:
        return f"{name} {_number(value)}"
    pairs = ",".join(f'{key}="{_escape(text)}"' for key, text in labels.items())
    return f"{name}{{{pairs}}} {_number(value)}"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))
