"""Tasks parked on the tickets of a Rust core's requests, woken with their answers.

The core (the spool, the PostgreSQL table store) takes a request, returns a ticket at once and
later lists `(ticket, answer, error)` among its completions; one dispatcher task reads those
and hands each answer to the task parked on its ticket. Parking directly, rather than one
`trio.Event` per request, keeps the scheduler's work per request small.
"""

from __future__ import annotations

import outcome
import trio


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

    def wake(self, ticket: int, answer: object, error: BaseException | None) -> None:
        """Hand the task parked on `ticket` its answer (or error); nobody waiting is fine."""
        task = self._waiting.pop(ticket, None)
        if task is not None:
            result = outcome.Value(answer) if error is None else outcome.Error(error)
            trio.lowlevel.reschedule(task, result)
