"""The Broadcasts pages in chromium against a live server whose domain is verified in Knot DNS
and whose mail goes to Postfix's smtp-sink: a new draft opens the editor; a test send arrives
personalized (as a contact, or with fallbacks) and is listed on the Emails page; a broadcast
sent to a segment from its page shows its progress live until `sent`, with delivered counts;
one is scheduled then canceled; the checklist blocks sending on a missing alt text, an
unverified from-domain and an empty segment; images are uploaded, served from
`api.public_url` with their cache headers, refused when too large, SVG or not an image, and
another team lists none of them; every control is labelled and reachable by keyboard; and a
broadcast written in the editor is tested as a contact and sent to its segment.

The audience and, but for the last test, the broadcasts' HTML are written through the REST
API, so the others need nothing of the editor but its address."""

from __future__ import annotations

import email
import email.policy
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.chromium import chromium_path
from tests.dashboard.conftest import PAGE_TIMEOUT_MS, DashboardServer, free_port, log_in
from tests.dashboard.screenshots import screenshot
from tests.dns_server import AuthoritativeDnsServer, knot_binaries
from tests.e2e.conftest import publish_records, wait_until, write_config
from tests.peers import require_peer
from tests.smtp_sink import dump_directory, running_smtp_sink, smtp_sink_binary, sunk_messages
from tests.unit.test_broadcast_images import png

OWNER = "owner@bcast-pages.test"
OTHER_OWNER = "owner@other-bcast.test"
PASSWORD = "a long and careful passphrase 16"
DOMAIN = "bcast-pages.test"
SENDER = f"Acme News <news@{DOMAIN}>"
SUBJECT = "{{{contact.first_name|Friend}}}, our November news"
HTML = (
    "<html><body><p>Hi {{{contact.first_name|there}}}, you are on {{{contact.plan}}}.</p>"
    '<p><a href="https://example.com/offer">The offer</a></p>'
    '<p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p></body></html>'
)
READERS = (("ann@example.org", "Ann"), ("bo@example.org", "Bo"), ("cy@example.org", None))
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@dataclass
class World:
    server: DashboardServer
    sink_dump: Path  # where smtp-sink keeps each message it receives
    api: httpx.Client  # the REST API with the team's key
    segment_id: str
    empty_segment_id: str
    topic_id: str


def api_created(api: httpx.Client, path: str, body: dict[str, Any]) -> str:
    answer = api.post(path, json=body)
    assert answer.status_code in (200, 201), answer.text
    made: str = answer.json()["id"]
    return made


def new_profile(browser: Browser) -> BrowserContext:
    profile = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    profile.set_default_timeout(PAGE_TIMEOUT_MS)
    return profile


