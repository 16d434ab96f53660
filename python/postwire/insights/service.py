"""The insights service: computes each new email's insights off the send path and rechecks
authentication against live DNS on a schedule.

It follows the `emails` table, team by team: email ids are UUIDv7, so a team's new emails come
after the last key it looked at. A commit can land a moment after a later-made id's (two
requests racing), so each team's durable cursor trails the newest email by `SETTLE_MS`, and
every `SWEEP_SECONDS` the service reads again from that cursor: an email found without
insights is computed then. Insights and the cursor are written in the same commit; an email
computed twice (after a kill -9) is simply computed again, with the same result.

Delivery drops a message's body when it acks it, often before the service gets to the email:
the delivery engine then keeps a copy (`keep_body`, in the ack's commit), which the service
reads instead and drops in the commit that stores the email's insights. The sweep drops copies
left over (an email whose insights were stored before its delivery committed, one whose
insights failed, one older than `BACKLOG_MS`); started with insights off, the service drops
every copy once.

Nothing here runs when `insights.enabled` is false: the send path never knows about insights.
Cancelled at shutdown between two batches or mid-batch (a batch in flight may still commit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import trio

from postwire._core import WriteBatch
from postwire.concurrency import in_order
from postwire.config import Config
from postwire.domains.store import load_domain
from postwire.domains.verification import build_resolver
from postwire.errors import SpoolError, StoreUnavailableError
from postwire.insights.email_checks import EmailChecker
from postwire.services import ServiceDeps
from postwire.store.accounts import list_teams
from postwire.store.email_details import RawSource, raw_source_parked
from postwire.store.email_insights import (
    drop_kept_body,
    get_tail_cursor,
    has_insights,
    has_insights_parked,
    kept_body_key,
    kept_body_parked,
    put_insights,
    put_tail_cursor,
    scan_auth_checks,
    scan_kept_bodies,
)
from postwire.store.email_search import id_floor
from postwire.store.emails import EMAILS, EmailRecord
from postwire.store.outages import Outage
from postwire.store.spool import Spool

log = logging.getLogger("postwire.insights")

# Look for new emails this often, unless a team has a backlog (a full batch was read): often
# enough to find most messages still queued (delivery lets go of them), seldom enough that
# a busy server's new emails are computed and committed a batch at a time.
POLL_SECONDS: Final = 0.1
BATCH: Final = 200  # emails read and committed at once
# An email is committed within this of its id being made (a broadcast's page of emails is
# built and signed before its one commit, which under load takes seconds).
SETTLE_MS: Final = 30_000
SWEEP_SECONDS: Final = 60.0
RECHECK_SCAN_SECONDS: Final = 60.0
TEAMS_REFRESH_SECONDS: Final = 5.0
# Emails older than this when the service first sees their team get no insights (turning
# insights on does not start a computation over years of mail).
BACKLOG_MS: Final = 24 * 3600 * 1000
# The longest the service computes without letting the process's other tasks run.
SLICE_SECONDS: Final = 0.001
# rspamd scans of one batch running at once.
CONCURRENT_EMAILS: Final = 8
# Reads of a pass waiting at once (they leave for a table store on the network together).
READS_AT_ONCE: Final = 64


@dataclass(slots=True)
class _TeamTail:
    durable: str  # emails with keys up to this are done (an email id or an id floor)
    position: str  # where the next read starts
    sweep_started_ms: int | None = None  # reading again from `durable` since then


class InsightsTail:
    """Follows every team's new emails and computes their insights."""

    def __init__(self, config: Config, spool: Spool, checker: EmailChecker) -> None:
        self.config = config
        self.spool = spool
        self.checker = checker
        self.clock_ms: Callable[[], int] = checker.clock_ms
        self._tails: dict[str, _TeamTail] = {}

    def _tail(self, team_id: str) -> _TeamTail:
        tail = self._tails.get(team_id)
        if tail is None:
            oldest = id_floor(self.clock_ms() - BACKLOG_MS)
            durable = max(get_tail_cursor(self.spool, team_id) or "", oldest)
            tail = self._tails[team_id] = _TeamTail(durable, durable)
        return tail

    def start_sweep(self) -> None:
        """Read every team again from its durable cursor (see the module's docstring)."""
        now_ms = self.clock_ms()
        for tail in self._tails.values():
            if tail.sweep_started_ms is None:
                tail.sweep_started_ms = now_ms
                tail.position = tail.durable

    async def follow_team(self, team_id: str) -> int:
        """Compute insights for the team's next emails; return how many were read."""
        tail = self._tail(team_id)
        prefix = f"{team_id}/"
        # Raw rows: a sweep reads again emails done already, and only the others are decoded.
        rows = await self.spool.ascan(
            EMAILS.name,
            prefix=prefix.encode(),
            cursor=(prefix + tail.position).encode(),
            limit=BATCH,
        )
        ids = [key[len(prefix) :].decode() for key, _ in rows]
        # Read together: on a table store on the network, one statement for the pass.
        done = await in_order(
            lambda email_id: has_insights_parked(self.spool, team_id, email_id),
            ids,
            at_once=READS_AT_ONCE,
        )
        todo = [
            EMAILS.decode(raw)
            for (_, raw), has_insights in zip(rows, done, strict=True)
            if not has_insights
        ]
        batch = WriteBatch()
        await self._compute(batch, todo)
        if ids:
            tail.position = ids[-1]
        if len(rows) < BATCH and tail.sweep_started_ms is not None:
            settled = id_floor(tail.sweep_started_ms - SETTLE_MS)
            if settled > tail.durable:
                put_tail_cursor(batch, team_id, settled)
                tail.durable = settled
            tail.sweep_started_ms = None
        if len(batch):
            await self.spool.commit(batch)
        return len(rows)

    async def _compute(self, batch: WriteBatch, records: list[EmailRecord]) -> None:
        async def read_source(record: EmailRecord) -> RawSource | Exception | None:
            try:
                return await raw_source_parked(self.spool, record, sandboxed=self.config.sandbox)
            except Exception as error:  # that email's computation reports it
                return error

        # The messages are read together (one statement a pass on a table store on the
        # network), then checked one by one.
        sources = dict(
            zip(
                (record.id for record in records),
                await in_order(read_source, records, at_once=READS_AT_ONCE),
                strict=True,
            )
        )

        async def compute(record: EmailRecord) -> None:
            try:
                source = sources[record.id]
                if isinstance(source, Exception):
                    raise source
                stored = await self.checker.insights_of(batch, record, source)
            except Exception:  # one email's bug must not stop every other's insights
                log.exception("insights of email %s could not be computed", record.id)
                return
            put_insights(batch, record.team_id, record.id, stored)
            kept = await self._kept_copy(record, source)
            if kept is not None:
                drop_kept_body(batch, record.team_id, record.id, len(kept))

        if self.checker.scanner is None:
            # One after the other: all but an identity's first DNS check is answered from
            # memory, and a task per email would cost more than its checks. Those checks
            # need no checkpoint, so one is made every `SLICE_SECONDS`: a batch must not hold
            # the process's requests and deliveries for its whole length.
            yielded = time.perf_counter()
            for record in records:
                await compute(record)
                if time.perf_counter() - yielded > SLICE_SECONDS:
                    await trio.lowlevel.checkpoint()
                    yielded = time.perf_counter()
            return
        limiter = trio.CapacityLimiter(CONCURRENT_EMAILS)  # rspamd scans wait on the network

        async def limited(record: EmailRecord) -> None:
            async with limiter:
                await compute(record)

        async with trio.open_nursery() as nursery:
            for record in records:
                nursery.start_soon(limited, record)

    async def _kept_copy(self, record: EmailRecord, source: RawSource | None) -> bytes | None:
        """The copy of the email's message delivery kept, to drop with its insights.

        Read once: the checks' source read found the copy, or found none after the queue had
        let go of the message (an ack keeps its copy in the same commit that drops the message,
        and across two stores the table store's part, which holds the copy, lands first). Only
        when the checks read the message from the queue (or the sandbox inbox, where the copy
        was not looked for) is it read again: a delivery may have kept it since (one kept
        after this read, before the commit, is left to the sweep)."""
        if source is None:
            return None
        if source.where == "insights":
            return source.content
        return await kept_body_parked(self.spool, record.team_id, record.id)

    async def follow_all(self, team_ids: list[str]) -> bool:
        """Follow every team once; True if one has more emails waiting."""
        behind = False
        for team_id in team_ids:
            behind |= await self.follow_team(team_id) >= BATCH
        return behind


