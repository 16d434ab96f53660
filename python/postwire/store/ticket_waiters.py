"""Tasks parked on the tickets of a Rust core's requests, woken with their answers.

The core (the spool, the PostgreSQL table store) takes a request, returns a ticket at once and
later lists `(ticket, answer, error)` among its completions; one dispatcher task reads those
and hands each answer to the task parked on its ticket. Parking directly, rather than one
`trio.Event` per request, keeps the scheduler's work per request small.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import outcome
import trio

Request = TypeVar("Request")


class TicketWaiters:
    def __init__(self) -> None:
        self._waiting: dict[int, trio.lowlevel.Task] = {}

    async def wait(self, ticket: int) -> object:
        """Park until `ticket` is woken: its answer, or its error raised. A caller cancelled
        meanwhile forgets the ticket (its request may still complete)."""
        self._waiting[ticket] = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            del self._waiting[ticket]
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    def adopt(self, ticket: int, task: trio.lowlevel.Task) -> None:
        """Have `task`, already parked by its caller, woken with `ticket`'s answer."""
        self._waiting[ticket] = task

    def forget(self, ticket: int) -> None:
        self._waiting.pop(ticket, None)

    def wake(self, ticket: int, answer: object, error: BaseException | None) -> None:
        """Hand the task parked on `ticket` its answer (or error); nobody waiting is fine."""
        task = self._waiting.pop(ticket, None)
        if task is not None:
            result = outcome.Value(answer) if error is None else outcome.Error(error)
            trio.lowlevel.reschedule(task, result)


class _Queued(Generic[Request]):
    __slots__ = ("cancelled", "request", "task", "ticket")

    def __init__(self, request: Request, task: trio.lowlevel.Task) -> None:
        self.request = request
        self.task = task
        self.ticket: int | None = None
        self.cancelled = False


class RequestsTogether(Generic[Request]):
    """Requests that tasks make in one turn of the event loop, sent to the core in one call:
    one wake-up of its thread instead of one a request, and there one statement for the gets of
    a table (`table_pg`). Their answers come as the others' do, through `waiters`."""

    def __init__(
        self, waiters: TicketWaiters, send: Callable[[list[Request]], Sequence[int]]
    ) -> None:
        self._waiters = waiters
        self._send = send
        self._queued: list[_Queued[Request]] = []
        self._sender: trio.lowlevel.Task | None = None  # `run`, while it waits for requests
        self._token: trio.lowlevel.TrioToken | None = None

    async def run(self) -> None:
        """Send what was asked, each time something was; runs until cancelled. Woken by the
        first request of a turn, it runs in the next one, when the turn's other requests have
        joined the first."""
        try:
            while True:
                self._sender = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.SUCCEEDED)
                self._flush()
        finally:
            self._sender = None

    async def ask(self, request: Request) -> object:
        """Park until `request`'s answer (or error) comes."""
        queued = _Queued(request, trio.lowlevel.current_task())
        if not self._queued:
            self._send_soon()
        self._queued.append(queued)

        def abort(_: object) -> trio.lowlevel.Abort:
            if queued.ticket is None:
                queued.cancelled = True
            else:
                self._waiters.forget(queued.ticket)
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    def _send_soon(self) -> None:
        if self._sender is not None:
            sender, self._sender = self._sender, None
            trio.lowlevel.reschedule(sender)
            return
        # No `run` (a caller without the dispatcher): a callback of the loop sends instead.
        if self._token is None:
            self._token = trio.lowlevel.current_trio_token()
        self._token.run_sync_soon(self._flush)

    def _flush(self) -> None:
        queued = [q for q in self._queued if not q.cancelled]
        self._queued = []
        if not queued:
            return
        try:
            tickets = self._send([q.request for q in queued])
        except Exception as error:  # e.g. the store closed: each asker gets the error
            for q in queued:
                trio.lowlevel.reschedule(q.task, outcome.Error(copy.copy(error)))
            return
        for q, ticket in zip(queued, tickets, strict=True):
            q.ticket = ticket
            self._waiters.adopt(ticket, q.task)