@pytest.fixture(scope="module")
def world(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_peer(knot_binaries(), "Knot DNS (knotd, knotc)", "knot")
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    chromium_path()
    directory = tmp_path_factory.mktemp("broadcast-pages")
    with ExitStack() as peers:
        sink_dump = peers.enter_context(dump_directory())
        sink_host, sink_port = peers.enter_context(running_smtp_sink(sink_dump))
        dns = AuthoritativeDnsServer()
        dns.start()
        peers.callback(dns.stop)
        api_port, dashboard_port = free_port(), free_port()
        server = DashboardServer(
            config_path=directory / "postwire.toml", data_dir=directory / "data"
        )
        write_config(
            server.config_path,
            server.data_dir,
            nameservers=(dns.nameserver,),
            routes={"*": f"{sink_host}:{sink_port}"},
            api_listen=f"127.0.0.1:{api_port}",
            public_url=f"http://127.0.0.1:{api_port}",
            dashboard_listen=f"127.0.0.1:{dashboard_port}",
            dashboard_public_url=f"http://localhost:{dashboard_port}",
        )
        server.start()
        # A connection per request: an idle one the server closes between tests is never reused.
        api = httpx.Client(
            base_url=server.base_url, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)
        )
        try:
            server.create_user(OWNER, PASSWORD, team="Bcast")
            profile = new_profile(browser)
            page = profile.new_page()
            log_in(page, server, OWNER, PASSWORD)
            page.goto(server.url("/api-keys"))
            page.fill("#key-name", "broadcast pages")
            page.click("form[action='/api-keys'] button[type=submit]")
            token = page.locator("#new-token").inner_text().strip()
            api.headers["Authorization"] = f"Bearer {token}"
            profile.close()

            domain = api.post("/domains", json={"name": DOMAIN}).json()
            publish_records(dns, domain)
            api.post(f"/domains/{domain['id']}/verify")
            wait_until(
                lambda: api.get(f"/domains/{domain['id']}").json()["status"] == "verified",
                f"{DOMAIN} verified",
            )
            api_created(
                api,
                "/contact-properties",
                {"key": "plan", "type": "string", "fallback_value": "free"},
            )
            segment_id = api_created(api, "/segments", {"name": "Readers"})
            empty_segment_id = api_created(api, "/segments", {"name": "Nobody yet"})
            topic_id = api_created(
                api, "/topics", {"name": "News", "default_subscription": "opt_in"}
            )
            for address, first_name in READERS:
                contact: dict[str, Any] = {"email": address, "segments": [segment_id]}
                if first_name:
                    contact["first_name"] = first_name
                api_created(api, "/contacts", contact)
            yield World(server, sink_dump, api, segment_id, empty_segment_id, topic_id)
        finally:
            api.close()
            server.stop()


@pytest.fixture
def owner(world: World, page: Page) -> Page:
    log_in(page, world.server, OWNER, PASSWORD)
    return page


def draft(world: World, **fields: Any) -> str:
    """A draft broadcast made through the REST API (no segment chosen on the page yet)."""
    body = {
        "segment_id": world.segment_id,
        "from": SENDER,
        "subject": SUBJECT,
        "html": HTML,
        "name": "November news",
    } | fields
    return api_created(world.api, "/broadcasts", body)


def delivered_to(world: World, *addresses: str) -> bool:
    """Whether Postwire reports an email delivered to each of `addresses`."""
    emails = world.api.get("/emails", params={"limit": 100}).json()["data"]
    return all(
        any(address in e["to"] and e["last_event"] == "delivered" for e in emails)
        for address in addresses
    )


def wait_delivered(world: World, *addresses: str) -> None:
    wait_until(lambda: delivered_to(world, *addresses), f"delivered to {', '.join(addresses)}")


def messages_to(world: World, address: str) -> list[EmailMessage]:
    """What smtp-sink received for `address`. Ask once Postwire reports it delivered
    (`wait_delivered`): smtp-sink has written a message whole before it answers its end."""
    found = []
    for sunk in sunk_messages(world.sink_dump):
        if address in sunk.rcpt_tos:
            message = email.message_from_bytes(sunk.content, policy=email.policy.default)
            assert isinstance(message, EmailMessage)
            found.append(message)
    return found


