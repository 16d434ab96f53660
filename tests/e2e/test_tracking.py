"""Open and click tracking end to end: a live `postwire serve` with a domain verified against
Knot DNS and tracking switched on through the `resend` SDK sends HTML mail to a real SMTP
receiver. What arrives still verifies with dkimpy (the rewriting happened before signing); its
pixel and rewritten link, fetched with httpx and no API key, answer a GIF and a 302 to the
original link, and the email shows `opened`, then `clicked`. A tampered token is a 404, and the
links still work after a restart (the secret lives in the spool)."""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    dkim_verifies,
    serving,
    spool_events,
    verified_domain,
    wait_until,
)
from tests.ports import free_address
from tests.smtp_receiver import ScriptedSmtpReceiver

SHOP_LINK = "https://shop.example/orders/42?ref=mail&lang=en"
HTML = f"""<!DOCTYPE html>
<html><head><title>Order</title></head>
<BODY>
<p>Your order shipped.</p>
<A HREF='{SHOP_LINK.replace("&", "&amp;")}'>Track it</A>
<a href="mailto:help@{DOMAIN}">Help</a> <a href="#top">Top</a>
</BODY></html>"""
TEXT = f"Your order shipped. Track it: {SHOP_LINK}"
BROWSER = "Mozilla/5.0 (tracking e2e)"


@pytest.fixture
def receiver() -> Iterator[ScriptedSmtpReceiver]:
    receiver = ScriptedSmtpReceiver()
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def tracking_server(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, receiver: ScriptedSmtpReceiver
) -> Iterator[LiveServer]:
    # A fixed port, so `api.public_url` (the links' base) is where the server really listens.
    listen = free_address()
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": f"{receiver.host}:{receiver.port}"},
        api_listen=listen,
        public_url=f"http://{listen}",
    ) as live:
        yield live


def html_and_text(message: bytes) -> tuple[str, str]:
    parsed = email.message_from_bytes(message, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    html_part, text_part = parsed.get_body(("html",)), parsed.get_body(("plain",))
    assert html_part is not None and text_part is not None
    return str(html_part.get_content()), str(text_part.get_content())


def last_event(email_id: str) -> str:
    return str(resend.Emails.get(email_id)["last_event"])


def test_opens_and_clicks_are_tracked_in_signed_mail(
    tracking_server: LiveServer, dns_server: AuthoritativeDnsServer, receiver: ScriptedSmtpReceiver
) -> None:
    domain = verified_domain(dns_server)
    resend.Domains.update({"id": domain["id"], "open_tracking": True, "click_tracking": True})
    switched = resend.Domains.get(domain["id"])
    assert (switched["open_tracking"], switched["click_tracking"]) == (True, True)

    sent = resend.Emails.send(
        {"from": f"Shop <shop@{DOMAIN}>", "to": "ann@example.org", "subject": "Shipped",
         "html": HTML, "text": TEXT}
    )  # fmt: skip
    wait_until(lambda: len(receiver.received()) == 1, "the mail arrived")
    wait_until(lambda: last_event(sent["id"]) == "delivered", "the email is delivered")
    message = receiver.received()[0].content
    assert dkim_verifies(message, dns_server)

    html, text = html_and_text(message)
    assert text.rstrip("\n") == TEXT  # the text part is left alone
    base = tracking_server.base_url
    (click_url,) = re.findall(rf'<A HREF="({re.escape(base)}/t/c/[\w-]+)">Track it</A>', html)
    (pixel_url,) = re.findall(
        rf'<img src="({re.escape(base)}/t/o/[\w-]+)" width="1" height="1"[^>]*/>\n?</BODY>', html
    )
    assert f'<a href="mailto:help@{DOMAIN}">Help</a> <a href="#top">Top</a>' in html
    assert resend.Emails.get(sent["id"])["html"] == HTML  # the API shows the HTML as sent

    with httpx.Client(headers={"User-Agent": BROWSER}) as client:  # no API key
        pixel = client.get(pixel_url)
        assert pixel.status_code == 200
        assert pixel.headers["content-type"] == "image/gif"
        assert pixel.content.startswith(b"GIF89a\x01\x00\x01\x00")
        assert "no-store" in pixel.headers["cache-control"]
        assert last_event(sent["id"]) == "opened"

        click = client.get(click_url, follow_redirects=False)
        assert click.status_code == 302
        assert click.headers["location"] == SHOP_LINK
        assert last_event(sent["id"]) == "clicked"

        token = click_url.rpartition("/")[2]
        edited = token[:10] + ("B" if token[10] == "A" else "A") + token[11:]
        for forged in (
            f"{base}/t/c/{edited}",
            f"{base}/t/c/{token[:-1]}",
            f"{base}/t/c/{pixel_url.rpartition('/')[2]}",  # an open token is no click token
            f"{base}/t/o/{token}",
        ):
            refused = client.get(forged, follow_redirects=False)
            assert refused.status_code == 404, forged
            assert "location" not in refused.headers

    tracking_server.stop()
    tracking_server.start()  # same port, same spool: the secret is kept
    assert httpx.get(click_url, follow_redirects=False).headers["location"] == SHOP_LINK
    tracking_server.stop()

    mine = [e for e in spool_events(tracking_server.data_dir) if e["email_id"] == sent["id"]]
    kinds = [e["type"] for e in mine]
    assert kinds[-3:] == ["email.opened", "email.clicked", "email.clicked"], kinds
    clicked = mine[-2]["data"]["click"]
    assert clicked["ipAddress"] == "127.0.0.1"
    assert clicked["link"] == SHOP_LINK
    assert clicked["userAgent"] == BROWSER
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", clicked["timestamp"])
