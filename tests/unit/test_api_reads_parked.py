"""The REST API's reads are parked, never blocking: on a table store on the network a blocking
read (`get`, `scan`) stalls every task of the process for a round trip. Each endpoint is called
through the app on a real spool, with `record_reads` wrapping its facade."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from quart import typing as quart_typing

from postwire.api.app import create_app
from postwire.api.context import ApiContext
from postwire.config import Config, DomainsConfig
from postwire.domains import store as domain_store
from postwire.store import accounts
from postwire.store.spool import TABLES, Spool
from tests.table_reads import Read, record_reads

NOW = datetime(2027, 3, 1, 12, 0, 0, tzinfo=UTC)
# The node's own tables stay in its LMDB spool whatever the backend: only the others count.
WATCHED = [table for table in TABLES if table not in ("meta", "node")]


@dataclass
class Api:
    spool: Spool
    client: quart_typing.TestClientProtocol
    headers: dict[str, str]
    team_id: str

    async def get(self, path: str) -> Any:
        response = await self.client.get(path, headers=self.headers)
        assert response.status_code == 200, await response.get_data(as_text=True)
        return await response.get_json()

    async def send(self, path: str, body: dict[str, Any]) -> Any:
        response = await self.client.post(path, headers=self.headers, json=body)
        assert response.status_code in (200, 201), await response.get_data(as_text=True)
        return await response.get_json()


@pytest.fixture
async def api(spool: Spool, tmp_path: Path) -> AsyncIterator[Api]:
    config = Config(data_dir=tmp_path, domains=DomainsConfig(dkim_key_bits=1024))
    team = await accounts.create_team(spool, "reads", NOW)
    _, token = await accounts.create_api_key(spool, team.id, "reads", "full_access", None, NOW)
    domain = await domain_store.create_domain(spool, config, team.id, "shop.test")
    await domain_store.save_domain(spool, dataclasses.replace(domain, status="verified"))
    app = create_app(ApiContext(config=config, spool=spool, now=lambda: NOW))
    async with app.test_app():
        yield Api(spool, app.test_client(), {"Authorization": f"Bearer {token}"}, team.id)


def blocking(reads: list[Read]) -> list[Read]:
    return [read for read in reads if read.how in ("get", "scan")]


async def test_authentication_reads_the_key_parked(api: Api) -> None:
    reads = record_reads(api.spool, WATCHED)
    await api.get("/api-keys")
    assert [read.how for read in reads if read.key.startswith("token/")] == ["aget"]
    assert blocking(reads) == []


async def test_emails_are_read_parked(api: Api) -> None:
    sent = await api.send(
        "/emails",
        {"from": "news@shop.test", "to": ["ann@example.org"], "subject": "S", "text": "T"},
    )
    reads = record_reads(api.spool, WATCHED)
    listed = await api.get("/emails?limit=5")
    assert [email["id"] for email in listed["data"]] == [sent["id"]]
    assert (await api.get(f"/emails/{sent['id']}"))["id"] == sent["id"]
    assert (await api.get(f"/emails?limit=5&before={sent['id']}"))["data"] == []
    assert {read.table for read in reads} >= {"emails", "attempts", "email_insights"}
    assert blocking(reads) == []


async def test_api_keys_are_read_parked(api: Api) -> None:
    reads = record_reads(api.spool, WATCHED)
    keys = await api.get("/api-keys")
    key_id = keys["data"][0]["id"]
    response = await api.client.patch(
        f"/api-keys/{key_id}", headers=api.headers, json={"name": "renamed"}
    )
    assert response.status_code == 200
    assert blocking(reads) == []


async def test_contacts_and_segments_are_read_parked(api: Api) -> None:
    segment = await api.send("/segments", {"name": "Regulars"})
    contact = await api.send(
        "/contacts", {"email": "ann@example.org", "segments": [{"id": segment["id"]}]}
    )
    reads = record_reads(api.spool, WATCHED)
    assert [c["id"] for c in (await api.get("/contacts"))["data"]] == [contact["id"]]
    assert (await api.get(f"/contacts?after={contact['id']}"))["data"] == []
    assert (await api.get(f"/contacts/{contact['id']}"))["email"] == "ann@example.org"
    assert (await api.get("/contacts/ann@example.org"))["id"] == contact["id"]
    assert (await api.get(f"/segments/{segment['id']}"))["name"] == "Regulars"
    assert [s["id"] for s in (await api.get("/segments"))["data"]] == [segment["id"]]
    members = await api.get(f"/segments/{segment['id']}/contacts")
    assert [c["id"] for c in members["data"]] == [contact["id"]]
    of_contact = await api.get(f"/contacts/{contact['id']}/segments")
    assert [s["id"] for s in of_contact["data"]] == [segment["id"]]
    assert {"contacts", "contact_emails", "segments", "segment_members"} <= {
        read.table for read in reads
    }
    assert blocking(reads) == []


async def test_domains_are_read_parked(api: Api) -> None:
    reads = record_reads(api.spool, WATCHED)
    listed = await api.get("/domains")
    domain_id = listed["data"][0]["id"]
    assert (await api.get(f"/domains/{domain_id}"))["name"] == "shop.test"
    assert (await api.get(f"/domains?limit=1&after={domain_id}"))["data"] == []
    assert {"domains", "domain_health"} <= {read.table for read in reads}
    assert blocking(reads) == []


async def test_topics_are_read_parked(api: Api) -> None:
    topic = await api.send("/topics", {"name": "News", "default_subscription": "opt_in"})
    contact = await api.send("/contacts", {"email": "bo@example.org"})
    reads = record_reads(api.spool, WATCHED)
    assert [t["id"] for t in (await api.get("/topics"))["data"]] == [topic["id"]]
    assert (await api.get(f"/topics/{topic['id']}"))["name"] == "News"
    of_contact = await api.get(f"/contacts/{contact['id']}/topics")
    assert [t["id"] for t in of_contact["data"]] == [topic["id"]]
    assert {"topics", "contacts"} <= {read.table for read in reads}
    assert blocking(reads) == []


async def test_contact_properties_are_read_parked(api: Api) -> None:
    prop = await api.send("/contact-properties", {"key": "plan", "type": "string"})
    reads = record_reads(api.spool, WATCHED)
    assert [p["id"] for p in (await api.get("/contact-properties"))["data"]] == [prop["id"]]
    assert (await api.get(f"/contact-properties/{prop['id']}"))["key"] == "plan"
    assert {read.table for read in reads} >= {"contact_properties"}
    assert blocking(reads) == []
