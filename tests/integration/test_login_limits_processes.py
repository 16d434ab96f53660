"""Sign-in and sign-up throttles hold across processes: two processes on one spool, each with
a burst of parallel attempts at the same moment, admit together exactly the allowance (each
attempt is counted in a guarded change, exact between processes, before it is admitted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ALLOWED = 7
PER_PROCESS = 20

BURST = """
import sys
import trio
from postwire import _core
from postwire.accounts import login_limits
from postwire.config import AuthConfig
from postwire.store.spool import TABLES, Spool

async def main(path: str) -> None:
    spool = Spool(_core.Spool(path, tables=list(TABLES)))
    auth = AuthConfig(max_signups_per_address=int(sys.argv[2]))
    admitted = 0

    async def attempt() -> None:
        nonlocal admitted
        try:
            await login_limits.count_signup(spool, auth, "192.0.2.1", 1_800_000_000.0)
            admitted += 1
        except login_limits.Throttled:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)  # both processes go together
        async with trio.open_nursery() as attempts:
            for _ in range(int(sys.argv[3])):
                attempts.start_soon(attempt)
        nursery.cancel_scope.cancel()
    await spool.close()
    print(admitted, flush=True)

trio.run(main, sys.argv[1])
"""


def test_two_processes_admit_exactly_the_allowance_together(tmp_path: Path) -> None:
    path = tmp_path / "spool"
    path.mkdir()
    command = [sys.executable, "-c", BURST, str(path), str(ALLOWED), str(PER_PROCESS)]
    bursts = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for process in bursts:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
    for process in bursts:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    admitted = [int(process.communicate(timeout=120)[0]) for process in bursts]
    assert sum(admitted) == ALLOWED, admitted