def body_text(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None
    return str(part.get_content())


def flash(page: Page) -> str:
    return page.locator(".flash").first.inner_text()


def test_new_broadcast_makes_a_draft_and_opens_the_editor(world: World, owner: Page) -> None:
    owner.goto(world.server.url("/broadcasts"))
    owner.fill("#new-broadcast-name", "Winter sale")
    owner.select_option("#new-broadcast-segment", label="Readers")
    owner.click("button:has-text('New broadcast')")
    owner.wait_for_url(re.compile(rf"/broadcasts/{UUID}/edit$"))
    broadcast_id = owner.url.rsplit("/", 2)[1]
    made = world.api.get(f"/broadcasts/{broadcast_id}").json()
    assert (made["status"], made["name"], made["segment_id"]) == (
        "draft",
        "Winter sale",
        world.segment_id,
    )
    assert "unsubscribe" in (made["html"] or "").lower()  # the blank document's footer
    owner.goto(world.server.url("/broadcasts"))
    row = owner.locator(f"tr[data-broadcast-id='{broadcast_id}']")
    expect(row).to_contain_text("Winter sale")
    expect(row).to_contain_text("draft")
    expect(row).to_contain_text("Readers")
    screenshot(owner, "broadcasts-list")
    odd_cursor = owner.goto(world.server.url("/broadcasts?after=" + "x" * 5000))
    assert odd_cursor is not None and odd_cursor.status == 200

    # The segment may be chosen later: the checklist then asks for one.
    owner.fill("#new-broadcast-name", "Audience undecided")
    owner.click("button:has-text('New broadcast')")
    owner.wait_for_url(re.compile(rf"/broadcasts/{UUID}/edit$"))
    undecided = owner.url.rsplit("/", 2)[1]
    assert world.api.get(f"/broadcasts/{undecided}").json()["segment_id"] == ""
    owner.goto(world.server.url(f"/broadcasts/{undecided}"))
    expect(owner.locator("[data-check='segment']")).to_contain_text("Choose the segment")
    expect(owner.locator("#send-now")).to_be_disabled()


def test_a_test_send_arrives_personalized_and_is_an_ordinary_email(
    world: World, owner: Page
) -> None:
    broadcast_id = draft(world, name="Test send")
    owner.goto(world.server.url(f"/broadcasts/{broadcast_id}"))
    owner.fill("#test-to", "first.tester@example.net, second.tester@example.net")
    owner.click("#send-test")
    expect(owner.locator(".flash")).to_contain_text("A test was sent to first.tester@example.net")
    owner.fill("#test-to", "third.tester@example.net")
    suggested = owner.locator("#test-contact-choices option")
    assert sorted(suggested.evaluate_all("options => options.map(o => o.value)")) == sorted(
        address for address, _ in READERS
    )
    owner.fill("#test-contact", "ann@example.org")
    owner.click("#send-test")
    expect(owner.locator(".flash")).to_contain_text("third.tester@example.net")

    wait_delivered(
        world, "first.tester@example.net", "second.tester@example.net", "third.tester@example.net"
    )
    (fallbacks,) = messages_to(world, "first.tester@example.net")
    assert fallbacks["Subject"] == "[Test] Friend, our November news"
    assert "Hi there, you are on free." in body_text(fallbacks)
    assert "List-Unsubscribe" not in fallbacks  # a test unsubscribes nobody
    html_part = fallbacks.get_body(("html",))
    assert html_part is not None
    link = re.search(r'href="([^"]*/u/[^"]*)"', str(html_part.get_content()))
    assert link is not None
    unsubscribe = httpx.get(link.group(1).replace("&amp;", "&"), follow_redirects=True)
    assert unsubscribe.status_code == 404 and "not valid" in unsubscribe.text
    (as_ann,) = messages_to(world, "third.tester@example.net")
    assert as_ann["Subject"] == "[Test] Ann, our November news"
    assert "Hi Ann, you are on free." in body_text(as_ann)

    owner.goto(world.server.url("/emails"))
    expect(owner.locator("body")).to_contain_text("[Test] Ann, our November news")
    # A test is not one of the broadcast's messages.
    assert world.api.get(f"/broadcasts/{broadcast_id}").json()["counts"]["queued"] == 0


def test_a_test_send_refuses_too_many_or_bad_addresses(world: World, owner: Page) -> None:
    broadcast_id = draft(world, name="Bad tests")
    owner.goto(world.server.url(f"/broadcasts/{broadcast_id}"))
    owner.fill("#test-to", ", ".join(f"t{n}@example.net" for n in range(6)))
    owner.click("#send-test")
    expect(owner.locator(".flash-error")).to_contain_text("at most 5 addresses")
    owner.fill("#test-to", "not-an-address")
    owner.click("#send-test")
    expect(owner.locator(".flash-error")).to_contain_text("not-an-address")
    owner.fill("#test-to", "ok@example.net")
    owner.fill("#test-contact", "nobody@example.org")
    owner.click("#send-test")
    expect(owner.locator(".flash-error")).to_contain_text("No contact nobody@example.org")


def test_sent_to_a_segment_from_its_page_the_progress_reaches_sent_live(
    world: World, owner: Page, browser: Browser
) -> None:
    broadcast_id = draft(world, name="To the readers", segment_id=world.empty_segment_id)
    owner.goto(world.server.url(f"/broadcasts/{broadcast_id}"))
    owner.select_option("#audience-segment", label="Readers")
    owner.select_option("#audience-topic", label="News")
    owner.click("button:has-text('Save audience')")
    expect(owner.locator(".flash")).to_contain_text("The audience is saved.")
    expect(owner.locator("[data-check='segment']")).to_contain_text("has 3 contacts")
    expect(owner.locator("#send-now")).to_be_enabled()
    screenshot(owner, "broadcast-review")
    owner.once("dialog", lambda dialog: dialog.accept())
    owner.click("#send-now")
    expect(owner.locator(".flash")).to_contain_text("The broadcast is being sent.")
    # No reload from here on: the page's script follows the counters.
    expect(owner.locator("#progress-status")).to_have_text("sent", timeout=30_000)
    expect(owner.locator("[data-count='queued']")).to_have_text("3")
    expect(owner.locator("[data-count='delivered']")).to_have_text("3", timeout=30_000)
    expect(owner.locator("#broadcast-status")).to_have_text("sent")
    expect(owner.locator("button:has-text('Stop sending')")).to_be_hidden()
    screenshot(owner, "broadcast-progress-sent")

    wait_delivered(world, "ann@example.org", "bo@example.org", "cy@example.org")
    (to_bo,) = messages_to(world, "bo@example.org")
    assert to_bo["Subject"] == "Bo, our November news"
    assert "List-Unsubscribe" in to_bo
    (to_cy,) = messages_to(world, "cy@example.org")
    assert "Hi there, you are on free." in body_text(to_cy)
    got = world.api.get(f"/broadcasts/{broadcast_id}").json()
    assert (got["status"], got["topic_id"]) == ("sent", world.topic_id)

    # A sent broadcast is sent again as a copy: a new draft of the same content.
    owner.click("#duplicate")
    expect(owner.locator(".flash")).to_contain_text("This is a copy: a new draft.")
    expect(owner.locator("h1")).to_contain_text("To the readers (copy)")
    expect(owner.locator("#broadcast-status")).to_have_text("draft")
    assert owner.url.rsplit("/", 1)[1] != broadcast_id

    with browser.new_context(java_script_enabled=False) as quiet:
        plain = quiet.new_page()
        log_in(plain, world.server, OWNER, PASSWORD)
        plain.goto(world.server.url(f"/broadcasts/{broadcast_id}"))
        expect(plain.locator("[data-count='delivered']")).to_have_text("3")
        expect(plain.locator("#progress-status")).to_have_text("sent")


def test_scheduled_then_canceled(world: World, owner: Page) -> None:
    broadcast_id = draft(world, name="Later")
    owner.goto(world.server.url(f"/broadcasts/{broadcast_id}"))
    tomorrow = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 86_400))
    owner.fill("#schedule-at", tomorrow)
    owner.click("#schedule-send")
    expect(owner.locator(".flash")).to_contain_text("scheduled for " + tomorrow.replace("T", " "))
    expect(owner.locator("#broadcast-status")).to_have_text("scheduled")
    got = world.api.get(f"/broadcasts/{broadcast_id}").json()
    assert got["status"] == "scheduled"
    assert got["scheduled_at"].replace("T", " ").startswith(tomorrow.replace("T", " "))
    screenshot(owner, "broadcast-scheduled")
    owner.click("#cancel-schedule")
    expect(owner.locator(".flash")).to_contain_text("The schedule is canceled")
    expect(owner.locator("#broadcast-status")).to_have_text("draft")
    got = world.api.get(f"/broadcasts/{broadcast_id}").json()
    assert (got["status"], got["scheduled_at"]) == ("draft", None)

    owner.fill("#schedule-at", "2020-01-01T10:00")
    owner.click("#schedule-send")
    expect(owner.locator(".flash-error")).to_contain_text("must be in the future")


