"""`SigningQueue`: concurrent callers' signatures are made in batches, each caller gets its own
signature or error, and a cancelled caller does not stall the others."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio

from postwire import signing
from postwire.signing import SigningQueue


class FakeSigner:
    """Signs by echoing; refuses messages starting with b"bad"; slow enough to batch."""

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def sign(self, message: bytes) -> bytes:
        self.threads.add(threading.get_ident())
        if message.startswith(b"bad"):
            raise ValueError("cannot sign")
        threading.Event().wait(0.002)
        return b"sig:" + message


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    sign_all = signing._sign_all

    def counting(batch: list[Any]) -> None:
        sizes.append(len(batch))
        sign_all(batch)

    monkeypatch.setattr(signing, "_sign_all", counting)
    return sizes


async def test_concurrent_callers_are_signed_in_batches(batches: list[int]) -> None:
    queue, signer = SigningQueue(), FakeSigner()
    results: dict[int, bytes] = {}

    async def caller(number: int) -> None:
        results[number] = await queue.sign(signer, b"m%d" % number)  # type: ignore[arg-type]

    async with trio.open_nursery() as nursery:
        for number in range(50):
            nursery.start_soon(caller, number)
    assert results == {number: b"sig:m%d" % number for number in range(50)}
    assert sum(batches) == 50
    assert len(batches) < 10, batches
    assert threading.get_ident() not in signer.threads, "signed off the Trio thread"


async def test_each_caller_gets_its_own_error(batches: list[int]) -> None:
    queue, signer = SigningQueue(), FakeSigner()
    outcomes: dict[bytes, object] = {}

    async def caller(message: bytes) -> None:
        try:
            outcomes[message] = await queue.sign(signer, message)  # type: ignore[arg-type]
        except ValueError as exc:
            outcomes[message] = str(exc)

    async with trio.open_nursery() as nursery:
        for message in (b"a", b"bad", b"b", b"bad2", b"c"):
            nursery.start_soon(caller, message)
    assert outcomes == {
        b"a": b"sig:a",
        b"bad": "cannot sign",
        b"b": b"sig:b",
        b"bad2": "cannot sign",
        b"c": b"sig:c",
    }


async def test_a_cancelled_caller_does_not_stall_the_others(batches: list[int]) -> None:
    queue, signer = SigningQueue(), FakeSigner()
    results: list[bytes] = []

    async def caller(message: bytes) -> None:
        results.append(await queue.sign(signer, message))  # type: ignore[arg-type]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller, b"first")  # leads
        await trio.sleep(0)
        with trio.CancelScope() as cancelled:
            cancelled.cancel()
            await queue.sign(signer, b"never")  # type: ignore[arg-type]
        for message in (b"x", b"y"):
            nursery.start_soon(caller, message)
    assert sorted(results) == [b"sig:first", b"sig:x", b"sig:y"]
    with trio.fail_after(1):  # and the queue still works afterwards
        assert await queue.sign(signer, b"z") == b"sig:z"  # type: ignore[arg-type]
