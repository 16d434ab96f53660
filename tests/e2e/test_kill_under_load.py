"""`postwire serve` killed with SIGKILL at a random moment while REST clients (some with
idempotency keys) and SMTP sessions send, then started again on the same data: every email
acknowledged is delivered and ends `delivered`, none of the team's emails is stuck, and each
idempotency key answers one email. Run on the two-store protocol's two backends: tables in
PostgreSQL, and tables in an LMDB environment apart from the spool (the protocol without
PostgreSQL in the picture)."""

from __future__ import annotations

import email.policy
import random
import signal
import smtplib
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, serving, verified_domain, wait_until
from tests.e2e.test_smtp_submission import listener, shop_mail
from tests.e2e.test_tracking import receiver as receiver  # the fixture
from tests.intake_load import QUEUED, IntakeLoad, check_outcome
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


@pytest.fixture
def two_process_server(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, receiver: ScriptedSmtpReceiver
) -> Iterator[LiveServer]:
    with running_postgres() as postgres:
        url = postgres.create_database()
        with serving(
            tmp_path,
            dns_server,
            routes={"example.org": f"{receiver.host}:{receiver.port}"},
            starttls_listen=(free_address(),),
            processes=2,
            store=f'\n[store]\nbackend = "postgresql"\nurl = "{url}"\n',
        ) as live:
            verified_domain(dns_server)
            yield live


def test_one_idempotency_key_from_two_processes_gives_one_email(
    two_process_server: LiveServer,
) -> None:
    """Both processes accept from the same SMTP socket: sessions racing with one key."""
    assert resend.api_key is not None
    address = listener(two_process_server, "starttls_listen")
    cert = two_process_server.data_dir / "tls" / "smtp-cert.pem"
    mail = shop_mail("one key", "ann@example.org", "Sent by many sessions at once.\n")
    mail["Postwire-Idempotency-Key"] = "the-one-key"
    answers: list[str] = []

    def send() -> None:
        with smtplib.SMTP(*address, timeout=30) as session:
            session.starttls(context=ssl.create_default_context(cafile=str(cert)))
            session.login("postwire", str(resend.api_key))
            session.mail(f"shop@{DOMAIN}")
            session.rcpt("ann@example.org")
            code, reply = session.data(mail.as_bytes(policy=email.policy.SMTP))
            answers.append(f"{code} {reply.decode()}")

    senders = [threading.Thread(target=send) for _ in range(12)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    ids = {match.group(1) for answer in answers if (match := QUEUED.search(answer))}
    emails = [e for e in resend.Emails.list()["data"] if e["subject"] == "one key"]
    print(f"one key from 12 sessions on 2 processes: {len(emails)} email, answers {answers}")
    assert len(ids) == 1, answers
    assert [e["id"] for e in emails] == list(ids)