def test_scheduled_in_the_browsers_time_zone(world: World, browser: Browser) -> None:
    broadcast_id = draft(world, name="Local time")
    due = int(time.time()) // 60 * 60 + 86_400
    utc = time.strftime("%Y-%m-%d %H:%M", time.gmtime(due))
    tokyo = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(due + 9 * 3600))  # UTC+9, no DST
    with browser.new_context(locale="en-US", timezone_id="Asia/Tokyo") as there:
        tab = there.new_page()
        tab.set_default_timeout(PAGE_TIMEOUT_MS)
        log_in(tab, world.server, OWNER, PASSWORD)
        tab.goto(world.server.url(f"/broadcasts/{broadcast_id}"))
        # The browser's zone is chosen for the person, who gives the time on their clock.
        expect(tab.locator("#schedule-zone")).to_have_value("Asia/Tokyo")
        tab.fill("#schedule-at", tokyo)
        tab.click("#schedule-send")
        expect(tab.locator(".flash")).to_contain_text(
            f"scheduled for {utc} UTC ({tokyo.replace('T', ' ')} Asia/Tokyo)"
        )
        got = world.api.get(f"/broadcasts/{broadcast_id}").json()
        assert got["scheduled_at"].replace("T", " ").startswith(utc)
        expect(tab.locator("#scheduled-at .local-time")).to_contain_text("Asia/Tokyo")
        screenshot(tab, "broadcast-scheduled-local-time")
        tab.click("#cancel-schedule")
        expect(tab.locator("#broadcast-status")).to_have_text("draft")

        # A time the clocks skip is refused in words (Paris goes from 02:00 to 03:00).
        tab.select_option("#schedule-zone", "Europe/Paris")
        tab.fill("#schedule-at", "2027-03-28T02:30")
        tab.click("#schedule-send")
        expect(tab.locator(".flash-error")).to_contain_text(
            "2027-03-28 02:30 does not exist in Europe/Paris"
        )


