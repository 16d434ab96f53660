"""The `/u/` routes through the app's test client over a real spool, and the unsubscribe
address as the SMTP listener recognises it: the bodies one-click takes, what is refused, the
stylesheet, and contacts deleted since the mail went out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from quart.typing import TestClientProtocol as AppClient  # not a test class

from postwire import _core
from postwire._core import WriteBatch
from postwire.api.app import create_app
from postwire.api.context import ApiContext
from postwire.config import load_config
from postwire.domains.store import create_domain
from postwire.store.contacts import ContactRecord, delete_contact, get_contact, put_contact
from postwire.store.spool import TABLES, Spool
from postwire.unsubscribe.apply import MailtoAddress, mailto_target
from postwire.unsubscribe.links import (
    UnsubscribeTarget,
    load_unsubscribe_secret,
    mailto_token,
    make_token,
    unsubscribe_mailto,
)
from postwire.unsubscribe.page import STYLESHEET, STYLESHEET_URL

TEAM = _core.new_id()
STAMP = "2026-11-25 10:00:00.123000+00"


@dataclass
class Site:
    spool: Spool
    client: AppClient
    secret: bytes
    config_dir: Path

    async def contact(self) -> tuple[ContactRecord, str]:
        """A new contact and its link's path (a broadcast that does not exist: nothing counts)."""
        ann = ContactRecord(
            _core.new_id(), TEAM, "ann@example.com", None, None, False, STAMP, STAMP
        )
        batch = WriteBatch()
        put_contact(batch, self.spool, None, ann, 0, event=None)
        await self.spool.commit(batch)
        return ann, "/u/" + make_token(self.secret, TEAM, ann.id, _core.new_id())

    def unsubscribed(self, contact: ContactRecord) -> bool:
        stored = get_contact(self.spool, TEAM, contact.id)
        assert stored is not None
        return stored.unsubscribed


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        client = create_app(ApiContext(config=config, spool=spool)).test_client()
        yield Site(spool, client, await load_unsubscribe_secret(spool), tmp_path)
        nursery.cancel_scope.cancel()
    await spool.close()


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"List-Unsubscribe=One-Click", {"Content-Type": "application/x-www-form-urlencoded"}),
        (
            b'--b\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\n'
            b"One-Click\r\n--b--\r\n",
            {"Content-Type": "multipart/form-data; boundary=b"},
        ),
        (b"List-Unsubscribe=One-Click\r\n", {}),  # no form content type: taken at its word
    ],
)
async def test_one_click_bodies(site: Site, body: bytes, headers: dict[str, str]) -> None:
    ann, path = await site.contact()
    response = await site.client.post(path, data=body, headers=headers)
    assert response.status_code == 200
    assert await response.get_data(as_text=True) == "Unsubscribed\n"
    assert site.unsubscribed(ann)


async def test_other_posts_and_gets_change_nothing(site: Site) -> None:
    ann, path = await site.contact()
    for body in ({"List-Unsubscribe": "Two-Clicks"}, {"action": "delete"}, {}):
        response = await site.client.post(path, form=body)
        assert response.status_code == 400
        assert "List-Unsubscribe=One-Click" in await response.get_data(as_text=True)
    for method in ("GET", "HEAD"):
        response = await site.client.open(path, method=method)
        assert response.status_code == 200
        assert response.headers["Cache-Control"] == "no-store"
    assert not site.unsubscribed(ann)


async def test_a_forged_token_is_a_page_for_a_person(site: Site) -> None:
    ann, path = await site.contact()
    forged = path[:-1] + ("A" if path[-1] != "A" else "B")
    for response in (
        await site.client.get(forged),
        await site.client.post(forged, form={"List-Unsubscribe": "One-Click"}),
        await site.client.post(forged + "/topics", form={"topic": "x"}),
    ):
        assert response.status_code == 404
        assert response.content_type == "text/html; charset=utf-8"
        assert "Content-Security-Policy" in response.headers
        assert "not valid" in await response.get_data(as_text=True)
    assert not site.unsubscribed(ann)


async def test_a_contact_deleted_since(site: Site) -> None:
    ann, path = await site.contact()
    batch = WriteBatch()
    delete_contact(batch, ann, 0)
    await site.spool.commit(batch)
    one_click = await site.client.post(path, form={"List-Unsubscribe": "One-Click"})
    assert one_click.status_code == 200  # it receives nothing any more: done, for the provider
    for response in (
        await site.client.get(path),
        await site.client.post(path, form={"action": "unsubscribe"}),
    ):
        assert response.status_code == 404
        assert "no longer on the mailing list" in await response.get_data(as_text=True)


async def test_the_stylesheet_is_served_by_its_hashed_name_only(site: Site) -> None:
    response = await site.client.get(STYLESHEET_URL)
    assert response.status_code == 200 and response.content_type == "text/css; charset=utf-8"
    assert await response.get_data() == STYLESHEET
    assert "immutable" in response.headers["Cache-Control"]
    assert (await site.client.get("/u/assets/unsubscribe.css")).status_code == 404


async def test_the_smtp_listener_recognises_unsubscribe_addresses(site: Site) -> None:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(site.config_dir)})
    domain = await create_domain(site.spool, config, TEAM, "sender.test")
    host = domain.return_path_host
    contact, broadcast = _core.new_id(), _core.new_id()
    address = unsubscribe_mailto(make_token(site.secret, TEAM, contact, broadcast), host)
    target = UnsubscribeTarget(TEAM, contact, broadcast)
    assert mailto_target(site.spool, site.secret, address) == target
    local, _, _ = address.partition("@")
    forged = f"{local[:-1]}{'A' if local[-1] != 'A' else 'B'}@{host}"
    assert mailto_target(site.spool, site.secret, forged) is MailtoAddress.FORGED
    another_team = mailto_token(make_token(site.secret, _core.new_id(), contact, broadcast))
    forged_team = f"unsub+{another_team}@{host}"
    assert mailto_target(site.spool, site.secret, forged_team) is MailtoAddress.FORGED
    # Not one of Postwire's return-path hosts, or not shaped like an unsubscribe address.
    for other in (f"{local}@elsewhere.example", f"bounces+x@{host}", "ann@example.com"):
        assert mailto_target(site.spool, site.secret, other) is MailtoAddress.OTHER
