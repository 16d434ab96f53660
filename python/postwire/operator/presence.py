"""The service that tells `postwire status` (another process) what this process is: its pid,
version and listeners, kept in the store (`store.service_presence`) while it serves."""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from collections.abc import Sequence

import trio

import postwire
from postwire.config import Config, join_host_port
from postwire.errors import SpoolError
from postwire.services import ServiceDeps
from postwire.smtp.submission import ListeningSocket
from postwire.store.service_presence import (
    RENEW_SECONDS,
    ProcessPresence,
    forget_earlier_presences,
    put_presence,
    remove_presence,
)

log = logging.getLogger("postwire")


def smtp_listener_addresses(listeners: Sequence[ListeningSocket]) -> dict[str, list[str]]:
    """The SMTP listeners by kind, as bound (port 0 in the config shows the port it got)."""
    found: dict[str, list[str]] = {}
    for listener in listeners:
        host, port = listener.sock.getsockname()[:2]
        kind = "SMTP (implicit TLS)" if listener.implicit_tls else "SMTP (STARTTLS)"
        found.setdefault(kind, []).append(join_host_port(host, port))
    return found


async def serve_presence(
    config: Config,
    deps: ServiceDeps,
    *,
    listeners: dict[str, list[str]],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Keep this process's row (`listeners`: name -> addresses) renewed until the stage stops,
    then delete it. The first process first drops the rows of earlier runs, so it must start
    before the workers do."""
    now_ms = deps.spool.clock_ms()
    presence = ProcessPresence(
        index=deps.process_index,
        pid=os.getpid(),
        host=socket.gethostname(),
        version=postwire.__version__,
        started_ms=now_ms,
        renewed_ms=now_ms,
        listeners=listeners,
    )
    if deps.process_index == 0:
        await forget_earlier_presences(deps.spool)
    await put_presence(deps.spool, presence)
    task_status.started()
    try:
        while True:
            with trio.move_on_after(RENEW_SECONDS):
                await deps.stopping.wait()
            if deps.stopping.is_set():
                break
            presence = dataclasses.replace(presence, renewed_ms=deps.spool.clock_ms())
            try:
                await put_presence(deps.spool, presence)
            except SpoolError as exc:  # a full spool: the row waits, the service does not
                log.warning("could not renew this process's presence: %s", exc)
    finally:
        with trio.move_on_after(1.0, shield=True):
            await remove_presence(deps.spool, deps.process_index)