def test_a_scheduled_broadcast_left_open_follows_its_time_to_sent(
    world: World, owner: Page
) -> None:
    broadcast_id = draft(world, name="Soon")
    sent = world.api.post(f"/broadcasts/{broadcast_id}/send", json={"scheduled_at": "in 8 seconds"})
    assert sent.status_code == 200, sent.text
    owner.goto(world.server.url(f"/broadcasts/{broadcast_id}"))
    expect(owner.locator("#progress-status")).to_have_text("scheduled")
    expect(owner.locator("#cancel-schedule")).to_be_visible()
    # The page reloads itself once its time comes, then follows the counters to the end.
    expect(owner.locator("#progress-status")).to_have_text("sent", timeout=45_000)
    expect(owner.locator("#cancel-schedule")).to_have_count(0)
    expect(owner.locator("[data-count='queued']")).to_have_text("3")


def refused_send(page: Page, world: World, broadcast_id: str) -> str:
    """Post the send form as if its button were enabled: what the page then says."""
    page.goto(world.server.url(f"/broadcasts/{broadcast_id}"))
    expect(page.locator("#send-now")).to_be_disabled()
    expect(page.locator("#send-blocked")).to_be_visible()
    page.eval_on_selector("form[action$='/send']", "form => form.submit()")
    page.wait_for_load_state()
    message = flash(page)
    assert world.api.get(f"/broadcasts/{broadcast_id}").json()["status"] == "draft"
    return message