async def recheck_due(config: Config, spool: Spool, checker: EmailChecker) -> int:
    """Ask DNS again about every identity last checked `insights.recheck_hours` ago or more;
    return how many were checked."""
    due_before = checker.clock_ms() - config.insights.recheck_hours * 3_600_000
    checked = 0
    cursor: str | None = None
    while True:
        rows = scan_auth_checks(spool, cursor, BATCH)
        batch = WriteBatch()
        for _, check in rows:
            if check.checked_at_ms > due_before:
                continue
            domain = load_domain(spool, check.team_id, check.domain_id)
            if domain is None:  # removed: its emails say so when next read
                continue
            await checker.check_identity(batch, domain, check.from_domain)
            checked += 1
        if len(batch):
            await spool.commit(batch)
        if len(rows) < BATCH:
            return checked
        cursor = rows[-1][0]


async def drop_kept_bodies(spool: Spool, now_ms: int, *, every: bool = False) -> int:
    """Drop the message copies delivery kept that the service will not read (its email has
    insights, or is older than `BACKLOG_MS`), or `every` copy; return how many."""
    oldest = id_floor(now_ms - BACKLOG_MS)
    dropped = 0
    cursor: str | None = None
    while True:
        rows = scan_kept_bodies(spool, cursor, BATCH)
        batch = WriteBatch()
        count = 0
        for team_id, email_id, size in rows:
            if every or email_id < oldest or has_insights(spool, team_id, email_id):
                drop_kept_body(batch, team_id, email_id, size)
                count += 1
        if count:
            await spool.commit(batch)
            dropped += count
        if len(rows) < BATCH:
            return dropped
        cursor = kept_body_key(*rows[-1][:2])


