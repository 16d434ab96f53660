"""A domain's read-change-write holds its record lock across processes: a delete (what
`postwire domains delete` runs, in the operator's process) waits for the service's verifier,
another process that holds the domain between reading it and writing its check's result, so the
verifier cannot write the deleted domain back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio
import trio.testing

from postwire.config import Config
from postwire.domains.store import create_domain, delete_domain, load_domain
from postwire.store.spool import serve_spool

# The verifier's shape (`verification_state.record_check_results`): read the domain under its
# lock, check DNS (here: until told to go on), write the result.
VERIFIER = """
import sys
from pathlib import Path

import trio

from postwire import _core
from postwire.domains.store import DOMAINS, domain_key, load_domain, lock_domain
from postwire.store.spool import TABLES, Spool


async def main(spool_dir: str, team_id: str, domain_id: str) -> None:
    path = Path(spool_dir)
    spool = Spool(_core.Spool(path, tables=list(TABLES)), lock_file=path / "records.lock")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        async with lock_domain(spool, team_id, domain_id):
            domain = load_domain(spool, team_id, domain_id)
            print("held", flush=True)
            sys.stdin.readline()
            batch = _core.WriteBatch()
            DOMAINS.put(batch, domain_key(team_id, domain_id), domain)
            await spool.commit(batch)
        nursery.cancel_scope.cancel()
    await spool.close()


trio.run(main, *sys.argv[1:])
"""


async def test_a_delete_waits_for_the_verifier_of_another_process(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        domain = await create_domain(spool, config, "team", "locked.test")
        verifier = subprocess.Popen(
            [sys.executable, "-c", VERIFIER, str(tmp_path / "spool"), "team", domain.id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert verifier.stdin is not None and verifier.stdout is not None
        assert verifier.stdout.readline() == "held\n"
        async with trio.open_nursery() as deleting:
            deleting.start_soon(delete_domain, spool, "team", domain.id)
            # The delete now waits for the verifier's lock (without it, it would be committed).
            await trio.testing.wait_all_tasks_blocked()
            verifier.stdin.write("checked\n")
            verifier.stdin.close()
            assert await trio.to_thread.run_sync(verifier.wait) == 0
        assert load_domain(spool, "team", domain.id) is None
        nursery.cancel_scope.cancel()
