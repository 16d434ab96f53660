"""PostgreSQL stopped (`pg_ctl stop -m immediate`: a crash as clients see one) and started again
while a live `postwire serve` on it takes mail over REST and SMTP and delivers it: during the
outage the API answers 503 and SMTP `451 4.3.0`, the service keeps running, and once the
database is back everything resumes by itself: every acknowledged email is delivered and ends
`delivered`, none is stuck, idempotency keys answer one email each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, serving, verified_domain, wait_until
from tests.e2e.test_smtp_submission import listener
from tests.e2e.test_tracking import receiver as receiver  # the fixture
from tests.intake_load import IntakeLoad, check_outcome
from tests.ports import free_address
from tests.postgres_server import PostgresServer, running_postgres
from tests.smtp_receiver import ScriptedSmtpReceiver


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def postgres_store(postgres: PostgresServer) -> str:
    """The `[store]` table of a server keeping its tables in a new database of `postgres`."""
    return f'\n[store]\nbackend = "postgresql"\nurl = "{postgres.create_database()}"\n'


@pytest.fixture
def server(
    tmp_path: Path,
    dns_server: AuthoritativeDnsServer,
    postgres: PostgresServer,
    receiver: ScriptedSmtpReceiver,
) -> Iterator[LiveServer]:
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": f"{receiver.host}:{receiver.port}"},
        starttls_listen=(free_address(),),
        store=postgres_store(postgres),
    ) as live:
        verified_domain(dns_server)
        yield live


def test_postgres_restarted_under_load(
    server: LiveServer, postgres: PostgresServer, receiver: ScriptedSmtpReceiver
) -> None:
    assert resend.api_key is not None
    load = IntakeLoad(
        server.base_url,
        resend.api_key,
        listener(server, "starttls_listen"),
        server.data_dir / "tls" / "smtp-cert.pem",
    )
    load.start()
    try:
        wait_until(lambda: load.acknowledged_count() >= 20, "mail is accepted")
        postgres.stop(immediate=True)
        wait_until(
            lambda: load.refused("503 service_unavailable") and load.refused("451 4.3.0"),
            "REST answers 503 and SMTP 451 4.3.0",
        )
        # The dashboard and the API's reads say so too, and the service is still running.
        page = httpx.get(f"{server.base_url}/emails", headers=_bearer(load.api_key))
        assert page.status_code == 503, page.text
        assert page.json()["name"] == "service_unavailable"
        assert "database is unreachable" in page.json()["message"]
        assert server.process is not None and server.process.poll() is None
        acknowledged_during = load.acknowledged_count()
        postgres.start()
        wait_until(
            lambda: load.acknowledged_count() >= acknowledged_during + 20,
            "intake resumes by itself",
        )
    finally:
        load.stop()
    check_outcome(load, receiver, server.base_url, "PostgreSQL restarted under load")
    assert server.process is not None and server.process.poll() is None
    assert "Traceback" not in server.log_text(), server.log_text()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
