"""The broadcast editor in chromium against a live server, when a value cannot be saved: an
invalid from address and a button link with a space are marked where they are (the field
itself, aria-invalid, the reason in words named by its description) while the subject and the
heading typed meanwhile are saved; the preview says it shows an older version than the editor
until the values are fixed, and then every mark and the note go away."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.dashboard.module_server import TeamOnServer, signed_in_cleanly, team_on_dashboard
from tests.dashboard.screenshots import screenshot

OWNER = "owner@refusals-example.test"
PASSWORD = "a long and careful passphrase 26"
SENDER = "News <news@refusals-example.test>"
SAVE_TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def world(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamOnServer]:
    directory = tmp_path_factory.mktemp("editor-refusals")
    with team_on_dashboard(browser, directory, OWNER, PASSWORD, "Refusals") as team:
        yield team


@pytest.fixture
def signed_in(world: TeamOnServer, page: Page) -> Iterator[Page]:
    with signed_in_cleanly(page, world.server, OWNER, PASSWORD) as signed:
        yield signed


def new_broadcast(api: httpx.Client, subject: str) -> str:
    segment = api.post("/segments", json={"name": f"Readers of {subject}"})
    assert segment.status_code in (200, 201), segment.text
    body = {"segment_id": segment.json()["id"], "from": SENDER, "subject": subject}
    answer = api.post("/broadcasts", json=body)
    assert answer.status_code == 201, answer.text
    made: str = answer.json()["id"]
    return made


def described_by(control: Locator) -> str:
    """The text of the elements the control's aria-describedby names, as a screen reader
    reads it after the control's name."""
    text: str = control.evaluate(
        "node => (node.getAttribute('aria-describedby') || '').split(' ').filter(Boolean)"
        ".map(id => document.getElementById(id)?.textContent || '').join(' ')"
    )
    return text


def test_a_refused_field_is_marked_where_it_is_and_the_other_edits_are_saved(
    world: TeamOnServer, signed_in: Page
) -> None:
    server, api = world.server, world.api
    page = signed_in
    broadcast_id = new_broadcast(api, "Before")
    page.goto(server.url(f"/broadcasts/{broadcast_id}/edit"))
    expect(page.locator("#canvas > .block").first).to_be_visible()
    status = page.locator("#save-status")
    note = page.locator("#preview-stale")
    expect(note).to_be_hidden()

    page.click("[data-add=button]")
    button_url = page.locator("#canvas > .block-button input[data-field=url]")
    button_url.fill("https://shop .example/autumn")
    page.fill("#field-from", "not an address")
    page.fill("#field-subject", "Autumn news, saved anyway")
    page.locator("#canvas > .block-heading [data-runs]").fill("Autumn is here")

    expect(status).to_have_attribute("data-state", "partial", timeout=SAVE_TIMEOUT_MS)
    expect(status).to_contain_text("except the from address, the button")
    sender = page.locator("#field-from")
    expect(sender).to_have_attribute("aria-invalid", "true")
    assert "is not an address like news@example.com" in described_by(sender)
    assert "An address at one of your verified domains" in described_by(sender)  # kept
    expect(button_url).to_have_attribute("aria-invalid", "true")
    assert "cannot hold spaces or line breaks" in described_by(button_url)
    expect(page.locator("#field-subject")).not_to_have_attribute("aria-invalid", "true")
    expect(note).to_be_visible()
    expect(note).to_contain_text("older than the editor")
    expect(note).to_contain_text("the from address, the button, which could not be saved")
    screenshot(page, "editor-refused-fields")

    # Everything else was saved: the subject, the heading; the sender is the one saved, and
    # the new button, refused, is not in the saved version.
    saved = api.get(f"/broadcasts/{broadcast_id}").json()
    assert saved["subject"] == "Autumn news, saved anyway"
    assert saved["from"] == SENDER
    assert "Autumn is here" in saved["html"]
    assert "shop .example" not in saved["html"] and "Learn more" not in saved["html"]

    # The marks stay through a redraw of the canvas (a block added moves the others).
    page.click("[data-add=divider]")
    expect(status).to_have_attribute("data-state", "partial", timeout=SAVE_TIMEOUT_MS)
    expect(button_url).to_have_attribute("aria-invalid", "true")

    # Fixed: saved whole, every mark and the preview's note gone.
    button_url.fill("https://shop.example/autumn")
    page.fill("#field-from", "Autumn <autumn@refusals-example.test>")
    expect(status).to_have_text(re.compile(r"^Saved at [^,]*$"), timeout=SAVE_TIMEOUT_MS)
    expect(page.locator("[aria-invalid=true]")).to_have_count(0)
    expect(page.locator(".field-error")).to_have_count(0)
    expect(note).to_be_hidden()
    saved = api.get(f"/broadcasts/{broadcast_id}").json()
    assert saved["from"] == "Autumn <autumn@refusals-example.test>"
    assert "https://shop.example/autumn" in saved["html"]

    page.reload()
    expect(page.locator("#field-from")).to_have_value("Autumn <autumn@refusals-example.test>")
    expect(page.locator("#canvas > .block-button input[data-field=url]")).to_have_value(
        "https://shop.example/autumn"
    )


def test_a_refused_document_style_is_named_above_the_blocks(
    world: TeamOnServer, signed_in: Page
) -> None:
    """A save whose only change is refused commits nothing; the preview still says it is
    older than the editor."""
    server, api = world.server, world.api
    page = signed_in
    broadcast_id = new_broadcast(api, "Only a bad link")
    page.goto(server.url(f"/broadcasts/{broadcast_id}/edit"))
    expect(page.locator("#canvas > .block").first).to_be_visible()
    page.click("[data-add=social]")
    link = page.locator("#canvas > .block-social input[data-link-field=url]").first
    link.fill("https://social .example/acme")
    expect(page.locator("#save-status")).to_have_attribute(
        "data-state", "partial", timeout=SAVE_TIMEOUT_MS
    )
    expect(link).to_have_attribute("aria-invalid", "true")
    assert "link 1: url cannot hold spaces" in described_by(link)
    expect(page.locator("#preview-stale")).to_contain_text("the social links")
