"""Requests made in one turn of the event loop leave the process together: one call into the
core for all of them, each asker still answered with its own request's answer."""

from __future__ import annotations

import pytest
import trio

from postwire.errors import SpoolError
from postwire.store.ticket_waiters import RequestsTogether, TicketWaiters


class RecordingCore:
    """Hands out tickets like a core and remembers each call's requests."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.tickets: dict[int, str] = {}
        self.refusing = False

    def send(self, requests: list[str]) -> list[int]:
        if self.refusing:
            raise SpoolError("the spool is closed")
        self.calls.append(requests)
        first = len(self.tickets)
        for n, request in enumerate(requests):
            self.tickets[first + n] = request
        return list(range(first, first + len(requests)))


class Askers:
    """Tasks asking through one `RequestsTogether`, and the answers they got."""

    def __init__(self) -> None:
        self.core = RecordingCore()
        self.waiters = TicketWaiters()
        self.together = RequestsTogether(self.waiters, self.core.send)
        self.answers: dict[str, object] = {}

    async def ask(self, request: str) -> None:
        self.answers[request] = await self.together.ask(request)

    async def answer_all(self) -> None:
        """The dispatcher's part: every ticket is answered with its request upper-cased."""
        await trio.testing.wait_all_tasks_blocked()
        for ticket, request in self.core.tickets.items():
            self.waiters.wake(ticket, request.upper(), None)


@pytest.mark.parametrize("sender", ["its own task", "a callback of the loop"])
async def test_requests_of_one_turn_leave_in_one_call_and_each_gets_its_answer(
    sender: str,
) -> None:
    askers = Askers()
    async with trio.open_nursery() as nursery:
        if sender == "its own task":
            nursery.start_soon(askers.together.run)
            await trio.testing.wait_all_tasks_blocked()
        for n in range(20):
            nursery.start_soon(askers.ask, f"key{n}")
        await askers.answer_all()
        while len(askers.answers) < 20:
            await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()  # the sender runs until cancelled
    assert len(askers.core.calls) == 1  # Trio runs the askers in an order of its own
    assert sorted(askers.core.calls[0]) == sorted(f"key{n}" for n in range(20))
    assert askers.answers == {f"key{n}": f"KEY{n}" for n in range(20)}


async def test_an_asker_cancelled_before_the_call_is_left_out_of_it() -> None:
    askers = Askers()
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as given_up:
            nursery.start_soon(askers.ask, "kept")
            given_up.cancel()
            await askers.together.ask("dropped")  # cancelled as it parks, before it is sent
        nursery.start_soon(askers.answer_all)
    assert askers.core.calls == [["kept"]]
    assert askers.answers == {"kept": "KEPT"}


async def test_a_refused_call_fails_every_asker_with_the_error() -> None:
    core, waiters = RecordingCore(), TicketWaiters()
    core.refusing = True
    together = RequestsTogether(waiters, core.send)
    failures: list[str] = []

    async def ask(request: str) -> None:
        with pytest.raises(SpoolError) as refused:
            await together.ask(request)
        failures.append(str(refused.value))

    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(ask, f"key{n}")
    assert failures == ["the spool is closed"] * 3
