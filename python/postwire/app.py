"""The supervisor of `postwire serve`: one task tree, started in order and stopped in reverse.

Services run in three stages, each a nursery nested in the one before it:

    storage      the spool                                   started first, stopped last
    processing   delivery, domain checks, webhook dispatch
    intake       REST API, SMTP submission, worker processes started last, stopped first

Every service has the same shape, `async def serve_x(config, deps, *, task_status)`: it calls
`task_status.started(handle)` once truly ready, and the handle joins the `ServiceDeps` of later
stages. Shutdown (first SIGINT or SIGTERM) stops the stages from the inside out: a stage's
`stopping` event is set, its services stop taking work and finish what they hold, and whatever
still runs at the stage's deadline is cancelled. The spool is cancelled last, which closes it.
A second signal skips the remaining grace periods, but keeps the order.

With `processes = N` the first process starts N-1 workers in its intake stage (`workers.py`);
each runs the same stages with only the spool, delivery and SMTP submission (`run_worker`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import shlex
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol, TypeVar

import dns.asyncbackend
import trio

from postwire.config import Config, join_host_port, process_count
from postwire.connections import raise_descriptor_limit
from postwire.errors import ConfigError
from postwire.services import Reloads, ServiceDeps
from postwire.store.running_service import (
    Claim,
    ProcessRecord,
    claim_data_dir,
    serve_service_record,
)
from postwire.store.spool import Spool, serve_spool

if TYPE_CHECKING:
    from postwire.smtp.submission import ListeningSocket

log = logging.getLogger("postwire")

# How long a stopping stage may take to finish in-flight work before it is cancelled.
SHUTDOWN_GRACE_SECONDS = 10.0


HandleT = TypeVar("HandleT")
HandleT_co = TypeVar("HandleT_co", covariant=True)


class Service(Protocol[HandleT_co]):
    """`async def serve_x(config, deps, *, task_status)`: reports its handle once truly ready."""

    def __call__(
        self, config: Config, deps: ServiceDeps, *, task_status: trio.TaskStatus[HandleT_co]
    ) -> Awaitable[None]: ...


class Stage:
    """One nursery of services that start together and stop together."""

    def __init__(self, name: str, nursery: trio.Nursery) -> None:
        self.name = name
        self.nursery = nursery
        self.stopping = trio.Event()

    async def start(self, service: Service[HandleT], config: Config, deps: ServiceDeps) -> HandleT:
        """Start `service(config, deps, task_status=...)` here; return what it reports ready."""
        deps = dataclasses.replace(deps, stopping=self.stopping)
        handle: HandleT = await self.nursery.start(service, config, deps)
        return handle


class _Shutdown:
    """Turns signals into the stop of the stages, innermost first."""

    def __init__(self) -> None:
        self.requested = trio.Event()
        self.ready = False
        self.forced = False
        # What SIGHUP reloads, once the spool's stage has made the process's deps.
        self.reloads: Reloads | None = None
        # Every stage opened, outermost first. None is removed: cancelling a finished stage is
        # harmless, and a second signal must reach a stage that is still draining.
        self._stages: list[Stage] = []

    def request(self) -> None:
        if not self.requested.is_set():
            log.info("shutting down")
            self.requested.set()
            if not self.ready and self._stages:
                # Still starting: abandon what the innermost stage was starting.
                self._stages[-1].nursery.cancel_scope.cancel()
        elif not self.forced:
            log.warning("second signal: cancelling in-flight work now")
            self.forced = True
            for stage in self._stages:
                if stage.stopping.is_set():
                    stage.nursery.cancel_scope.cancel()

    @asynccontextmanager
    async def stage(self, name: str, *, grace: float) -> AsyncIterator[Stage]:
        """Open a stage; on leaving it, stop its services within `grace` seconds."""
        async with trio.open_nursery() as nursery:
            stage = Stage(name, nursery)
            self._stages.append(stage)
            if self.requested.is_set() and not self.ready:
                nursery.cancel_scope.cancel()
            try:
                yield stage
            finally:
                log.debug("stopping %s", name)
                stage.stopping.set()
                nursery.cancel_scope.deadline = min(
                    nursery.cancel_scope.deadline,
                    trio.current_time() + (0.0 if self.forced else grace),
                )
        if grace > 0 and nursery.cancel_scope.cancel_called and self.ready and not self.forced:
            log.warning("%s did not finish within %g s and was cancelled", name, grace)

    async def receive_signals(self, signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            log.debug("received %s", signal.Signals(signum).name)
            if signum != signal.SIGHUP:
                self.request()
            elif self.reloads is not None:
                self.reloads.reload()


async def run(
    config: Config, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run every service until SIGINT or SIGTERM, then stop them in order and return.

    Owns the whole task tree and the process's SIGINT/SIGTERM handling (so it must run in the
    main thread). Reports ready through `task_status` once every service is. Cancelling it stops
    everything at once, without grace; the spool still closes.
    """
    _create_data_dir(config)
    await _serve(config, _Role(), task_status.started)


