"""CSV imports of contacts against a live server: the Python SDK (`resend.Contacts.Imports`)
and raw multipart httpx for every refusal; a server killed with SIGKILL in the middle of a
50,000-row import, restarted, finishes with exact counts and one contact per address."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import resend

from tests.e2e.conftest import LiveServer, wait_until
from tests.store_backends import table_rows

MiB = 1024 * 1024


@pytest.fixture
def sdk(live_server: LiveServer) -> Iterator[LiveServer]:
    """A server of the test's own, the SDK pointed at it: for the tests that stop or kill it
    and then read its whole spool (the others use the module's `team_server`)."""
    resend.api_url = live_server.base_url
    resend.api_key = live_server.create_key("admin")
    yield live_server
    resend.api_key = None


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {resend.api_key}"}


def finished(import_id: str, timeout: float = 30.0) -> dict[str, Any]:
    """The import once it completed or failed, read through the SDK."""
    deadline = time.monotonic() + timeout
    while True:
        job = dict(resend.Contacts.Imports.get(import_id))
        if job["status"] in ("completed", "failed"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.05)


def post_import(
    server: LiveServer, csv: bytes, headers: dict[str, str] | None = None, **fields: Any
) -> httpx.Response:
    data = {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
    return httpx.post(
        f"{server.base_url}/contacts/imports",
        headers=headers or auth(),
        files={"file": ("contacts.csv", csv, "text/csv")},
        data=data,
        timeout=60,
    )


def assert_error(response: httpx.Response, status: int, name: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"statusCode", "name", "message"}
    assert (body["statusCode"], body["name"]) == (status, name), body
    return str(body["message"])


def test_an_import_with_a_column_map_segments_topics_and_properties(
    team_server: LiveServer,
) -> None:
    resend.ContactProperties.create({"key": "plan", "type": "string"})
    resend.ContactProperties.create({"key": "seats", "type": "number"})
    segment = resend.Segments.create({"name": "Customers"})["id"]
    topic = resend.Topics.create({"name": "News", "default_subscription": "opt_out"})["id"]
    csv = (
        b"E-mail,Given,Family,Opted out,Plan,Seats\n"
        b"ada@example.org,Ada,Lovelace,no,pro,3\n"
        b"grace@example.org,Grace,Hopper,yes,team,12\n"
        b"not-an-address,Bad,Row,no,pro,1\n"
        b"linus@example.org,Linus,,,free,many\n"
        b"\n"
        b"ken@example.org,Ken,,false,,\n"
    )
    created = resend.Contacts.Imports.create({
        "file": csv,
        "filename": "customers.csv",
        "column_map": {
            "email": "E-mail", "first_name": "Given", "last_name": "Family",
            "unsubscribed": "Opted out",
            "properties": {"plan": "Plan", "seats": {"column": "Seats", "type": "number"}},
        },
        "on_conflict": "upsert",
        "segments": [{"id": segment}],
        "topics": [{"id": topic, "subscription": "opt_in"}],
    })  # fmt: skip
    assert created["object"] == "contact_import"
    job = finished(created["id"])
    assert job["status"] == "completed" and job["completed_at"] is not None
    assert job["counts"] == {"total": 5, "created": 3, "updated": 0, "skipped": 0, "failed": 2}
    assert [(r["row"], r["email"]) for r in job["failed_rows"]] == [
        (4, "not-an-address"), (5, "linus@example.org")
    ]  # fmt: skip
    assert "seats" in job["failed_rows"][1]["reason"]

    grace = resend.Contacts.get(email="grace@example.org")
    assert (grace["first_name"], grace["last_name"], grace["unsubscribed"]) == (
        "Grace", "Hopper", True
    )  # fmt: skip
    assert grace["properties"]["plan"]["value"] == "team"
    # Numbers are shown as text, with their type beside them (the Rust SDK reads a string).
    assert grace["properties"]["seats"] == {"value": "12", "type": "number"}
    members = resend.Contacts.list(segment_id=segment)["data"]
    assert {m["email"] for m in members} == {
        "ada@example.org", "grace@example.org", "ken@example.org"
    }  # fmt: skip
    topics = resend.Contacts.Topics.list(email="ada@example.org")
    assert [(t["id"], t["subscription"]) for t in topics["data"]] == [(topic, "opt_in")]

    listed = resend.Contacts.Imports.list({"status": "completed", "limit": 10})
    assert [i["id"] for i in listed["data"]] == [created["id"]]
    assert "failed_rows" not in listed["data"][0]
    assert resend.Contacts.Imports.list({"status": "queued"})["data"] == []


def test_upsert_and_skip(team_server: LiveServer) -> None:
    first = resend.Contacts.Imports.create(
        {"file": b"email,first_name\nann@example.org,Ann\nbo@example.org,Bo\n"}
    )
    assert finished(first["id"])["counts"]["created"] == 2
    again = b"email,first_name,last_name\nANN@example.org,Annie,Lee\ncy@example.org,Cy,\n"
    skipped = finished(resend.Contacts.Imports.create({"file": again})["id"])  # skip: default
    assert skipped["counts"] == {"total": 2, "created": 1, "updated": 0, "skipped": 1, "failed": 0}
    assert resend.Contacts.get(email="ann@example.org")["first_name"] == "Ann"
    upserted = finished(
        resend.Contacts.Imports.create({"file": again, "on_conflict": "upsert"})["id"]
    )
    assert upserted["counts"] == {"total": 2, "created": 0, "updated": 2, "skipped": 0, "failed": 0}
    ann = resend.Contacts.get(email="ann@example.org")
    assert (ann["email"], ann["first_name"], ann["last_name"]) == (
        "ann@example.org",
        "Annie",
        "Lee",
    )
    # Twice in one file: the second row follows on_conflict too.
    twice = b"email,first_name\ndee@example.org,Dee\ndee@example.org,Deirdre\n"
    job = finished(resend.Contacts.Imports.create({"file": twice, "on_conflict": "skip"})["id"])
    assert (job["counts"]["created"], job["counts"]["skipped"]) == (1, 1)
    assert resend.Contacts.get(email="dee@example.org")["first_name"] == "Dee"


def test_refusals(team_server: LiveServer) -> None:
    server, csv = team_server, b"email\nann@example.org\n"
    cases: list[tuple[str, httpx.Response, int, str]] = [
        ("no file", httpx.post(f"{server.base_url}/contacts/imports", headers=auth(),
                               data={"on_conflict": "skip"}, files={"other": ("x", b"y")}),
         422, "missing_required_field"),
        ("JSON body", httpx.post(f"{server.base_url}/contacts/imports", headers=auth(),
                                 json={"file": "email\na@example.org"}), 422, "validation_error"),
        ("empty file", post_import(server, b""), 422, "validation_error"),
        ("no email column", post_import(server, b"name\nAnn\n"), 422, "validation_error"),
        ("bad on_conflict", post_import(server, csv, on_conflict="merge"), 422, "validation_error"),
        ("column_map not JSON", post_import(server, csv, column_map="{email"), 422,
         "validation_error"),
        ("mapped column missing", post_import(server, csv, column_map={"first_name": "Given"}), 422,
         "validation_error"),
        ("unknown property", post_import(server, csv, column_map={"properties": {"tier": "email"}}),
         422, "validation_error"),
        ("unknown segment", post_import(server, csv, segments=[{"id": resend_id()}]), 404,
         "not_found"),
        ("bad topic choice", post_import(server, csv, topics=[{"id": resend_id(),
                                                               "subscription": "maybe"}]),
         422, "validation_error"),
        ("unknown topic", post_import(server, csv, topics=[{"id": resend_id(),
                                                            "subscription": "opt_in"}]),
         404, "not_found"),
        ("unknown import", httpx.get(f"{server.base_url}/contacts/imports/{resend_id()}",
                                     headers=auth()), 404, "not_found"),
        ("bad status filter", httpx.get(f"{server.base_url}/contacts/imports?status=done",
                                        headers=auth()), 422, "validation_error"),
    ]  # fmt: skip
    for label, response, status, name in cases:
        assert response.status_code == status, (label, response.text)
        assert_error(response, status, name)
    assert resend.Contacts.Imports.list()["data"] == []  # nothing refused was queued


def resend_id() -> str:
    return "0190a0a0-0000-7000-8000-00000000dead"


def test_a_file_over_50_mb_is_refused_while_it_streams(sdk: LiveServer) -> None:
    big = b"email\n" + b"a@example.org\n" * (50 * MiB // 14 + 1)
    assert len(big) > 50 * MiB
    # With a Content-Length over the cap: refused before the body is read.
    message = assert_error(post_import(sdk, big), 413, "validation_error")
    assert "50 MB" in message

    # Sent in chunks, with no length: refused once the file passes 50 MB.
    def chunks() -> Iterator[bytes]:
        boundary = b"--postwire-test"
        yield boundary + b'\r\nContent-Disposition: form-data; name="file"; filename="a.csv"'
        yield b"\r\nContent-Type: text/csv\r\n\r\n"
        for start in range(0, len(big), MiB):
            yield big[start : start + MiB]
        yield b"\r\n" + boundary + b"--\r\n"

    streamed = httpx.post(
        f"{sdk.base_url}/contacts/imports",
        headers={**auth(), "Content-Type": "multipart/form-data; boundary=postwire-test"},
        content=chunks(),
        timeout=60,
    )
    assert_error(streamed, 413, "validation_error")
    assert resend.Contacts.Imports.list()["data"] == []
    # What the refused uploads stored went with them.
    sdk.stop()
    assert spool_rows(sdk.data_dir, "contact_import_files") == []
    assert spool_rows(sdk.data_dir, "contact_imports") == []


def test_another_teams_segments_topics_and_imports_are_not_found(team_server: LiveServer) -> None:
    segment = resend.Segments.create({"name": "Mine"})["id"]
    topic = resend.Topics.create({"name": "Mine", "default_subscription": "opt_in"})["id"]
    mine = resend.Contacts.Imports.create({"file": b"email\nann@example.org\n"})["id"]
    stranger = {"Authorization": f"Bearer {team_server.create_key('s', new_team='other')}"}
    csv = b"email\nbo@example.org\n"
    for fields in ({"segments": [segment]}, {"segments": [{"id": segment}]},
                   {"topics": [{"id": topic, "subscription": "opt_in"}]}):  # fmt: skip
        assert_error(post_import(team_server, csv, stranger, **fields), 404, "not_found")
    response = httpx.get(f"{team_server.base_url}/contacts/imports/{mine}", headers=stranger)
    assert_error(response, 404, "not_found")
    listed = httpx.get(f"{team_server.base_url}/contacts/imports", headers=stranger).json()
    assert listed == {"object": "list", "has_more": False, "data": []}


ROWS = 50_000


def test_a_kill_during_a_large_import_then_a_restart_finishes_it_exactly(
    sdk: LiveServer,
) -> None:
    # Every 997th row is refused, and every 1,009th repeats the address of the row 500 rows
    # before it (upserted): known counts whatever moment the kill comes at.
    lines = []
    for i in range(ROWS):
        if i % 997 == 996:
            lines.append(f"broken-{i},X{i}")
        elif i % 1009 == 1008:
            lines.append(f"r{i - 500}@example.org,Again{i}")
        else:
            lines.append(f"r{i}@example.org,R{i}")
    csv = ("email,first_name\n" + "\n".join(lines) + "\n").encode()
    bad = sum(1 for i in range(ROWS) if i % 997 == 996)
    repeats = sum(1 for i in range(ROWS) if i % 1009 == 1008 and i % 997 != 996)
    import_id = resend.Contacts.Imports.create({"file": csv, "on_conflict": "upsert"})["id"]

    def progress() -> int:
        return int(resend.Contacts.Imports.get(import_id)["counts"]["total"])

    wait_until(lambda: progress() >= 5000, "the import is under way", timeout=60)
    assert sdk.stop(signal.SIGKILL) == -signal.SIGKILL
    sdk.start()
    resend.api_url = sdk.base_url
    killed_at = progress()
    assert killed_at < ROWS, "killed before the import finished"

    job = finished(import_id, timeout=120)
    assert job["status"] == "completed", job
    assert job["counts"] == {
        "total": ROWS, "created": ROWS - bad - repeats, "updated": repeats, "skipped": 0,
        "failed": bad,
    }  # fmt: skip
    assert len(job["failed_rows"]) == bad
    assert job["failed_rows"][0] == {
        "row": 998, "email": "broken-996", "reason": job["failed_rows"][0]["reason"]
    }  # fmt: skip

    sdk.stop()
    contacts = [json.loads(raw) for raw in spool_rows(sdk.data_dir, "contacts")]
    addresses = [c["email"] for c in contacts]
    assert len(addresses) == len(set(addresses)) == ROWS - bad - repeats
    assert len(spool_rows(sdk.data_dir, "contact_emails")) == ROWS - bad - repeats
    events = [json.loads(raw)["type"] for raw in spool_rows(sdk.data_dir, "events")]
    assert events.count("contact.created") == ROWS - bad - repeats  # none twice
    assert spool_rows(sdk.data_dir, "contact_import_files") == []


def spool_rows(data_dir: Path, table: str) -> list[bytes]:
    """A table's values, read without Postwire's code from whichever store holds it (server
    stopped)."""
    return [raw for _, raw in table_rows(data_dir, table)]