async def _run(config: Config, spool: Spool, checker: EmailChecker) -> None:
    tail = InsightsTail(config, spool, checker)
    teams: list[str] = []
    next_teams = next_sweep = next_recheck = trio.current_time()
    outage = Outage("insights")
    while True:
        now = trio.current_time()
        try:
            if now >= next_teams:
                teams = [team.id for team in list_teams(spool)]
                next_teams = now + TEAMS_REFRESH_SECONDS
            if now >= next_sweep:
                tail.start_sweep()
                try:
                    await drop_kept_bodies(spool, checker.clock_ms())
                except StoreUnavailableError:
                    raise
                except SpoolError:
                    log.exception("leftover message copies were not dropped")
                next_sweep = now + SWEEP_SECONDS
            if now >= next_recheck:
                try:
                    await recheck_due(config, spool, checker)
                except StoreUnavailableError:
                    raise
                except SpoolError:
                    log.exception("authentication rechecks were not stored")
                next_recheck = now + RECHECK_SCAN_SECONDS
            try:
                behind = await tail.follow_all(teams)
            except StoreUnavailableError:
                raise
            except SpoolError:
                log.exception("insights were not stored; trying again")
                behind = False
        except StoreUnavailableError as error:  # each step is taken again once it is back
            await outage.wait(error)
            continue
        outage.succeeded()
        await trio.sleep(0 if behind else POLL_SECONDS)


async def _drop_every_kept_body(spool: Spool) -> None:
    try:
        dropped = await drop_kept_bodies(spool, spool.clock_ms(), every=True)
    except SpoolError:
        log.exception("message copies kept for insights were not dropped")
        return
    if dropped:
        log.info("insights are off: dropped %d message copies kept for them", dropped)


async def serve_insights(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Own the insights computation of the first process; return once `deps.stopping` is set.
    With `insights.enabled` false no email is looked at: it drops the message copies kept
    while insights were on, then waits."""
    if not config.insights.enabled:
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drop_every_kept_body, deps.spool)
            await deps.stopping.wait()
            nursery.cancel_scope.cancel()
        return
    checker = EmailChecker(config, deps.spool, build_resolver(config), deps.spool.clock_ms)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_run, config, deps.spool, checker)
        task_status.started()
        await deps.stopping.wait()
        nursery.cancel_scope.cancel()
