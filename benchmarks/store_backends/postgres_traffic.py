"""What a run cost PostgreSQL, from PostgreSQL's own statistics and the kernel's account of
the connections to it: counters read before and after a run, their difference divided by the
run's messages.

- transactions: `pg_stat_database.xact_commit` of the server's database (a group commit of
  many batches is one; so is each read, which runs outside any transaction block);
- statements by kind (`SELECT`, `INSERT`, `BEGIN`, `COMMIT`, ...) and the WAL bytes they wrote,
  from `pg_stat_statements` (loaded by `preload_statement_statistics`);
- the CPU time of PostgreSQL's processes (the postmaster and its children);
- the traffic of every TCP connection to the server's port, as `ss -ti` reports it from the
  kernel's `tcp_info`: bytes each way, and the data segments the clients sent (a pipelined
  group of statements leaves as one: about one a round trip).

Connections made and closed between two readings are missed by the last; Postwire's pools
keep theirs open, and the benchmark's own `psql` connections are closed before each reading.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field

from tests.postgres_server import PostgresServer

from benchmarks.cpu_time import process_tree_cpu

# Backends report their statistics when idle, at most a second after their last transaction.
STATISTICS_DELAY = 1.5
_ADDRESSES = re.compile(r"(\S+):(\d+)\s+(\S+):(\d+)\s*$")
_TCP_FIELDS = ("bytes_acked", "bytes_received", "data_segs_out")


def preload_statement_statistics(server: PostgresServer) -> None:
    """Restart `server` with `pg_stat_statements` loaded and its view created."""
    server.psql("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    server.stop()
    server.start()
    server.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


@dataclass
class Reading:
    transactions: int
    calls: Counter[str] = field(default_factory=Counter)  # statements by their first word
    wal_bytes: int = 0
    cpu_seconds: float = 0.0  # the server's processes' (the postmaster and its children)


def connection_counters(port: int) -> dict[str, Counter[str]]:
    """Each established connection to `port` on loopback (by its client's address): its
    `_TCP_FIELDS` as the kernel counts them from the client's side."""
    listing = subprocess.run(
        ["ss", "-tinH", "state", "established", f"( dport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    connections: dict[str, Counter[str]] = {}
    client = None
    for line in listing:
        if match := _ADDRESSES.search(line):
            client = f"{match[1]}:{match[2]}"
        elif client is not None:
            values = dict(re.findall(r"(\w+):(\d+)", line))
            connections[client] = Counter({k: int(values.get(k, 0)) for k in _TCP_FIELDS})
            client = None
    return connections


def read(server: PostgresServer, database: str) -> tuple[Reading, dict[str, Counter[str]]]:
    """The database's counters now, and each connection's."""
    rows = server.psql(
        "SELECT split_part(upper(ltrim(s.query)), ' ', 1), sum(s.calls), sum(s.wal_bytes) "
        "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
        f"WHERE d.datname = '{database}' GROUP BY 1"
    )
    transactions = int(
        server.psql(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{database}'")
    )
    postmaster = int((server.data / "postmaster.pid").read_text().split("\n", 1)[0])
    reading = Reading(transactions, cpu_seconds=process_tree_cpu(postmaster))
    for row in rows.splitlines():
        verb, calls, wal = row.split("|")
        reading.calls[verb] += int(calls)
        reading.wal_bytes += int(float(wal))
    return reading, connection_counters(server.port)


@dataclass(frozen=True)
class Traffic:
    """A run's cost to PostgreSQL, per message."""

    transactions: float
    statements: dict[str, float]  # by kind
    wal_bytes: float
    bytes_sent: float  # by Postwire to PostgreSQL
    bytes_received: float
    sends: float  # data segments Postwire sent: about its round trips
    cpu_ms: float  # PostgreSQL's processes' CPU

    @property
    def write_transactions(self) -> float:
        return self.statements.get("BEGIN", 0.0)


class TrafficMeter:
    """Counters of one database of `server` around runs: `start`, then `stop(messages)` once
    the run is over (it waits for the backends to report)."""

    def __init__(self, server: PostgresServer, database: str) -> None:
        self.server = server
        self.database = database
        self._before: tuple[Reading, dict[str, Counter[str]]] | None = None

    def start(self) -> None:
        self._before = read(self.server, self.database)

    def stop(self, messages: int) -> Traffic:
        assert self._before is not None, "stop before start"
        time.sleep(STATISTICS_DELAY)
        (before, connections_before), self._before = self._before, None
        after, connections_after = read(self.server, self.database)
        tcp: Counter[str] = Counter()
        for client, counters in connections_after.items():
            tcp.update(counters)
            tcp.subtract(connections_before.get(client, Counter()))
        calls = after.calls.copy()
        calls.subtract(before.calls)
        # The benchmark's own statistics queries run in another database: none of these.
        return Traffic(
            transactions=(after.transactions - before.transactions) / messages,
            statements={verb: n / messages for verb, n in calls.items() if n > 0},
            wal_bytes=(after.wal_bytes - before.wal_bytes) / messages,
            bytes_sent=tcp["bytes_acked"] / messages,
            bytes_received=tcp["bytes_received"] / messages,
            sends=tcp["data_segs_out"] / messages,
            cpu_ms=1000 * (after.cpu_seconds - before.cpu_seconds) / messages,
        )
