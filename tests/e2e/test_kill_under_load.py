"""`postwire serve` killed with SIGKILL at a random moment while REST clients (some with
idempotency keys) and SMTP sessions send, then started again on the same data: every email
acknowledged is delivered and ends `delivered`, none of the team's emails is stuck, and each
idempotency key answers one email. Run on the two-store protocol's two backends: tables in
PostgreSQL, and tables in an LMDB environment apart from the spool (the protocol without
PostgreSQL in the picture)."""

from __future__ import annotations

import random
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, serving, verified_domain, wait_until
from tests.e2e.test_smtp_submission import listener
from tests.e2e.test_tracking import receiver as receiver  # the fixture
from tests.intake_load import IntakeLoad, check_outcome
from tests.ports import free_address
from tests.postgres_server import running_postgres
from tests.smtp_receiver import ScriptedSmtpReceiver


@pytest.fixture(params=["postgresql", "lmdb-apart"])
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The `[store]` table of the server under test."""
    if request.param == "lmdb-apart":
        yield '\n[store]\npath = "tables"\n'
        return
    with running_postgres() as postgres:
        yield f'\n[store]\nbackend = "postgresql"\nurl = "{postgres.create_database()}"\n'


@pytest.fixture
def server(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, store: str, receiver: ScriptedSmtpReceiver
) -> Iterator[LiveServer]:
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": f"{receiver.host}:{receiver.port}"},
        starttls_listen=(free_address(),),
        store=store,
    ) as live:
        verified_domain(dns_server)
        yield live


def test_kill_under_load_loses_nothing_acknowledged(
    server: LiveServer, receiver: ScriptedSmtpReceiver, store: str
) -> None:
    assert resend.api_key is not None
    load = IntakeLoad(
        server.base_url,
        resend.api_key,
        listener(server, "starttls_listen"),
        server.data_dir / "tls" / "smtp-cert.pem",
    )
    moment = random.randint(10, 60)  # acknowledged emails before the kill
    load.start()
    try:
        wait_until(lambda: load.acknowledged_count() >= moment, "mail is accepted")
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
    finally:
        load.stop()
    server.start()
    backend = "PostgreSQL" if "postgresql" in store else "LMDB apart"
    check_outcome(load, receiver, server.base_url, f"kill -9 after {moment} ({backend})")
