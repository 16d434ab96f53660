"""DKIM signatures for concurrent callers, made in batches: one worker-thread hop per batch.

Under load every SMTP session of a process signs one email at a time; a hop to a worker thread
and the wake-up back, per email, was a twelfth of the service's time. Callers queue here
instead. The first one leads: it takes every signature queued, makes them in one worker thread
(RSA releases the GIL), wakes their callers, and hands the lead to the next caller queued
meanwhile, so that no caller signs for others for longer than one batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import outcome
import trio

from postwire import _core

_Turn = Literal["signed", "lead"]


@dataclass(slots=True, eq=False)  # compared by identity
class _Request:
    signer: _core.DkimSigner
    message: bytes
    task: trio.lowlevel.Task
    result: outcome.Outcome[bytes] | None = None


class SigningQueue:
    """`await sign(signer, message)`: the DKIM-Signature header field for `message`."""

    def __init__(self) -> None:
        self._queued: list[_Request] = []
        # Requests whose callers are parked, by task: a cancelled caller leaves this.
        self._parked: dict[trio.lowlevel.Task, _Request] = {}
        self._leading = False

    async def sign(self, signer: _core.DkimSigner, message: bytes) -> bytes:
        request = _Request(signer, message, trio.lowlevel.current_task())
        self._queued.append(request)
        if self._leading:
            self._parked[request.task] = request

            def abort(_: object) -> trio.lowlevel.Abort:
                del self._parked[request.task]
                if request in self._queued:
                    self._queued.remove(request)
                return trio.lowlevel.Abort.SUCCEEDED

            turn: _Turn = await trio.lowlevel.wait_task_rescheduled(abort)
            if turn == "signed":
                assert request.result is not None
                return request.result.unwrap()
        await self._lead()
        assert request.result is not None
        return request.result.unwrap()

    async def _lead(self) -> None:
        self._leading = True
        batch, self._queued = self._queued, []
        try:
            # Shielded: the batch is others' too, and signing takes milliseconds at most.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_sign_all, batch)
        finally:
            leader = trio.lowlevel.current_task()
            for request in batch:
                if request.result is None:  # the worker thread never ran
                    request.result = outcome.Error(RuntimeError("the signature was not made"))
                parked = self._parked.pop(request.task, None) is not None
                if request.task is not leader and parked:
                    trio.lowlevel.reschedule(request.task, outcome.Value("signed"))
            self._hand_over()

    def _hand_over(self) -> None:
        """Make the first caller queued the leader, or stop leading. Every queued caller is
        parked: one that is cancelled leaves the queue too."""
        if not self._queued:
            self._leading = False
            return
        successor = self._queued[0]
        del self._parked[successor.task]
        trio.lowlevel.reschedule(successor.task, outcome.Value("lead"))


def _sign_all(batch: list[_Request]) -> None:
    for request in batch:
        request.result = outcome.capture(request.signer.sign, request.message)
