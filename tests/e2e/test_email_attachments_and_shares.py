"""A sent email's attachments and its shared links, as the official SDKs call them, against one
live server per module (each test has a team and a domain of its own).

Requests and declared answers:
- Attachments: resend-node `src/emails/attachments/attachments.ts` (GET
  `/emails/{emailId}/attachments[/{id}]`) and `src/common/interfaces/attachment.interface.ts`
  (`AttachmentData`: id, filename?, size, content_type, content_disposition 'inline' |
  'attachment', content_id?, download_url, expires_at; `object: 'attachment'` on the single
  one); resend-go `emails.go` (`EmailAttachment`, no `object` in list items); resend-ruby
  `lib/resend/emails/attachments.rb`; resend-php `src/Service/Emails/Attachment.php`;
  resend-java `Emails.java` and `AttachmentResponse.java` (`size` an Integer).
- Share: resend-go `emails.go` `ShareWithContext` (no body when no params; `expires_in`
  omitted when empty), resend-node `src/emails/emails.ts` `share` (`{expires_in}`, undefined
  dropped by JSON), resend-ruby `lib/resend/emails.rb` (`{}` by default), resend-php
  `src/Service/Email.php`, resend-java `Emails.java` (an empty body without options); answer
  `ShareEmailResponse{object: 'email', id, url}`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.chromium import launched_chromium
from tests.e2e.sdk_parity import World, live_world, team_client, verify_domain

PDF = b"%PDF-1.4 quarterly numbers\n" * 40
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
ATTACHMENT_KEYS = {
    "id", "filename", "size", "content_type", "content_disposition", "content_id",
    "download_url", "expires_at",
}  # fmt: skip
REQUIRED_KEYS = {"id", "size", "content_type", "content_disposition", "download_url", "expires_at"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with live_world(tmp_path_factory.mktemp("attachments-shares")) as live:
        yield live


def scheduled_email(api: httpx.Client, domain: str, **fields: Any) -> str:
    """An email scheduled an hour ahead: its source stays in the queue until it is canceled."""
    body = {
        "from": f"Reports <reports@{domain}>",
        "to": ["reader@example.org"],
        "subject": "Quarterly report",
        "html": "<p>See attached</p><img src='cid:logo'>",
        "scheduled_at": "in 1 hour",
        **fields,
    }
    sent = api.post("/emails", json=body)
    assert sent.status_code == 200, sent.text
    return str(sent.json()["id"])


def public_path(url: str) -> str:
    """The link's path: the server's `api.public_url` is not the port this test server got."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def check_attachment(item: dict[str, Any], *, single: bool) -> None:
    keys = set(item) - {"object"}
    assert REQUIRED_KEYS <= keys <= ATTACHMENT_KEYS, item
    assert ("object" in item) is single and item.get("object", "attachment") == "attachment"
    assert isinstance(item["size"], int) and item["content_disposition"] in ("inline", "attachment")
    assert item["expires_at"].endswith("Z") and "T" in item["expires_at"]


