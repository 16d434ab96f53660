"""docs/storage.md's "Moving to PostgreSQL", step by step against a live server: a service on
LMDB takes a domain, API keys, emails (delivered, and one scheduled) and contacts; `postwire
store copy` refuses while it runs; it stops; the copy runs (and refuses, once done, to copy into
the now non-empty database again, unless --replace); the server starts again on PostgreSQL with
the same data directory, and the `resend` SDK sees the same emails, domains, keys and contacts
with the same key, the emails sent before still show their status, and it sends again."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    _clean_env,
    verified_domain,
    wait_until,
    write_config,
)
from tests.peers import require_peer
from tests.ports import free_port
from tests.postgres_server import PostgresServer, postgres_binaries
from tests.store_backends import shared_postgres, store_under_test


def postwire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postwire", *args], capture_output=True, text=True, env=_clean_env()
    )


@pytest.fixture
def postgres() -> PostgresServer:
    require_peer(postgres_binaries(), "PostgreSQL 15 (initdb, pg_ctl)", "postgresql-15")
    return shared_postgres()


def lmdb_store() -> str:
    """The `[store]` table of the LMDB server the copy starts from: the tables in their own
    environment when the run tests that split (`PW_TEST_STORE=lmdb-apart`), else in the spool's."""
    return '\n[store]\npath = "tables"\n' if store_under_test() == "lmdb-apart" else ""


def send(subject: str, scheduled_at: str | None = None) -> str:
    params: resend.Emails.SendParams = {
        "from": f"ops@{DOMAIN}", "to": "ann@example.org", "subject": subject, "text": "x"
    }  # fmt: skip
    if scheduled_at is not None:
        params["scheduled_at"] = scheduled_at
    return str(resend.Emails.send(params)["id"])


def seen_by_the_sdk() -> dict[str, Any]:
    """What the team's API shows: its emails (id -> subject, status), domains, keys, contacts."""
    emails = resend.Emails.list({"limit": 100})["data"]
    return {
        "emails": {e["id"]: (e["subject"], e["last_event"]) for e in emails},
        "domains": {(d["name"], d["status"]) for d in resend.Domains.list()["data"]},
        "keys": {(k["id"], k["name"]) for k in resend.ApiKeys.list()["data"]},
        "contacts": {(c["email"], c["first_name"]) for c in resend.Contacts.list()["data"]},
    }


def test_tables_move_to_postgresql_and_the_server_answers_the_same(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, sink: str, postgres: PostgresServer
) -> None:
    live = LiveServer(config_path=tmp_path / "postwire.toml", data_dir=tmp_path / "data")
    settings: dict[str, Any] = {"nameservers": (dns_server.nameserver,), "routes": {"*": sink}}
    write_config(live.config_path, live.data_dir, store=lmdb_store(), **settings)
    live.start()
    try:
        resend.api_url = live.base_url
        resend.api_key = live.create_key("admin")
        verified_domain(dns_server)
        resend.ApiKeys.create({"name": "sender", "permission": "sending_access"})
        sent = [send(f"before {i}") for i in range(3)]
        scheduled = send("later", scheduled_at="in 2 hours")
        resend.Contacts.create({"email": "ada@example.org", "first_name": "Ada"})
        resend.Contacts.create({"email": "bob@example.org", "first_name": "Bob"})
        wait_until(
            lambda: all(resend.Emails.get(i)["last_event"] == "delivered" for i in sent),
            "the emails were delivered",
        )
        before = seen_by_the_sdk()
        url = postgres.create_database()

        assert live.process is not None
        running = postwire("store", "copy", "--to", url, "--config", str(live.config_path))
        assert running.returncode == 1
        assert f"pid {live.process.pid} on host {socket.gethostname()}" in running.stderr
        assert "Stop it first" in running.stderr and "Traceback" not in running.stderr
    finally:
        live.stop()
    assert postgres.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'postwire'",
                         url.rpartition("/")[2]).strip() == "0"  # fmt: skip

    copied = postwire("store", "copy", "--to", url, "--config", str(live.config_path))
    assert copied.returncode == 0, copied.stderr
    assert 'backend = "postgresql"' in copied.stdout and f'url = "{url}"' in copied.stdout
    assert "are left as they were" in copied.stdout and "MISMATCH" not in copied.stdout
    database = url.rpartition("/")[2]
    emails = postgres.psql("SELECT count(*) FROM postwire.emails", database).strip()
    assert int(emails) >= len(before["emails"])
    # The node's own tables stay in its spool.
    assert postgres.psql("SELECT to_regclass('postwire.deliveries')", database).strip() == ""

    again = postwire("store", "copy", "--to", url, "--config", str(live.config_path))
    assert again.returncode == 1
    assert "holds Postwire rows already" in again.stderr and "emails (" in again.stderr
    replaced = postwire(
        "store", "copy", "--to", url, "--replace", "--json", "--config", str(live.config_path)
    )
    assert replaced.returncode == 0, replaced.stderr
    assert '"matches": true' in replaced.stdout and '"removed_rows": 0' not in replaced.stdout

    postgresql = f'\n[store]\nbackend = "postgresql"\nurl = "{url}"\n'
    write_config(live.config_path, live.data_dir, store=postgresql, **settings)
    live.start()  # same data directory: the spool (and its scheduled message) stays
    resend.api_url = live.base_url  # a new port; the same key
    try:
        assert seen_by_the_sdk() == before
        assert resend.Emails.get(scheduled)["last_event"] == "scheduled"
        after = send("after the move")
        wait_until(
            lambda: resend.Emails.get(after)["last_event"] == "delivered",
            "the email sent on PostgreSQL was delivered",
        )
        assert set(before["emails"]) < set(seen_by_the_sdk()["emails"])
        assert int(postgres.psql("SELECT count(*) FROM postwire.emails", database)) > int(emails)
    finally:
        resend.api_key = None
        live.stop()


def test_refused_from_a_config_already_on_postgresql_or_into_no_database(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    config = tmp_path / "postwire.toml"
    url = postgres.create_database()
    on_postgresql = f'\n[store]\nbackend = "postgresql"\nurl = "{url}"\n'
    write_config(config, tmp_path / "data", store=on_postgresql)
    refused = postwire("store", "copy", "--to", url, "--config", str(config))
    assert refused.returncode == 1
    assert "the tables are in postgresql already" in refused.stderr

    write_config(config, tmp_path / "data", store="")
    assert postwire("keys", "create", "--name", "k", "--config", str(config)).returncode == 0
    nowhere = f"postgresql://postwire:secret@127.0.0.1:{free_port()}/postwire"
    unreachable = postwire("store", "copy", "--to", nowhere, "--config", str(config))
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith("postwire: cannot open the table store at "
                                         "postgresql://postwire:***@127.0.0.1:")  # fmt: skip
    assert "secret" not in unreachable.stderr and "Traceback" not in unreachable.stderr