def test_the_checklist_blocks_sending_with_its_reasons(world: World, owner: Page) -> None:
    no_alt = draft(
        world,
        name="No alt",
        html=HTML.replace("</body>", '<img src="https://example.com/a.png"></body>'),
    )
    owner.goto(world.server.url(f"/broadcasts/{no_alt}"))
    expect(owner.locator("[data-check='image_alt']")).to_contain_text("1 image has no alt text")
    expect(owner.locator("[data-check='image_alt']")).to_have_class(re.compile("failed"))
    expect(owner.locator("[data-check='unsubscribe_link']")).to_have_class(re.compile("passed"))
    screenshot(owner, "broadcast-checklist-blocked")
    assert "Not sent: 1 image has no alt text" in refused_send(owner, world, no_alt)

    unverified = draft(world, name="Elsewhere", **{"from": "news@not-verified-bcast.test"})
    assert "not-verified-bcast.test is not verified" in refused_send(owner, world, unverified)

    empty = draft(world, name="Nobody", segment_id=world.empty_segment_id)
    assert "The segment Nobody yet has no contacts" in refused_send(owner, world, empty)

    no_unsubscribe = draft(world, name="No way out", html="<p>Hello</p>")
    assert "Add an unsubscribe link" in refused_send(owner, world, no_unsubscribe)


def test_html_gmail_will_clip_is_a_warning_that_leaves_sending_open(
    world: World, owner: Page
) -> None:
    long = HTML.replace("</body>", "<p>" + "word " * 22_000 + "</p></body>")
    clipped = draft(world, name="Long read", html=long)
    owner.goto(world.server.url(f"/broadcasts/{clipped}"))
    warning = owner.locator("[data-check='html_size']")
    expect(warning).to_have_class(re.compile("warning"))
    expect(warning).to_contain_text("Warning: The HTML is 107 KB: Gmail clips emails over 102 KB")
    expect(owner.locator("#send-now")).to_be_enabled()
    expect(owner.locator("#send-blocked")).to_have_count(0)
    screenshot(owner, "broadcast-checklist-warning")


def upload(page: Page, world: World, name: str, content: bytes, mimetype: str) -> Any:
    page.goto(world.server.url("/broadcasts"))
    token = page.locator("input[name=csrf_token]").first.get_attribute("value") or ""
    return page.request.post(
        world.server.url("/broadcasts/images"),
        multipart={"file": {"name": name, "mimeType": mimetype, "buffer": content}},
        headers={"X-CSRF-Token": token},
    )