async def run_worker(
    config: Config,
    index: int,
    listeners: Sequence[ListeningSocket],
    report_ready: Callable[[], None],
) -> None:
    """Run worker process `index`: the spool, delivery, and SMTP submission on `listeners`
    (the first process's sockets), until SIGINT or SIGTERM; `report_ready` once serving."""
    await _serve(config, _Role(index, listeners), report_ready)


@dataclass(frozen=True, slots=True)
class _Role:
    """Which process this is: the first (index 0, binds the sockets) or a worker."""

    index: int = 0
    listeners: Sequence[ListeningSocket] = ()


async def _serve(config: Config, role: _Role, report_ready: Callable[[], None]) -> None:
    # With trio-asyncio in the process, dnspython's auto-detection can pick asyncio.
    dns.asyncbackend.set_default_backend("trio")
    raise_descriptor_limit()  # every connection costs one
    shutdown = _Shutdown()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(shutdown.receive_signals, signals)
            await _run_stages(config, role, shutdown, report_ready)
            nursery.cancel_scope.cancel()  # stop listening for signals
    log.info("stopped")


async def _run_stages(
    config: Config, role: _Role, shutdown: _Shutdown, report_ready: Callable[[], None]
) -> None:
    # The spool's stage has no grace: it has no in-flight work once everything inside it stopped.
    async with shutdown.stage("storage", grace=0.0) as storage:
        spool: Spool = await storage.nursery.start(serve_spool, config)
        deps = ServiceDeps(spool=spool, process_index=role.index)
        shutdown.reloads = deps.reloads
        claim: Claim | None = None
        if role.index == 0:
            from postwire.store.emails import index_earlier_emails

            # Before any listener: a second serve on this data directory names the first.
            claim = await claim_data_dir(spool, config)
            # The only process of this node now: batches a stopped one left between the table
            # store and the spool are completed or undone before anything reads them.
            await spool.finish_interrupted_writes()
            # Once per store: emails kept before the dashboard's index get their entries,
            # before delivery or intake can change any of them.
            await index_earlier_emails(spool)
        async with shutdown.stage("processing", grace=SHUTDOWN_GRACE_SECONDS) as processing:
            # Renewed until this process's work has stopped; its listeners join it once bound.
            record = await processing.start(
                partial(serve_service_record, claim=claim), config, deps
            )
            if role.index == 0:
                deps = await _start_processing(processing, config, deps)
            else:
                deps = await _start_worker_processing(processing, config, deps)
            async with shutdown.stage("intake", grace=SHUTDOWN_GRACE_SECONDS) as intake:
                if role.index == 0:
                    await _start_intake(intake, config, deps, record)
                else:
                    await _start_worker_intake(intake, config, deps, role.listeners, record)
                shutdown.ready = True
                if role.index == 0:
                    _log_ready(config, spool)
                report_ready()
                await shutdown.requested.wait()


async def _start_processing(stage: Stage, config: Config, deps: ServiceDeps) -> ServiceDeps:
    """Start the services that work off the spool; return deps with their handles added.

    Delivery, the scheduler and webhook dispatch go here, each as
    `handle = await stage.start(serve_x, config, deps)`.
    """
    from postwire.audiences.imports import serve_contact_imports
    from postwire.broadcasts.engine import serve_broadcasts
    from postwire.delivery.engine import serve_delivery
    from postwire.domains.verification import serve_domain_verifier
    from postwire.insights.service import serve_insights
    from postwire.metrics.domain_health import serve_domain_health
    from postwire.metrics.prometheus import serve_prometheus
    from postwire.sandbox import serve_sandbox
    from postwire.store.idempotency import serve_idempotency_sweeper
    from postwire.webhooks.dispatcher import serve_webhooks

    await stage.start(serve_sandbox, config, deps)  # first: its domain is ready before intake
    verifier = await stage.start(serve_domain_verifier, config, deps)
    await stage.start(serve_idempotency_sweeper, config, deps)
    engine = await stage.start(serve_delivery, config, deps)
    webhooks = await stage.start(serve_webhooks, config, deps)
    deps = dataclasses.replace(deps, domain_verifier=verifier, delivery=engine, webhooks=webhooks)
    await stage.start(serve_contact_imports, config, deps)
    await stage.start(serve_broadcasts, config, deps)
    await stage.start(serve_insights, config, deps)
    await stage.start(serve_domain_health, config, deps)
    await stage.start(serve_prometheus, config, deps)
    return deps


async def _start_worker_processing(stage: Stage, config: Config, deps: ServiceDeps) -> ServiceDeps:
    """A worker's processing stage: delivery (it leaves earlier runs' leases alone), and the
    publication of its operator metrics for the first process's Prometheus listener."""
    from postwire.delivery.engine import serve_delivery
    from postwire.metrics.operator_publication import serve_metrics_publication

    engine = await stage.start(serve_delivery, config, deps)
    await stage.start(serve_metrics_publication, config, deps)
    return dataclasses.replace(deps, delivery=engine)


