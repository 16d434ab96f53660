"""`postwire status`: the running service at a glance, read from its store by another process.

Everything here is a constant number of reads, whatever the queue holds: the spool's own
counts (`message_count`, table sizes, map usage), counters the delivery engine keeps, the first
key of the delivery records (ids are time-ordered), and the service's record
(`store.running_service`: the claim of the data directory and its processes' rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import postwire
from postwire.config import Config
from postwire.metrics.operator_exposition import spool_facts
from postwire.operator.output import format_age, format_bytes, iso_ms, table
from postwire.operator.store_access import opened_spool
from postwire.store.delivery_queue import oldest_queued
from postwire.store.running_service import ServiceProcess, is_alive, read_service_record
from postwire.store.spool import Spool


async def gather_status(config: Config) -> dict[str, Any]:
    async with opened_spool(config) as spool:
        return read_status(config, spool, spool.clock_ms())


def read_status(config: Config, spool: Spool, now_ms: int) -> dict[str, Any]:
    """The status as JSON values (what `--json` prints)."""
    facts = spool_facts(spool, Path(config.data_dir) / "spool" / "data.mdb", now_ms)
    record = read_service_record(spool)
    running = record.claim is not None and is_alive(record.claim, now_ms)
    processes = [_process(row, now_ms) for row in record.processes]
    oldest = oldest_queued(spool)
    next_due = spool.next_due_at()
    return {
        "version": postwire.__version__,
        "data_dir": str(config.data_dir),
        "running": running,
        "service_version": processes[0]["version"] if running and processes else None,
        "processes": processes,
        "queue": {
            "messages": facts.messages,
            "waiting_to_retry": facts.retry_backlog,
            "oldest_id": None if oldest is None else oldest.id,
            "oldest_enqueued_at": None if oldest is None else iso_ms(oldest.state.enqueued_at_ms),
            "oldest_age_seconds": (
                None if oldest is None else max(0, now_ms - oldest.state.enqueued_at_ms) // 1000
            ),
            "next_due_at": iso_ms(next_due),
            "retry_destinations": facts.retry_destinations,
            "webhook_backlog": facts.webhook_backlog,
        },
        "spool": {
            "used_bytes": facts.used_bytes,
            "map_size_bytes": facts.map_size_bytes,
            "used_percent": round(100 * facts.used_bytes / max(1, facts.map_size_bytes), 1),
            "file_bytes": facts.file_bytes,
        },
    }


def _process(row: ServiceProcess, now_ms: int) -> dict[str, Any]:
    return {
        "index": row.index,
        "role": "main" if row.index == 0 else "worker",
        "pid": row.pid,
        "host": row.host,
        "alive": is_alive(row, now_ms),
        "version": row.version,
        "started_at": iso_ms(row.started_ms),
        "uptime_seconds": max(0, now_ms - row.started_ms) // 1000,
        "listeners": row.listeners,
    }


def describe_status(status: dict[str, Any]) -> str:
    queue, spool = status["queue"], status["spool"]
    lines = [f"postwire {status['version']}  data: {status['data_dir']}"]
    if status["running"]:
        lines.append(f"service: running, version {status['service_version']}")
    else:
        lines.append("service: not running (no live process holds the data directory)")
    processes = [
        {**p, "uptime": format_age(p["uptime_seconds"]), "state": "up" if p["alive"] else "gone"}
        for p in status["processes"]
    ]
    if processes:
        columns = [("index", "PROCESS"), ("role", "ROLE"), ("pid", "PID"), ("state", "STATE"),
                   ("uptime", "UPTIME"), ("started_at", "STARTED")]  # fmt: skip
        lines += ["", table(processes, columns)]
        listeners = [
            {"name": name, "addresses": addresses, "process": p["index"]}
            for p in status["processes"]
            for name, addresses in p["listeners"].items()
        ]
        columns = [("name", "LISTENER"), ("addresses", "ADDRESSES"), ("process", "PROCESS")]
        lines += ["", table(listeners, columns)]
    oldest = "-"
    if queue["oldest_id"] is not None:
        oldest = f"{format_age(queue['oldest_age_seconds'])} ({queue['oldest_id']})"
    retrying = ", ".join(f"{d} {n}" for d, n in sorted(queue["retry_destinations"].items()))
    lines += [
        "",
        f"queue: {queue['messages']} messages, {queue['waiting_to_retry']} waiting to retry",
        f"  oldest: {oldest}",
        f"  next due: {queue['next_due_at'] or '-'}",
        f"  retrying by destination: {retrying or '-'}",
        f"  webhook backlog: {queue['webhook_backlog']}",
        f"spool: {format_bytes(spool['used_bytes'])} of {format_bytes(spool['map_size_bytes'])}"
        f" ({spool['used_percent']}%), file {format_bytes(spool['file_bytes'])}",
    ]
    return "\n".join(lines)