def test_attachments_listed_fetched_and_downloaded(world: World) -> None:
    with team_client(world.server, "att-owner") as api:
        verify_domain(api, world.dns, "att-owner.test")
        email_id = scheduled_email(
            api,
            "att-owner.test",
            attachments=[
                # Node and the docs: base64 text; Go, Ruby and Python: an array of byte values.
                {"filename": "report.pdf", "content": base64.b64encode(PDF).decode()},
                {
                    "filename": "logo.png",
                    "content": list(PNG),
                    "content_type": "image/png",
                    "content_id": "logo",
                },
            ],
        )
        listed = api.get(f"/emails/{email_id}/attachments")
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert body["object"] == "list" and body["has_more"] is False
        for item in body["data"]:
            check_attachment(item, single=False)
        # In the order of the message: the inline image sits in the HTML's part, first.
        png, pdf = body["data"]
        assert (pdf["filename"], pdf["content_type"], pdf["size"]) == (
            "report.pdf", "application/pdf", len(PDF),
        )  # fmt: skip
        assert pdf["content_disposition"] == "attachment" and "content_id" not in pdf
        assert (png["filename"], png["content_disposition"], png["content_id"]) == (
            "logo.png", "inline", "logo",
        )  # fmt: skip

        one = api.get(f"/emails/{email_id}/attachments/{png['id']}").json()
        check_attachment(one, single=True)
        assert {
            k: v for k, v in one.items() if k not in ("object", "download_url", "expires_at")
        } == {k: v for k, v in png.items() if k not in ("download_url", "expires_at")}
        page = api.get(f"/emails/{email_id}/attachments?limit=1").json()
        assert [a["id"] for a in page["data"]] == [png["id"]] and page["has_more"] is True

        # The download needs no API key; it is served as a download, never as a page.
        with httpx.Client(base_url=world.server.base_url) as anyone:
            got = anyone.get(public_path(one["download_url"]))
            assert got.status_code == 200 and got.content == PNG
            assert got.headers["content-type"] == "image/png"
            assert got.headers["x-content-type-options"] == "nosniff"
            assert "sandbox" in got.headers["content-security-policy"]
            assert got.headers["content-disposition"].startswith("attachment;")
            assert anyone.get(public_path(pdf["download_url"])).content == PDF
            token = public_path(pdf["download_url"]).rsplit("/", 1)[1]
            forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
            assert anyone.get(f"/downloads/attachments/{forged}").status_code == 404
            assert anyone.get("/downloads/attachments/nonsense").status_code == 404

        # Canceling drops the source: the attachments go with it, links handed out included.
        assert api.post(f"/emails/{email_id}/cancel").status_code == 200
        gone = api.get(f"/emails/{email_id}/attachments")
        assert gone.status_code == 404 and "no longer kept" in gone.json()["message"]
        with httpx.Client(base_url=world.server.base_url) as anyone:
            assert anyone.get(public_path(pdf["download_url"])).status_code == 404


def test_attachments_of_other_teams_and_bad_ids(world: World) -> None:
    with team_client(world.server, "att-a") as owner, team_client(world.server, "att-b") as other:
        verify_domain(owner, world.dns, "att-a.test")
        email_id = scheduled_email(
            owner, "att-a.test", attachments=[{"filename": "a.txt", "content": "aGk="}]
        )
        (item,) = owner.get(f"/emails/{email_id}/attachments").json()["data"]
        for path in (
            f"/emails/{email_id}/attachments",
            f"/emails/{email_id}/attachments/{item['id']}",
        ):
            answer = other.get(path)
            assert answer.status_code == 404 and answer.json()["name"] == "not_found"
        missing = owner.get(f"/emails/{email_id}/attachments/{email_id}")
        assert missing.status_code == 404 and missing.json()["message"] == "Attachment not found"
        assert owner.get(f"/emails/{email_id}/attachments?limit=0").status_code == 422
        without_key = httpx.get(f"{world.server.base_url}/emails/{email_id}/attachments")
        assert without_key.status_code == 401
        # An email without attachments lists none.
        plain = scheduled_email(owner, "att-a.test", html="<p>hi</p>")
        assert owner.get(f"/emails/{plain}/attachments").json()["data"] == []