def test_images_are_uploaded_checked_and_served_with_cache_headers(
    world: World, owner: Page, browser: Browser
) -> None:
    content = png(120, 80)
    answer = upload(owner, world, "logo.png", content, "image/png")
    assert answer.status == 201, answer.text()
    image = answer.json()
    assert (image["width"], image["height"]) == (120, 80)
    assert re.fullmatch(rf"{re.escape(world.server.base_url)}/images/{UUID}\.png", image["url"])

    served = httpx.get(image["url"])  # no key: mail clients have none
    assert served.status_code == 200 and served.content == content
    assert served.headers["content-type"] == "image/png"
    assert served.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in served.headers["content-security-policy"]
    again = httpx.get(image["url"], headers={"If-None-Match": served.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert httpx.get(image["url"].replace(".png", ".gif")).status_code == 404
    for odd in ("x" * 5000, "..%2f..%2fetc", "%00"):
        assert httpx.get(f"{world.server.base_url}/images/{odd}.png").status_code == 404

    refusals = {
        "huge.png": (content + bytes(6 * 1024 * 1024), "image/png", 413, "larger than 5 MB"),
        "drawing.svg": (b'<svg xmlns="http://www.w3.org/2000/svg"/>', "image/svg+xml", 422, "SVG"),
        "notes.png": (b"these are notes, not a picture\n", "image/png", 422, "not a PNG, JPEG"),
    }
    for name, (body, mimetype, status, words) in refusals.items():
        refused = upload(owner, world, name, body, mimetype)
        assert refused.status == status, (name, refused.text())
        assert words in refused.json()["error"], (name, refused.json())

    # In a broadcast's HTML, the image shows in its page's sandboxed frame.
    pictured = draft(
        world,
        name="Pictured",
        html=HTML.replace("</body>", f'<img src="{image["url"]}" alt="Logo"></body>'),
    )
    owner.goto(world.server.url(f"/broadcasts/{pictured}"))
    shown = owner.frame_locator("iframe.broadcast-frame").locator("img")
    expect(shown).to_have_attribute("alt", "Logo")
    wait_until(
        lambda: shown.evaluate("img => img.complete && img.naturalWidth") == 120,
        "the image shown in the frame",
    )

    listed = owner.request.get(world.server.url("/broadcasts/images")).json()["data"]
    assert [item["id"] for item in listed] == [image["id"]]

    world.server.create_user(OTHER_OWNER, PASSWORD, team="Other")
    with new_profile(browser) as other:
        stranger = other.new_page()
        log_in(stranger, world.server, OTHER_OWNER, PASSWORD)
        theirs = stranger.request.get(world.server.url("/broadcasts/images")).json()["data"]
        assert theirs == []
        assert stranger.request.get(world.server.url(f"/broadcasts/{image['id']}")).status == 404


def unlabelled_controls(page: Page) -> list[str]:
    """Form controls a screen reader could not name: no <label for>, no wrapping label, no
    aria-label(ledby); and buttons and links without a name."""
    found: list[str] = page.evaluate(
        """() => Array.from(document.querySelectorAll(
              'input:not([type=hidden]), select, textarea, button, a[href]'))
            .filter(el => {
              if (el.matches('button, a'))
                return !(el.innerText.trim() || el.getAttribute('aria-label'));
              const labelled = (el.id && document.querySelector(`label[for="${el.id}"]`))
                || el.closest('label') || el.getAttribute('aria-label')
                || el.getAttribute('aria-labelledby');
              return !labelled;
            })
            .map(el => el.outerHTML.slice(0, 120))"""
    )
    return found


def reached_by_tab(page: Page, presses: int) -> set[str]:
    """The ids of the elements focus lands on, pressing Tab from the top of the page."""
    page.locator("body").focus()
    seen = set()
    for _ in range(presses):
        page.keyboard.press("Tab")
        seen.add(page.evaluate("() => document.activeElement && document.activeElement.id"))
    return seen


def test_every_control_is_labelled_and_reachable_by_keyboard(world: World, owner: Page) -> None:
    broadcast_id = draft(world, name="Keyboard")
    for path in ("/broadcasts", f"/broadcasts/{broadcast_id}"):
        owner.goto(world.server.url(path))
        assert unlabelled_controls(owner) == [], path
    controls = owner.evaluate(
        """() => Array.from(document.querySelectorAll(
                 'main input:not([type=hidden]), main select, main button:not([disabled])'))
               .map(el => el.id).filter(Boolean)"""
    )
    expected = {"audience-segment", "test-to", "test-contact", "send-test", "schedule-at"}
    assert expected | {"schedule-zone"} <= set(controls)
    reached = reached_by_tab(owner, 60)
    assert set(controls) <= reached, set(controls) - reached
    owner.set_viewport_size({"width": 375, "height": 800})
    assert owner.evaluate("document.documentElement.scrollWidth") <= 375
    inside = """() => {
        const card = document.getElementById("schedule-zone").closest(".card");
        const padding = parseFloat(getComputedStyle(card).paddingRight);
        return document.getElementById("schedule-zone").getBoundingClientRect().right
            <= card.getBoundingClientRect().right - padding + 0.5;
    }"""
    assert owner.evaluate(inside), "the time zone list sticks out of its card"
    screenshot(owner, "broadcast-page-phone")
    owner.set_viewport_size({"width": 1280, "height": 900})
    # Sending by keyboard alone: focus the address field, type, press Enter.
    owner.focus("#test-to")
    owner.keyboard.type("keys.only@example.net")
    owner.keyboard.press("Enter")
    expect(owner.locator(".flash")).to_contain_text("keys.only@example.net")


def test_a_broadcast_written_in_the_editor_is_tested_then_sent_to_its_segment(
    world: World, owner: Page
) -> None:
    """The whole way a marketer goes, with nothing written through the API but the audience:
    the brand kit's postal address, a document edited in the editor (its greeting chip left
    as the new document has it), the checklist passed, a test filled as a contact, the send
    and its progress to `sent`, and the emails the contacts receive."""
    segment_id = api_created(world.api, "/segments", {"name": "Editor readers"})
    for address, first_name in (("dee@example.org", "Dee"), ("eli@example.org", None)):
        contact: dict[str, Any] = {"email": address, "segments": [segment_id]}
        if first_name:
            contact["first_name"] = first_name
        api_created(world.api, "/contacts", contact)

    owner.goto(world.server.url("/brand"))
    owner.fill("#brand-postal-address", "Acme Ltd\n1 Harbour Street")
    owner.click("#brand-form button[type=submit]")
    expect(owner.locator(".flash")).to_contain_text("Brand kit saved")

    owner.goto(world.server.url("/broadcasts"))
    owner.fill("#new-broadcast-name", "Written in the editor")
    owner.select_option("#new-broadcast-segment", label="Editor readers")
    owner.click("button:has-text('New broadcast')")
    expect(owner).to_have_url(re.compile(rf"/broadcasts/{UUID}/edit$"))
    broadcast_id = owner.url.rsplit("/", 2)[1]
    owner.fill("#field-subject", "Fresh from the editor")
    owner.fill("[data-envelope=from]", SENDER)
    heading = owner.locator("#canvas > .block-heading [data-runs]")
    heading.click()
    owner.keyboard.press("Control+A")
    owner.keyboard.type("Editor news")
    owner.click("[data-add=button]")
    button = owner.locator("#canvas > .block-button")
    button.locator("[data-field=label]").fill("Read the news")
    button.locator("[data-field=url]").fill("https://example.com/editor-news")
    expect(owner.locator("#save-status")).to_have_text(re.compile(r"^Saved at"), timeout=10_000)

    owner.click("a:has-text('Review and send')")
    expect(owner.locator("h1")).to_contain_text("Written in the editor")
    expect(owner.locator("#send-now")).to_be_enabled()
    owner.fill("#test-to", "editor.proof@example.net")
    owner.fill("#test-contact", "dee@example.org")
    owner.click("#send-test")
    expect(owner.locator(".flash")).to_contain_text("A test was sent to editor.proof@example.net")
    wait_delivered(world, "editor.proof@example.net")
    (proof,) = messages_to(world, "editor.proof@example.net")
    assert proof["Subject"] == "[Test] Fresh from the editor"
    assert "Editor news" in body_text(proof) and "Hi Dee," in body_text(proof)

    owner.once("dialog", lambda dialog: dialog.accept())
    owner.click("#send-now")
    expect(owner.locator("#progress-status")).to_have_text("sent", timeout=30_000)
    expect(owner.locator("[data-count='delivered']")).to_have_text("2", timeout=30_000)
    wait_delivered(world, "dee@example.org", "eli@example.org")
    (to_dee,) = messages_to(world, "dee@example.org")
    (to_eli,) = messages_to(world, "eli@example.org")
    assert "Hi Dee," in body_text(to_dee) and "Hi there," in body_text(to_eli)
    assert "Acme Ltd" in body_text(to_eli) and "List-Unsubscribe" in to_eli
    html_part = to_dee.get_body(("html",))
    assert html_part is not None
    html = str(html_part.get_content())
    assert "Editor news" in html and "https://example.com/editor-news" in html
    assert world.api.get(f"/broadcasts/{broadcast_id}").json()["status"] == "sent"
