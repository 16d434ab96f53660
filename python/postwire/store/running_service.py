"""Which `postwire serve` runs on a data directory, so that a second one says so and stops.

The first process of a `serve` claims the data directory in the `running_service` table before it
binds any listener, and renews the claim while it runs. A second `serve` on the same directory
(another terminal, `make sandbox` beside `make serve`) then refuses to start with the pid, host and
addresses of the one that runs, rather than failing on the first port the two share.

A claim is a row keyed by its generation. Taking over inserts the next generation with
`WriteBatch.insert`, which fails the whole batch when another process inserted it first: of two
starting at once, one commits and the other reads the winner's row. No file lock is involved, so
this holds between processes on one host or on several that share the directory.

A claim is dead when its process is gone: on its own host as soon as its pid no longer runs (a
kill -9 is seen at once), anywhere once it was not renewed for `STALE_AFTER_MS`. A graceful
shutdown deletes it.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from postwire._core import WriteBatch
from postwire.errors import KeyExistsError, PostwireError, SpoolError
from postwire.store.spool import Spool, wall_clock_ms
from postwire.store.tables import Table

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.services import ServiceDeps

log = logging.getLogger("postwire")

RENEW_SECONDS: Final = 5.0
# Long enough that a busy service is never taken for a dead one.
STALE_AFTER_MS: Final = 30_000
# Rows of earlier runs that one claim clears at most (there is normally one).
CLEARED_AT_ONCE: Final = 100


@dataclass(frozen=True, slots=True)
class RunningService:
    """The claim of one `postwire serve`: who runs, where it listens, since and until when."""

    pid: int
    host: str
    started_ms: int
    renewed_ms: int
    addresses: list[str]  # "REST API 127.0.0.1:3000", ... as configured
    sandbox: bool = False


RUNNING_SERVICE = Table("running_service", RunningService)


@dataclass(frozen=True, slots=True)
class Claim:
    """This process's claim of the data directory, as committed."""

    key: str
    record: RunningService


class AlreadyRunningError(PostwireError):
    """Another `postwire serve` runs on this data directory."""


def service_addresses(config: Config) -> list[str]:
    """The listeners a `serve` with `config` opens, described for a person."""
    addresses = [f"REST API {config.api.listen}", f"dashboard {config.dashboard.listen}"]
    addresses += [f"SMTP {listen} (STARTTLS)" for listen in config.smtp.starttls_listen]
    addresses += [f"SMTP {listen} (TLS)" for listen in config.smtp.tls_listen]
    if config.metrics.listen:
        addresses.append(f"metrics {config.metrics.listen}")
    return addresses


async def claim_data_dir(spool: Spool, config: Config) -> Claim:
    """Claim the data directory for this process; `AlreadyRunningError` naming the service
    that holds it while that one lives."""
    for _ in range(3):
        now_ms = wall_clock_ms()
        rows = RUNNING_SERVICE.scan(spool, limit=CLEARED_AT_ONCE)
        if rows and is_alive(rows[-1][1], now_ms):
            raise AlreadyRunningError(describe_running(config.data_dir, rows[-1][1]))
        generation = int(rows[-1][0]) + 1 if rows else 1
        claim = Claim(
            f"{generation:012d}",
            RunningService(
                os.getpid(), socket.gethostname(), now_ms, now_ms, service_addresses(config),
                config.sandbox,
            ),
        )  # fmt: skip
        batch = WriteBatch()
        RUNNING_SERVICE.insert(batch, claim.key, claim.record)
        for key, _ in rows:
            RUNNING_SERVICE.delete(batch, key)
        try:
            await spool.commit(batch)
        except KeyExistsError:  # another serve claimed it at the same moment: read its row
            continue
        return claim
    raise AlreadyRunningError(
        f"another `postwire serve` is starting on the data directory {config.data_dir}"
    )


def is_alive(record: RunningService, now_ms: int) -> bool:
    """Whether the service that made `record` still runs (see the module docstring)."""
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


async def serve_claim_renewal(
    config: Config,
    deps: ServiceDeps,
    *,
    claim: Claim,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Renew `claim` every `RENEW_SECONDS` until the stage stops, then delete it. Cancelled,
    it leaves the row, which is dead once this process is gone."""
    task_status.started()
    while True:
        with trio.move_on_after(RENEW_SECONDS):
            await deps.stopping.wait()
        batch = WriteBatch()
        if deps.stopping.is_set():
            RUNNING_SERVICE.delete(batch, claim.key)
        else:
            record = replace(claim.record, renewed_ms=wall_clock_ms())
            RUNNING_SERVICE.put(batch, claim.key, record)
        try:
            await deps.spool.commit(batch)
        except SpoolError as exc:  # full, say: the next round tries again
            log.warning("cannot renew this service's claim of its data directory: %s", exc)
        if deps.stopping.is_set():
            return
