"""Durability: every id a writer saw acknowledged survives a SIGKILL at a random moment.

After each kill the spool file is read by an independent LMDB reader (the `lmdb` package; the
writer is dead, so nothing else has the environment open) and then reopened by Postwire.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import lmdb
import lz4.block
import pytest

from postwire import _core
from postwire.store.spool import TABLES
from tests.integration.spool_writer import body_for

ROUNDS = 20


def decode_stored_body(stored: bytes) -> bytes:
    """The spool's body record: a tag byte, then raw bytes (0) or a size-prefixed LZ4 block (1)."""
    tag, rest = stored[0], stored[1:]
    assert tag in (0, 1), f"unknown body encoding {tag}"
    return rest if tag == 0 else lz4.block.decompress(rest)


def acknowledged_ids(output: bytes) -> list[str]:
    lines = output.decode().split("\n")
    return [line for line in lines[:-1] if line]  # the last line may be torn by the kill


def kill_writer_at_random(spool_dir: Path, rng: random.Random) -> list[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.spool_writer", str(spool_dir), "8"],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert child.stdout is not None
    os.set_blocking(child.stdout.fileno(), False)
    output = b""
    deadline = time.monotonic() + 20
    # Let it start writing, then kill it somewhere in its stride.
    while b"\n" not in output and time.monotonic() < deadline:
        output += child.stdout.read() or b""
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.4))
    child.send_signal(signal.SIGKILL)
    child.wait()
    os.set_blocking(child.stdout.fileno(), True)
    output += child.stdout.read()
    ids = acknowledged_ids(output)
    assert ids, "the writer acknowledged nothing before the kill"
    return ids


@pytest.mark.slow
def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    rng = random.Random(2026)
    seen: list[str] = []
    for round_number in range(ROUNDS):
        if round_number:
            # Each round starts from the previous spool, so ids must not repeat: move them aside.
            reopened = _core.Spool(spool_dir, tables=list(TABLES))
            batch = _core.WriteBatch()
            for key, _ in reopened.scan("emails", limit=1_000_000):
                batch.delete("emails", key)
                batch.remove(key.decode(), 0)
            reopened.commit(batch)
            reopened.close()
        acknowledged = kill_writer_at_random(spool_dir, rng)
        seen.extend(acknowledged)

        env = lmdb.open(str(spool_dir), readonly=True, lock=False, max_dbs=16)
        bodies = env.open_db(b"_bodies", create=False)
        emails = env.open_db(b"emails", create=False)
        with env.begin() as txn:
            for message_id in acknowledged:
                key = message_id.encode()
                stored = txn.get(key, db=bodies)
                assert stored is not None, message_id
                assert decode_stored_body(stored) == body_for(message_id), message_id
                assert txn.get(key, db=emails) == b"record:" + key, message_id
        env.close()

        reopened = _core.Spool(spool_dir, tables=list(TABLES))
        for message_id in acknowledged[-50:]:
            assert reopened.message_body(message_id) == body_for(message_id)
        reopened.close()
    assert len(seen) > ROUNDS
