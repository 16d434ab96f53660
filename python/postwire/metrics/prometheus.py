"""`GET /metrics` in Prometheus text format, on `metrics.listen`, for operators.

The listener runs in the first process only. It answers with this process's numbers as they
are and every worker's latest publication (`operator_publication`), plus what the shared spool
says at the time of the scrape; see docs/metrics.md for the series. The listener has no
authentication: bind it to loopback or a private network (the default is 127.0.0.1:9464).
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import trio
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Scope,
)

from postwire.config import Config, process_count
from postwire.http_serving import HttpLimits, serve_http
from postwire.metrics.operator_exposition import CONTENT_TYPE, render, spool_facts
from postwire.metrics.operator_publication import (
    forget_earlier_runs,
    own_record,
    published_records,
)
from postwire.services import ServiceDeps
from postwire.store.spool import Spool


def exposition(config: Config, spool: Spool, process_index: int) -> str:
    """The page `GET /metrics` answers: this process live, the others as last published."""
    now_ms = int(time.time() * 1000)
    records = [r for r in published_records(spool, now_ms) if r.index != process_index]
    records.append(own_record(process_index, now_ms))
    facts = spool_facts(spool, Path(config.data_dir) / "spool" / "data.mdb", now_ms)
    return render(records, facts, process_count(config))


def metrics_app(config: Config, spool: Spool, process_index: int) -> ASGIFramework:
    """A bare ASGI app: `GET /metrics` (and HEAD), 404 elsewhere, 405 for other methods."""

    async def app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"] != "/metrics":
            status, body, content_type = 404, b"Not found: the metrics are at /metrics\n", None
        elif scope["method"] not in ("GET", "HEAD"):
            status, body, content_type = 405, b"Method not allowed: use GET\n", None
        else:
            # Reads of the memory-mapped spool and a few hundred lines: no thread needed.
            page = exposition(config, spool, process_index)
            status, body, content_type = 200, page.encode(), CONTENT_TYPE
        headers = [
            (b"content-type", (content_type or "text/plain; charset=utf-8").encode()),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
        ]
        if status == 405:
            headers.append((b"allow", b"GET, HEAD"))
        start: HTTPResponseStartEvent = {
            "type": "http.response.start", "status": status, "headers": headers, "trailers": False
        }  # fmt: skip
        await send(start)
        end: HTTPResponseBodyEvent = {
            "type": "http.response.body",
            "body": b"" if scope["method"] == "HEAD" else body,
            "more_body": False,
        }
        await send(end)

    return app


async def serve_prometheus(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `GET /metrics` on `metrics.listen` until the stage stops; with an empty
    `metrics.listen` there is no listener (and workers publish nothing).

    Starts by dropping earlier runs' worker rows, before any worker of this run starts.
    """
    if not config.metrics.listen:
        task_status.started()
        await deps.stopping.wait()
        return
    await forget_earlier_runs(deps.spool)
    app = metrics_app(config, deps.spool, deps.process_index)
    async with trio.open_nursery() as nursery:
        await nursery.start(
            partial(
                serve_http,
                app,
                config.metrics.listen,
                deps.stopping,
                name="metrics",
                key="metrics.listen",
                limits=HttpLimits.of(config),
            )
        )
        task_status.started()
