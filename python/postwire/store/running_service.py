"""The record of the `postwire serve` that runs on a data directory: the first process's
exclusive claim of the directory, and under it a row per process (pid, version, the addresses it
is bound to). A second `serve` reads the claim to refuse with the running one's pid and
addresses; `postwire status` (another process) reads the claim and the process rows.

Table `running_service`, keyed by the claim's generation:

    000000000007          the claim (`RunningService`), made by the first process before it binds
    000000000007/0000     each process of that run (`ServiceProcess`, 0: the first, 1..: workers)

Taking the directory over inserts the next generation with `WriteBatch.insert`, which fails the
whole batch when another process inserted it first: of two starting at once, one commits and the
other reads the winner's row. The same batch deletes every row of earlier runs. No file lock is
involved, so this holds between processes on one host or on several that share the directory.

Each process renews its rows every `RENEW_SECONDS` (the first process its claim too, in the same
commit) and deletes them when it stops cleanly. A row is dead (`is_alive`) when its process is
gone: on its own host as soon as its pid no longer runs (a kill -9 is seen at once), anywhere once
it was not renewed for `STALE_AFTER_MS`.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

import postwire
from postwire._core import WriteBatch
from postwire.errors import KeyExistsError, PostwireError, SpoolError
from postwire.store.spool import Spool
from postwire.store.tables import Table

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.services import ServiceDeps

log = logging.getLogger("postwire")

RENEW_SECONDS: Final = 5.0
# Long enough that a busy service is never taken for a dead one.
STALE_AFTER_MS: Final = 30_000
# Rows of earlier runs that one claim clears at most (normally a claim and its processes' rows).
CLEARED_AT_ONCE: Final = 1000
_TABLE: Final = "running_service"


@dataclass(frozen=True, slots=True)
class RunningService:
    """The claim of one `postwire serve`: who runs, where it listens, since and until when."""

    pid: int
    host: str
    started_ms: int
    renewed_ms: int
    addresses: list[str]  # "REST API 127.0.0.1:3000", ... as configured
    sandbox: bool = False


@dataclass(frozen=True, slots=True)
class ServiceProcess:
    """One process of the running service, as `postwire status` lists it."""

    index: int  # 0: the first process (API, dashboard, metrics); 1..: workers
    pid: int
    host: str
    version: str
    started_ms: int
    renewed_ms: int
    # Listener name -> the addresses it is bound to ("REST API" -> ["http://127.0.0.1:3000"]).
    listeners: dict[str, list[str]] = field(default_factory=dict)


CLAIMS: Final = Table(_TABLE, RunningService)
PROCESSES: Final = Table(_TABLE, ServiceProcess)


@dataclass(frozen=True, slots=True)
class Claim:
    """This process's claim of the data directory, as committed."""

    key: str
    record: RunningService


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    """The service's record as stored: the latest claim (None once given up) and its
    processes' rows, by index."""

    claim: RunningService | None
    processes: list[ServiceProcess]


class AlreadyRunningError(PostwireError):
    """Another `postwire serve` runs on this data directory."""


def _process_key(generation: str, index: int) -> str:
    return f"{generation}/{index:04d}"


def _latest_generation(spool: Spool) -> str | None:
    """The generation of the latest run (its claim, or rows its processes left)."""
    rows = spool.scan(_TABLE, reverse=True, limit=1)
    return rows[0][0].decode().partition("/")[0] if rows else None


def read_service_record(spool: Spool) -> ServiceRecord:
    """The record of the latest run on this spool, live or not (`is_alive` tells)."""
    generation = _latest_generation(spool)
    if generation is None:
        return ServiceRecord(None, [])
    rows = PROCESSES.scan(spool, prefix=f"{generation}/", limit=CLEARED_AT_ONCE)
    return ServiceRecord(CLAIMS.get(spool, generation), [row for _, row in rows])


def is_alive(record: RunningService | ServiceProcess, now_ms: int) -> bool:
    """Whether the process that wrote `record` still runs (see the module docstring)."""
    if now_ms - record.renewed_ms > STALE_AFTER_MS:
        return False
    if record.host != socket.gethostname():
        return True
    # Our own pid is an earlier life of this host's pid numbering (a container restarted).
    return record.pid != os.getpid() and _process_runs(record.pid)


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:  # a zombie has exited: only its parent has not collected it yet
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def service_addresses(config: Config) -> list[str]:
    """The listeners a `serve` with `config` opens, described for a person."""
    addresses = [f"REST API {config.api.listen}", f"dashboard {config.dashboard.listen}"]
    addresses += [f"SMTP {listen} (STARTTLS)" for listen in config.smtp.starttls_listen]
    addresses += [f"SMTP {listen} (TLS)" for listen in config.smtp.tls_listen]
    if config.metrics.listen:
        addresses.append(f"metrics {config.metrics.listen}")
    return addresses


