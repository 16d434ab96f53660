"""The Audience pages in chromium, against a live server: contact properties, segments and
topics created, changed and deleted; contacts added, searched, filtered by segment, topic,
unsubscribed and property, edited (properties, segments, topic choice) and deleted, with the
API's refusals shown in plain words; a contact's page listing the emails sent to it (sent with
the resend SDK from a domain verified against Knot); every control reachable by keyboard and
labelled. Screenshots of each page."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest
import resend
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.module_server import running_dashboard
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_journey import verify_domain
from tests.dns_server import AuthoritativeDnsServer
from tests.smtp_receiver import ScriptedSmtpReceiver

PASSWORD = "correct horse battery staple 42"
# Each test signs in as the owner of a team of its own on the module's server.
OWNER_NUMBERS = itertools.count(1)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, knot: AuthoritativeDnsServer
) -> Iterator[DashboardServer]:
    """One server for the module's tests: DNS through Knot, every message delivered to a
    receiver on loopback."""
    receiver = ScriptedSmtpReceiver()
    receiver.start()
    try:
        with running_dashboard(
            tmp_path_factory.mktemp("audience-pages"),
            nameservers=(knot.nameserver,),
            routes={"*": f"{receiver.host}:{receiver.port}"},
        ) as running:
            yield running
    finally:
        receiver.stop()


@pytest.fixture
def signed_in(server: DashboardServer, page: Page) -> Iterator[DashboardServer]:
    number = next(OWNER_NUMBERS)
    owner = f"owner-{number}@audience.example"
    server.create_user(owner, PASSWORD, team=f"Audience {number}")
    log_in(page, server, owner, PASSWORD)
    page.on("dialog", lambda dialog: dialog.accept())  # the delete buttons' confirmations
    yield server


def submit(page: Page, form: str) -> None:
    with page.expect_navigation():
        page.locator(form).locator("button[type=submit]").first.click()


def create_property(
    page: Page, server: DashboardServer, key: str, kind: str, fallback: str
) -> None:
    page.goto(server.url("/properties"))
    page.fill("#property-key", key)
    page.select_option("#property-type", kind)
    page.fill("#property-fallback", fallback)
    submit(page, "form[action='/properties']")


def create_segment(page: Page, server: DashboardServer, name: str) -> str:
    page.goto(server.url("/segments"))
    page.fill("#segment-name", name)
    submit(page, "form[action='/segments']")
    expect(page.locator(".flash-success")).to_contain_text(f"The segment {name} was created")
    return page.url.rsplit("/", 1)[1]


def create_topic(page: Page, server: DashboardServer, name: str, default: str = "opt_in") -> None:
    page.goto(server.url("/topics"))
    page.fill("#topic-name", name)
    page.fill("#topic-description", f"About {name}")
    page.select_option("#topic-default", default)
    submit(page, "form[action='/topics']")
    expect(page.locator(".flash-success")).to_contain_text(f"The topic {name} was created")


def listed(page: Page) -> list[str]:
    return page.locator("table.contacts tbody tr td:first-child").all_inner_texts()


def test_properties_segments_and_topics_are_made_changed_and_deleted(
    signed_in: DashboardServer, page: Page
) -> None:
    server = signed_in
    page.goto(server.url("/properties"))
    expect(page.locator(".empty")).to_contain_text("No contact properties yet")
    expect(page.locator("nav.subnav a[aria-current=page]")).to_have_text("Properties")
    create_property(page, server, "plan", "string", "free")
    expect(page.locator(".flash-success")).to_contain_text("The property plan was created")
    create_property(page, server, "seats", "number", "1")
    create_property(page, server, "plan", "number", "")
    expect(page.locator(".flash-error")).to_contain_text(
        "A contact property with the key plan already exists"
    )
    create_property(page, server, "age", "number", "old")
    expect(page.locator(".flash-error")).to_contain_text("fallback_value must be a number")
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(2)
    screenshot(page, "audience-properties")
    page.locator("table a", has_text="seats").click()
    page.fill("#property-fallback", "5")
    submit(page, "form[action$='" + page.url.rsplit("/", 1)[1] + "']")
    expect(page.locator(".flash-success")).to_contain_text("The fallback of seats was saved")
    expect(page.locator("#property-fallback")).to_have_value("5")
    screenshot(page, "audience-property")
    submit(page, "form[action$='/delete']")
    expect(page.locator(".flash-success")).to_contain_text("The property seats was deleted")
    expect(page.locator("table tbody tr")).to_have_count(1)

    create_segment(page, server, "Readers")
    page.fill("#segment-rename", "All readers")
    submit(page, "form.inline-form")
    expect(page.locator(".flash-success")).to_contain_text("The segment is now called All readers")
    expect(page.locator("h1")).to_have_text("All readers")
    screenshot(page, "audience-segment")
    create_segment(page, server, "Temporary")
    submit(page, "form[action$='/delete']")
    expect(page.locator(".flash-success")).to_contain_text("The segment Temporary was deleted")
    expect(page.locator("table tbody tr")).to_have_count(1)
    expect(page.locator("table")).to_contain_text("All readers")
    page.fill("#segment-name", " ")
    submit(page, "form[action='/segments']")
    expect(page.locator(".flash-error")).to_contain_text("Missing name field")
    screenshot(page, "audience-segments")

    create_topic(page, server, "News")
    create_topic(page, server, "Offers", "opt_out")
    expect(page.locator("table tbody tr")).to_have_count(2)
    screenshot(page, "audience-topics")
    page.locator("table a", has_text="News").click()
    page.fill("#topic-name", "Product news")
    page.select_option("#topic-visibility", "public")
    submit(page, "form[action^='/topics/']:not([action$='/delete'])")
    expect(page.locator(".flash-success")).to_contain_text("The topic Product news was saved")
    expect(page.locator("h1")).to_have_text("Product news")
    expect(page.locator("#topic-visibility")).to_have_value("public")
    screenshot(page, "audience-topic")
    page.fill("#topic-name", "n" * 50 + "x")  # maxlength keeps 50: the browser's own check
    expect(page.locator("#topic-name")).to_have_value("n" * 50)
    page.goto(server.url("/topics"))
    page.locator("table a", has_text="Offers").click()
    submit(page, "form[action$='/delete']")
    expect(page.locator(".flash-success")).to_contain_text("The topic Offers was deleted")
    expect(page.locator("table tbody tr")).to_have_count(1)


def add_contact(page: Page, server: DashboardServer, email: str, **fields: str) -> None:
    page.goto(server.url("/contacts/new"))
    page.fill("#contact-email", email)
    for selector, value in fields.items():
        if value == "check":
            page.check(selector.replace("__", " "))
        else:
            page.fill(selector.replace("__", " "), value)
    submit(page, "form[action='/contacts/new']")


def search(page: Page, server: DashboardServer, query: str) -> list[str]:
    page.goto(server.url("/contacts" + query))
    return listed(page)


def test_contacts_are_added_searched_filtered_edited_and_deleted(
    signed_in: DashboardServer, page: Page
) -> None:
    server = signed_in
    create_property(page, server, "plan", "string", "free")
    create_property(page, server, "seats", "number", "")
    readers = create_segment(page, server, "Readers")
    create_topic(page, server, "News")
    page.goto(server.url("/contacts"))
    expect(page.locator(".empty")).to_contain_text("No contacts yet")

    page.goto(server.url("/contacts/new"))
    page.fill("#contact-email", "ada@example.org")
    page.fill("#contact-first-name", "Ada")
    page.fill("#contact-last-name", "Lovelace")
    page.get_by_label("plan").fill("pro")
    page.get_by_label("Readers").check()
    screenshot(page, "audience-contact-new")
    submit(page, "form[action='/contacts/new']")
    expect(page.locator(".flash-success")).to_contain_text("The contact ada@example.org was added")
    expect(page.locator("h1")).to_contain_text("ada@example.org")
    add_contact(page, server, "bob@example.org", **{"#contact-first-name": "Bob"})
    add_contact(page, server, "carol@example.net", **{"#contact-unsubscribed": "check"})

    # The API's refusals, in plain words, on the form with what was typed.
    add_contact(page, server, "ADA@example.org", **{"#contact-first-name": "Twice"})
    expect(page.locator("#contact-error")).to_contain_text(
        "A contact with the email ADA@example.org already exists"
    )
    expect(page.locator("#contact-first-name")).to_have_value("Twice")
    page.fill("#contact-email", "dan@example.org")
    page.get_by_label("seats").fill("many")
    submit(page, "form[action='/contacts/new']")
    expect(page.locator("#contact-error")).to_contain_text("The property seats must be a number")

    assert search(page, server, "") == ["carol@example.net", "bob@example.org", "ada@example.org"]
    screenshot(page, "audience-contacts")
    page.fill("#contact-search", "B")
    with page.expect_navigation():
        page.press("#contact-search", "Enter")
    assert listed(page) == ["bob@example.org"]
    assert search(page, server, "?name=love") == ["ada@example.org"]
    assert search(page, server, f"?segment={readers}") == ["ada@example.org"]
    assert search(page, server, "?unsubscribed=yes") == ["carol@example.net"]
    assert search(page, server, "?unsubscribed=no&q=") == ["bob@example.org", "ada@example.org"]
    assert search(page, server, "?property=plan&value=PRO") == ["ada@example.org"]
    page.select_option("#contact-topic", label="News")
    page.select_option("#contact-subscription", "opt_out")
    with page.expect_navigation():
        page.click("form.filters button[type=submit]")
    expect(page.locator(".empty")).to_contain_text("No contact matches")
    screenshot(page, "audience-contacts-filtered")

    # Bob's page: a property, a segment and a topic choice changed in one save.
    page.goto(server.url("/contacts?q=bob"))
    page.locator("table a", has_text="bob@example.org").click()
    expect(page.locator("h1")).to_contain_text("bob@example.org")
    page.fill("#contact-last-name", "Builder")
    page.get_by_label("plan").fill("team")
    page.get_by_label("seats").fill("12")
    page.get_by_label("Readers").check()
    page.select_option("select[name^='topic.']", "opt_out")
    submit(page, "#contact-form")
    expect(page.locator(".flash-success")).to_contain_text("The contact bob@example.org was saved")
    expect(page.locator("#contact-last-name")).to_have_value("Builder")
    expect(page.get_by_label("seats")).to_have_value("12")
    expect(page.get_by_label("Readers")).to_be_checked()
    expect(page.locator("select[name^='topic.']")).to_have_value("opt_out")
    expect(page.locator("section.card").last).to_contain_text("Delete contact")
    screenshot(page, "audience-contact")
    page.get_by_label("seats").fill("a dozen")
    submit(page, "#contact-form")
    expect(page.locator(".flash-error")).to_contain_text("The property seats must be a number")

    assert search(page, server, f"?segment={readers}") == ["bob@example.org", "ada@example.org"]
    assert search(page, server, "?property=seats&value=12.0") == ["bob@example.org"]
    page.goto(server.url("/contacts"))
    page.select_option("#contact-topic", label="News")
    page.select_option("#contact-subscription", "opt_out")
    with page.expect_navigation():
        page.click("form.filters button[type=submit]")
    assert listed(page) == ["bob@example.org"]

    # Ada leaves the segment from her page; Carol is deleted.
    page.goto(server.url("/contacts?q=ada"))
    page.locator("table a", has_text="ada@example.org").click()
    page.get_by_label("Readers").uncheck()
    submit(page, "#contact-form")
    assert search(page, server, f"?segment={readers}") == ["bob@example.org"]
    page.goto(server.url(f"/segments/{readers}"))
    expect(page.locator("p.muted").first).to_contain_text("1 member")
    page.goto(server.url("/contacts?q=carol"))
    page.locator("table a", has_text="carol@example.net").click()
    expect(page.locator("h1 .badge")).to_have_text("Unsubscribed")
    submit(page, "form[action$='/delete']")
    expect(page.locator(".flash-success")).to_contain_text(
        "The contact carol@example.net was deleted"
    )
    assert listed(page) == ["bob@example.org", "ada@example.org"]


# --- accessibility -----------------------------------------------------------------------------

UNLABELLED = """() => Array.from(document.querySelectorAll('input, select, textarea'))
  .filter((el) => el.type !== 'hidden')
  .filter((el) => !(el.id && document.querySelector(`label[for="${el.id}"]`))
    && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby')
    && !el.closest('label'))
  .map((el) => el.outerHTML)"""
NAMELESS_BUTTONS = """() => Array.from(document.querySelectorAll('button, a.button'))
  .filter((el) => !(el.innerText.trim() || el.getAttribute('aria-label')))
  .map((el) => el.outerHTML)"""
# Every control a person may use: the ones Tab must reach.
CONTROLS = """() => Array.from(document.querySelectorAll(
    'main a[href], main button, main input, main select, main textarea'))
  .filter((el) => el.type !== 'hidden' && !el.disabled && el.offsetParent !== null)
  .map((el) => el.outerHTML)"""
FOCUSED = "() => document.activeElement ? document.activeElement.outerHTML : ''"


def check_accessible(page: Page, name: str) -> None:
    """Every input and select labelled, every button named, and each control of the page's
    main part reached by pressing Tab from the top."""
    assert page.evaluate(UNLABELLED) == [], f"unlabelled controls on {name}"
    assert page.evaluate(NAMELESS_BUTTONS) == [], f"buttons without a name on {name}"
    controls = page.evaluate(CONTROLS)
    page.locator("body").focus()
    reached: set[str] = set()
    for _ in range(len(controls) + 60):  # the top bar's controls come first
        page.keyboard.press("Tab")
        reached.add(page.evaluate(FOCUSED))
        if set(controls) <= reached:
            break
    missing = [c for c in controls if c not in reached]
    assert not missing, f"Tab never reaches on {name}: {missing}"


def test_every_audience_control_is_labelled_and_reached_by_keyboard(
    signed_in: DashboardServer, page: Page
) -> None:
    server = signed_in
    create_property(page, server, "plan", "string", "free")
    segment = create_segment(page, server, "Readers")
    create_topic(page, server, "News")
    add_contact(page, server, "ada@example.org", **{"#contact-first-name": "Ada"})
    contact = page.url.rsplit("/", 1)[1]
    page.goto(server.url("/topics"))
    topic = page.locator("table a").first.get_attribute("href")
    page.goto(server.url("/properties"))
    prop = page.locator("table a").first.get_attribute("href")
    pages = ["/contacts", "/contacts/new", f"/contacts/{contact}", "/segments",
             f"/segments/{segment}", "/topics", str(topic), "/properties", str(prop),
             "/contacts/import"]  # fmt: skip
    for path in pages:
        page.goto(server.url(path))
        check_accessible(page, path)
    assert re.fullmatch(r"[0-9a-f-]{36}", contact)


# --- the emails a contact received ---------------------------------------------------------------

DOMAIN = "audience-example.test"


@pytest.fixture
def sdk() -> Iterator[None]:
    saved = resend.api_url, resend.api_key
    yield
    resend.api_url, resend.api_key = saved


def test_a_contacts_page_lists_the_emails_sent_to_it(
    signed_in: DashboardServer, page: Page, dns_server: AuthoritativeDnsServer, sdk: None
) -> None:
    server = signed_in
    page.goto(server.url("/domains"))
    page.fill("#domain-name", DOMAIN)
    with page.expect_navigation():
        page.click('button:has-text("Add domain")')
    verify_domain(page, dns_server)
    page.goto(server.url("/api-keys"))
    page.fill("#key-name", "audience")
    with page.expect_navigation():
        page.click('button:has-text("Create key")')
    resend.api_url, resend.api_key = server.base_url, page.locator("#new-token").inner_text()
    messages = [
        {"to": "Ann <ann@example.org>", "subject": "Your order"},
        {"to": "joann@example.org", "subject": "Not for Ann"},
        {"to": "team@example.org", "cc": "ANN@example.org", "subject": "Copied to Ann"},
        {"to": "ann@example.org", "subject": "Your invoice"},
    ]
    sent = [
        resend.Emails.send({"from": f"Shop <shop@{DOMAIN}>", "text": "Hello", **message})["id"]
        for message in messages
    ]
    add_contact(page, server, "Ann@Example.org", **{"#contact-first-name": "Ann"})
    emails = page.locator("section.card", has_text="Emails sent to").locator("tbody tr")
    expect(emails).to_have_count(3)
    expect(emails.nth(0)).to_contain_text("Your invoice")
    expect(emails.nth(1)).to_contain_text("Copied to Ann")
    expect(emails.nth(2)).to_contain_text("Your order")
    expect(emails.first.locator("a")).to_have_attribute("href", f"/emails/{sent[3]}")
    expect(emails.first).to_contain_text("Transactional")
    screenshot(page, "audience-contact-emails")
    emails.last.locator("a").click()
    expect(page.locator("h1")).to_contain_text("Your order")
