"""Durable enqueues/s of 4 KiB messages: group commit under many concurrent Trio callers, against
one fsync per message (the same LMDB through the independent `lmdb` package) in the same run.

The message is a real 4 KiB email (text + HTML, built by the core). The spool compresses
bodies, so the same run also measures 4 KiB of random bytes, the case where nothing compresses.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path

import lmdb
import trio

from postwire import _core
from postwire.store.spool import TABLES, Spool


def _mail_of_4_kib() -> bytes:
    lines = [
        f"Order #{1000 + i}: {i + 1} x item SKU-{7919 * i % 10007:05d}, shipped" for i in range(24)
    ]
    text = "Hello Ann,\n\nYour receipt:\n" + "\n".join(lines) + "\n\nThanks, the shop\n"
    html = "<html><body><p>Hello Ann,</p><ul>" + "".join(f"<li>{line}</li>" for line in lines)
    html += "</ul><p>Thanks, the shop</p></body></html>"
    message = _core.build_message(
        sender=("The Shop", "orders@shop.example"),
        to=[("Ann Lee", "ann@example.org")],
        subject="Your receipt",
        text=text,
        html=html,
        # A small binary part (a logo, say) keeps the message from compressing unrealistically.
        attachments=[_core.Attachment(random.Random(4096).randbytes(1100), "logo.png")],
    )
    return message[:4096].ljust(4096, b" ")


MAIL = _mail_of_4_kib()
NOISE = os.urandom(4096)
CALLERS = 2000


async def _group_commit_rate(path: Path, seconds: float, callers: int, body: bytes) -> float:
    spool = Spool(_core.Spool(path, tables=list(TABLES), map_size=16 << 30, max_batch=4096))
    done = 0
    deadline = trio.current_time() + seconds

    async def caller() -> None:
        nonlocal done
        while trio.current_time() < deadline:
            batch = _core.WriteBatch()
            batch.enqueue(_core.new_id(), body, 0, 0)
            await spool.commit(batch)
            done += 1

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        async with trio.open_nursery() as callers_nursery:
            for _ in range(callers):
                callers_nursery.start_soon(caller)
        elapsed = time.perf_counter() - started
        nursery.cancel_scope.cancel()
    await spool.close()
    return done / elapsed


def _single_commit_rate(path: Path, seconds: float) -> float:
    env = lmdb.open(str(path), map_size=4 << 30, max_dbs=4)
    bodies = env.open_db(b"bodies")
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        with env.begin(write=True, db=bodies) as txn:
            txn.put(b"m%d" % done, MAIL)
        done += 1
    elapsed = time.perf_counter() - started
    env.close()
    return done / elapsed


def run(seconds: float) -> dict[str, float]:
    """Enqueues/s for Postwire's group commit and for one durable commit per message."""
    with tempfile.TemporaryDirectory(dir=".") as scratch:
        root = Path(scratch)
        single = _single_commit_rate(root / "single", seconds)
        mail = trio.run(_group_commit_rate, root / "mail", seconds, CALLERS, MAIL)
        noise = trio.run(_group_commit_rate, root / "noise", seconds, CALLERS, NOISE)
    return {
        "postwire group commit": mail,
        "postwire group commit, incompressible": noise,
        "lmdb one commit per message": single,
    }


if __name__ == "__main__":
    print(run(3.0))