async def claim_data_dir(
    spool: Spool, config: Config, *, addresses: list[str] | None = None
) -> Claim:
    """Claim the data directory for this process, clearing the record of earlier runs;
    `AlreadyRunningError` naming the service that holds it while that one lives. `addresses`
    is what the claim says it listens on (default: the listeners `config` opens)."""
    for _ in range(3):
        now_ms = spool.clock_ms()
        latest = _latest_generation(spool)
        running = None if latest is None else CLAIMS.get(spool, latest)
        if running is not None and is_alive(running, now_ms):
            raise AlreadyRunningError(describe_running(config.data_dir, running))
        generation = int(latest) + 1 if latest is not None else 1
        claim = Claim(
            f"{generation:012d}",
            RunningService(
                os.getpid(), socket.gethostname(), now_ms, now_ms,
                service_addresses(config) if addresses is None else addresses, config.sandbox,
            ),
        )  # fmt: skip
        batch = WriteBatch()
        CLAIMS.insert(batch, claim.key, claim.record)
        for key, _ in spool.scan(_TABLE, limit=CLEARED_AT_ONCE):
            batch.delete(_TABLE, key)
        try:
            await spool.commit(batch)
        except KeyExistsError:  # another serve claimed it at the same moment: read its row
            continue
        return claim
    raise AlreadyRunningError(
        f"another `postwire serve` is starting on the data directory {config.data_dir}"
    )


async def forget_service_record(spool: Spool) -> None:
    """Delete the whole record: for a spool no process has open (a restored copy), whose
    record describes a service that runs elsewhere, or ran once."""
    while rows := spool.scan(_TABLE, limit=CLEARED_AT_ONCE):
        batch = WriteBatch()
        for key, _ in rows:
            batch.delete(_TABLE, key)
        await spool.commit(batch)


def describe_running(data_dir: Path, record: RunningService) -> str:
    """What a second `serve` tells the person who started it."""
    since = datetime.fromtimestamp(record.started_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    mode = " in sandbox mode" if record.sandbox else ""
    return (
        f"Postwire already runs on the data directory {data_dir}{mode}: pid {record.pid} on "
        f"host {record.host}, since {since} UTC, listening on {', '.join(record.addresses)}. "
        f"Use that one, stop it first (kill {record.pid}, or Ctrl-C where it runs), or give "
        "this one a data directory of its own (data_dir, POSTWIRE_DATA_DIR)"
    )


class ProcessRecord:
    """This process's rows in the record, as `serve_service_record` keeps them."""

    def __init__(
        self, spool: Spool, generation: str, claim: Claim | None, row: ServiceProcess
    ) -> None:
        self._spool = spool
        self._generation = generation
        self._claim = claim
        self._row = row

    async def publish_listeners(self, listeners: dict[str, list[str]]) -> None:
        """Record the addresses this process is bound to (name -> addresses), now."""
        self._row = replace(self._row, listeners=listeners)
        await self._write(self._spool.clock_ms())

    async def _write(self, now_ms: int) -> None:
        batch = WriteBatch()
        self._row = replace(self._row, renewed_ms=now_ms)
        PROCESSES.put(batch, _process_key(self._generation, self._row.index), self._row)
        if self._claim is not None:
            self._claim = replace(
                self._claim, record=replace(self._claim.record, renewed_ms=now_ms)
            )
            CLAIMS.put(batch, self._claim.key, self._claim.record)
        await self._spool.commit(batch)

    async def remove(self) -> None:
        batch = WriteBatch()
        PROCESSES.delete(batch, _process_key(self._generation, self._row.index))
        if self._claim is not None:
            CLAIMS.delete(batch, self._claim.key)
        await self._spool.commit(batch)

    async def renew(self) -> None:
        try:
            await self._write(self._spool.clock_ms())
        except SpoolError as exc:  # full, say: the next round tries again
            log.warning("cannot renew this process's record in the data directory: %s", exc)


async def serve_service_record(
    config: Config,
    deps: ServiceDeps,
    *,
    claim: Claim | None,
    task_status: trio.TaskStatus[ProcessRecord] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Keep this process's row (and the first process's `claim`) renewed every `RENEW_SECONDS`
    until the stage stops, then delete them. Reports the `ProcessRecord` that publishes the
    process's listeners once bound. Cancelled, it leaves the rows, dead once the process is
    gone. A worker (`claim` None) writes under the latest claim, its first process's."""
    # A worker's first process claimed before starting it; were the claim gone, the lowest
    # generation keeps the row out of the way of any claim (the next one clears it).
    generation = claim.key if claim is not None else _latest_generation(deps.spool) or f"{0:012d}"
    now_ms = deps.spool.clock_ms()
    row = ServiceProcess(
        deps.process_index, os.getpid(), socket.gethostname(), postwire.__version__, now_ms, now_ms
    )
    record = ProcessRecord(deps.spool, generation, claim, row)
    await record.renew()
    task_status.started(record)
    while True:
        with trio.move_on_after(RENEW_SECONDS):
            await deps.stopping.wait()
        if deps.stopping.is_set():
            break
        await record.renew()
    try:
        await record.remove()
    except SpoolError as exc:
        log.warning("cannot remove this process's record from the data directory: %s", exc)