def test_share_links_show_the_email_safely(world: World) -> None:
    with team_client(world.server, "share-owner") as api:
        verify_domain(api, world.dns, "share-owner.test")
        email_id = scheduled_email(
            api,
            "share-owner.test",
            subject="Hello <script>alert(1)</script>",
            html='<p>Body</p><script>document.title="pwned"</script><img src="https://t.example/p.gif">',
        )
        answers = [
            api.post(f"/emails/{email_id}/share"),  # Go without params, Java: no body
            api.post(f"/emails/{email_id}/share", json={}),  # Ruby's default, Node's undefined
            api.post(f"/emails/{email_id}/share", json={"expires_in": "10m"}),  # Node, PHP
            api.post(f"/emails/{email_id}/share", json={"expires_in": "2 hours"}),
            api.post(f"/emails/{email_id}/share", json={"expires_in": "48h"}),
        ]
        urls = []
        for answer in answers:
            assert answer.status_code == 200, answer.text
            shared = answer.json()
            assert shared["object"] == "email" and shared["id"] == email_id
            assert isinstance(shared["url"], str) and "/shared/" in shared["url"]
            urls.append(shared["url"])
        assert len(set(urls)) == len(urls)

        with httpx.Client(base_url=world.server.base_url) as anyone:
            page = anyone.get(public_path(urls[2]))
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            policy = page.headers["content-security-policy"]
            assert policy.startswith("sandbox;") and "script-src" not in policy
            assert "img-src data:" in policy and "frame-ancestors 'none'" in policy
            assert page.headers["cache-control"] == "private, no-store"
            assert "set-cookie" not in page.headers
            text = page.text
            assert "<script>" not in text  # the subject and the body are escaped
            assert "Hello &lt;script&gt;alert(1)&lt;/script&gt;" in text
            assert 'srcdoc="&lt;p&gt;Body&lt;/p&gt;&lt;script&gt;' in text
            assert '<iframe sandbox=""' in text

            for bad in ({"expires_in": "3 days"}, {"expires_in": "soon"}, {"expires_in": 5},
                        {"expires_in": "0m"}):  # fmt: skip
                refused = api.post(f"/emails/{email_id}/share", json=bad)
                assert refused.status_code == 422 and refused.json()["name"] == "validation_error"

            revoked = api.delete(f"/emails/{email_id}/share")
            assert revoked.json() == {"object": "email", "id": email_id, "revoked": len(urls)}
            for url in urls:
                assert anyone.get(public_path(url)).status_code == 404
            token = public_path(urls[0]).rsplit("/", 1)[1]
            assert anyone.get(f"/shared/{token[:-3]}xyz").status_code == 404
            # A download token is not a share token, and the other way round.
            assert anyone.get(f"/downloads/attachments/{token}").status_code == 404


def test_share_refuses_other_teams(world: World) -> None:
    with (
        team_client(world.server, "share-a") as owner,
        team_client(world.server, "share-b") as other,
    ):
        verify_domain(owner, world.dns, "share-a.test")
        email_id = scheduled_email(owner, "share-a.test")
        for answer in (
            other.post(f"/emails/{email_id}/share"),
            other.delete(f"/emails/{email_id}/share"),
        ):
            assert answer.status_code == 404 and answer.json()["name"] == "not_found"
        assert owner.post(f"/emails/{email_id}/share").status_code == 200
        unknown = owner.post("/emails/0190a5a0-0000-7000-8000-000000000000/share")
        assert unknown.status_code == 404


def test_a_shared_email_runs_nothing_in_a_browser(world: World) -> None:
    """Debian's chromium opens a shared link: the email is shown, its script never runs, and the
    page cannot read the cookies of the API's origin (its CSP sandbox makes it an opaque one)."""
    with team_client(world.server, "share-browser") as api:
        verify_domain(api, world.dns, "share-browser.test")
        email_id = scheduled_email(
            api,
            "share-browser.test",
            html='<p id="shown">Quarterly numbers</p>'
            '<script>document.body.dataset.ran = "yes"; parent.document.title = "pwned"</script>'
            '<img src="x" onerror="document.body.dataset.ran = \'yes\'">',
        )
        url = api.post(f"/emails/{email_id}/share").json()["url"]
    with launched_chromium() as browser:
        context = browser.new_context()
        context.add_cookies(
            [{"name": "api_session", "value": "secret", "url": world.server.base_url}]
        )
        page = context.new_page()
        page.goto(world.server.base_url + public_path(url))
        frame = page.frame_locator("iframe")
        assert frame.locator("#shown").inner_text() == "Quarterly numbers"
        assert page.title() == "Quarterly report"
        body = page.frames[1].evaluate("document.body.dataset.ran || null")
        assert body is None
        cookie = page.evaluate(
            "() => { try { return document.cookie } catch (e) { return 'blocked' } }"
        )
        assert cookie in ("blocked", "")
        context.close()
