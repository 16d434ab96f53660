"""A domain's read-change-write is a guarded change across processes: the service's verifier,
in another process, reads the domain, and while it waits for DNS the operator's `postwire domains
delete` removes it; the verifier's commit then fails its assertion, it reads the domain again,
finds it gone, and writes nothing back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

from postwire.config import Config
from postwire.domains.store import create_domain, delete_domain, load_domain
from postwire.store.spool import serve_spool

# The verifier's shape (`verification_state.record_check_results`): read the domain in a guarded
# change, check DNS (here: until told to go on), write the result unless the domain is gone.
VERIFIER = """
import sys
from pathlib import Path

import trio

from postwire import _core
from postwire.domains.store import DOMAINS, domain_key, guarded_domain, load_domain
from postwire.store.spool import TABLES, Spool


async def main(spool_dir: str, team_id: str, domain_id: str) -> None:
    spool = Spool(_core.Spool(Path(spool_dir), tables=list(TABLES)))
    attempts = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        async for attempt in guarded_domain(spool, team_id, domain_id):
            with attempt:
                attempts += 1
                domain = load_domain(spool, team_id, domain_id)
                if domain is None:
                    break
                print("read", flush=True)
                await trio.to_thread.run_sync(sys.stdin.readline)
                batch = _core.WriteBatch()
                DOMAINS.put(batch, domain_key(team_id, domain_id), domain)
                await spool.commit(batch)
        nursery.cancel_scope.cancel()
    await spool.close()
    print(attempts, flush=True)


trio.run(main, *sys.argv[1:])
"""


async def test_the_verifier_of_another_process_does_not_write_a_deleted_domain_back(
    tmp_path: Path,
) -> None:
    config = Config(data_dir=tmp_path)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        domain = await create_domain(spool, config, "team", "guarded.test")
        verifier = subprocess.Popen(
            [sys.executable, "-c", VERIFIER, str(tmp_path / "spool"), "team", domain.id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert verifier.stdin is not None and verifier.stdout is not None
        assert await trio.to_thread.run_sync(verifier.stdout.readline) == "read\n"
        await delete_domain(spool, "team", domain.id)  # while the verifier waits for DNS
        verifier.stdin.write("checked\n")
        verifier.stdin.close()
        assert await trio.to_thread.run_sync(verifier.wait) == 0
        # Its first commit failed; its second attempt found the domain gone.
        assert verifier.stdout.read() == "2\n"
        assert load_domain(spool, "team", domain.id) is None
        nursery.cancel_scope.cancel()