async def _start_intake(
    stage: Stage, config: Config, deps: ServiceDeps, record: ProcessRecord
) -> None:
    """Start the services that accept mail, the REST API, the dashboard and SMTP submission,
    then the worker processes, which accept from the same SMTP sockets."""
    from postwire.api.app import serve_api
    from postwire.dashboard.serve import serve_dashboard
    from postwire.smtp.submission import bind_submission_sockets, serve_submission
    from postwire.workers import serve_workers

    listeners = bind_submission_sockets(config)
    await stage.start(partial(_hold_sockets, listeners=listeners), config, deps)
    # The dashboard first: building it imports its page modules (SAML's libraries among them),
    # which holds the event loop for a moment that an API already answering would stall in.
    dashboard_urls = await stage.start(serve_dashboard, config, deps)
    api_urls = await stage.start(serve_api, config, deps)
    await stage.start(partial(serve_submission, listeners=listeners), config, deps)
    addresses = {"REST API": api_urls, "dashboard": dashboard_urls}
    if config.metrics.listen:
        addresses["metrics"] = [f"http://{config.metrics.listen}"]  # as configured
    await record.publish_listeners(addresses | _smtp_listener_addresses(listeners))
    if process_count(config) > 1:
        await stage.start(partial(serve_workers, listeners=listeners), config, deps)


async def _start_worker_intake(
    stage: Stage,
    config: Config,
    deps: ServiceDeps,
    listeners: Sequence[ListeningSocket],
    record: ProcessRecord,
) -> None:
    from postwire.smtp.submission import serve_submission

    await stage.start(partial(_hold_sockets, listeners=listeners), config, deps)
    await stage.start(partial(serve_submission, listeners=listeners), config, deps)
    await record.publish_listeners(_smtp_listener_addresses(listeners))


def _smtp_listener_addresses(listeners: Sequence[ListeningSocket]) -> dict[str, list[str]]:
    """The SMTP listeners by kind, as bound (port 0 in the config shows the port it got)."""
    found: dict[str, list[str]] = {}
    for listener in listeners:
        host, port = listener.sock.getsockname()[:2]
        kind = "SMTP (implicit TLS)" if listener.implicit_tls else "SMTP (STARTTLS)"
        found.setdefault(kind, []).append(join_host_port(host, port))
    return found


async def _hold_sockets(
    config: Config,
    deps: ServiceDeps,
    *,
    listeners: Sequence[ListeningSocket],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Keep the listening sockets open for the intake stage's services (and workers started
    again), closing them as it stops: each server accepts on its own duplicate."""
    try:
        task_status.started()
        await deps.stopping.wait()
    finally:
        for listener in listeners:
            listener.sock.close()


def _create_data_dir(config: Config) -> None:
    # Private: it holds API key hashes and DKIM private keys.
    try:
        config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"config key 'data_dir': cannot create {str(config.data_dir)!r}: {exc.strerror}"
        ) from None


def _log_ready(config: Config, spool: Spool) -> None:
    from postwire.invocation import command_as_run

    # Commands a person can paste as they are: the `postwire` this serve was run as.
    postwire = command_as_run()
    if config.config_file is None:
        log.info("configuration: embedded default (no --config, POSTWIRE_CONFIG or config file)")
        # Its data is ./postwire-data: other commands find it only from the same directory.
        where = f" (in {config.data_dir.parent})"
        options = ""
    else:
        log.info("configuration: %s", config.config_file)
        where = ""
        options = f" --config {shlex.quote(str(config.config_file))}"
    key_command = f"{postwire} keys create --name my-key{options}"
    user_command = f"{postwire} users create --email you@example.com{options}"
    log.info("data directory: %s", config.data_dir)
    log.info("spool: %s (map size %s)", config.data_dir / "spool", _gib(config.spool.map_size))
    for warning in _setup_warnings(config, spool):
        log.warning("%s", warning)
    processes = process_count(config)
    extra = f", {processes} processes" if processes > 1 else ""
    log.info("postwire is ready (pid %d%s)", os.getpid(), extra)
    log.info("to get an API key, run%s: %s", where, key_command)
    log.info(
        "dashboard: %s; to make its first user, run%s: %s",
        config.dashboard.public_url, where, user_command,
    )  # fmt: skip


def _gib(size: int) -> str:
    return f"{size / 1024**3:.3g} GiB" if size >= 1024**3 else f"{math.ceil(size / 1024**2)} MiB"


def _setup_warnings(config: Config, spool: Spool) -> list[str]:
    """What in the config the Internet will not accept: about the records every domain
    publishes, always; about tracked links, when some domain has tracking on. None in the
    sandbox, where nothing reaches the Internet."""
    from postwire.domains.setup_warnings import record_warnings, tracking_warnings
    from postwire.domains.store import scan_all_domains

    if config.sandbox:
        return []
    messages = [warning.message for warning in record_warnings(config)]
    tracking = tracking_warnings(config)
    if tracking:
        tracked = sorted(
            {d.name for d in scan_all_domains(spool) if d.open_tracking or d.click_tracking}
        )
        if tracked:
            more = f" and {len(tracked) - 3} more" if len(tracked) > 3 else ""
            domains = ", ".join(tracked[:3]) + more
            messages += [
                f"{warning.message} (tracking is on for {domains})" for warning in tracking
            ]
    return messages
