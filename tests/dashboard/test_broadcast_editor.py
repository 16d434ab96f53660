"""The broadcast editor in chromium against a live server: a broadcast built by adding, moving
and editing blocks with the mouse and the keyboard, persisted across a reload and rendered in
the new order; a personalization chip previewed as two contacts; the brand kit saved and
applied to a new document; every control reachable with Tab and labelled. Screenshots of the
editor at desktop and phone preview widths."""

from __future__ import annotations

import itertools
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.dashboard.conftest import DashboardServer, free_port
from tests.dashboard.module_server import running_dashboard, signed_in_cleanly
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_settings_pages import create_key_in_page
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import wait_until

PASSWORD = "a long and careful passphrase 16"
# Each test signs in as an owner of a team of its own on the module's server.
OWNER_NUMBERS = itertools.count(1)
SENDER = "News <news@editor-example.test>"


@dataclass
class EditorWorld:
    server: DashboardServer
    api: httpx.Client
    segment_id: str

    def new_broadcast(self, subject: str, **fields: Any) -> str:
        body = {"segment_id": self.segment_id, "from": SENDER, "subject": subject, **fields}
        answer = self.api.post("/broadcasts", json=body)
        assert answer.status_code == 201, answer.text
        made: str = answer.json()["id"]
        return made

    def broadcast(self, broadcast_id: str) -> dict[str, Any]:
        answer = self.api.get(f"/broadcasts/{broadcast_id}")
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found


@pytest.fixture(scope="module")
def editor_server(
    tmp_path_factory: pytest.TempPathFactory, knot: AuthoritativeDnsServer
) -> Iterator[DashboardServer]:
    """One server for the module's tests, each in a team of its own. The API's public URL is
    where it listens, so uploaded images are served to the preview."""
    api_port = free_port()
    with running_dashboard(
        tmp_path_factory.mktemp("broadcast-editor"),
        nameservers=(knot.nameserver,),
        api_listen=f"127.0.0.1:{api_port}",
        public_url=f"http://127.0.0.1:{api_port}",
    ) as running:
        yield running


@pytest.fixture
def world(editor_server: DashboardServer, page: Page) -> Iterator[EditorWorld]:
    """The owner of a new team signed in; through the REST API (a key made on the API keys
    page) a segment with Ada (who has a first name) and Bo (who has none). Every test ends
    with no script error and nothing the pages' policies refused (chromium reports a CSP
    violation as a console error naming the policy)."""
    server = editor_server
    number = next(OWNER_NUMBERS)
    owner = f"owner-{number}@editor-example.test"
    server.create_user(owner, PASSWORD, team=f"Editors {number}")
    with signed_in_cleanly(page, server, owner, PASSWORD):
        token = create_key_in_page(page, server, "editor tests")
        with httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}
        ) as api:
            segment = api.post("/segments", json={"name": "Readers"})
            assert segment.status_code in (200, 201), segment.text
            segment_id = segment.json()["id"]
            for email, first_name in (("ada@readers.test", "Ada"), ("bo@readers.test", None)):
                made = api.post(
                    "/contacts",
                    json={"email": email, "first_name": first_name, "segments": [segment_id]},
                )
                assert made.status_code in (200, 201), made.text
            yield EditorWorld(server, api, segment_id)


def open_editor(page: Page, world: EditorWorld, broadcast_id: str) -> None:
    page.goto(world.server.url(f"/broadcasts/{broadcast_id}/edit"))
    expect(page.locator("#canvas > .block").first).to_be_visible()


def blocks(page: Page) -> Locator:
    return page.locator("#canvas > .block")


def block_types(page: Page) -> list[str]:
    """The canvas's blocks, in order, once the editor's script has drawn them (a page just
    loaded may not have run it yet; the canvas is drawn whole, never block by block)."""
    page.locator("#canvas > .block").first.wait_for()
    found: list[str] = page.locator("#canvas > .block").evaluate_all(
        "items => items.map(item => item.className.match(/block-(\\w+)/)[1])"
    )
    return found


def wait_saved(page: Page) -> None:
    expect(page.locator("#save-status")).to_have_text(re.compile(r"^Saved at"), timeout=10_000)


def block_of(page: Page, kind: str, index: int = 0) -> Locator:
    return page.locator(f"#canvas > .block-{kind}").nth(index)


def test_a_broadcast_is_built_with_mouse_and_keyboard_and_persists(
    world: EditorWorld, page: Page
) -> None:
    broadcast_id = world.new_broadcast("Autumn")
    open_editor(page, world, broadcast_id)
    assert block_types(page) == ["heading", "paragraph", "footer"]
    screenshot(page, "editor-01-new-document")

    # Type a headline (select what is there, type over it).
    heading = block_of(page, "heading").locator("[data-runs]")
    heading.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("Big autumn sale")

    # Bold the last word of the paragraph with the keyboard.
    paragraph = block_of(page, "paragraph").locator("[data-runs]")
    paragraph.click()
    page.keyboard.press("Control+End")
    page.keyboard.type(" Everything goes")
    page.keyboard.press("Control+Shift+ArrowLeft")
    page.keyboard.press("Control+B")
    expect(paragraph.locator("b, strong")).to_have_text("goes")

    # Add a button with the mouse (after the selected paragraph) and an image from the keyboard.
    page.click("[data-add=button]")
    assert block_types(page) == ["heading", "paragraph", "button", "footer"]
    button = block_of(page, "button")
    button.locator("[data-field=label]").fill("Shop the sale")
    button.locator("[data-field=url]").fill("https://shop.example/sale")
    page.focus("[data-add=image]")
    page.keyboard.press("Enter")
    assert block_types(page) == ["heading", "paragraph", "button", "image", "footer"]
    image = block_of(page, "image")
    image.locator("[data-field=src]").fill("https://cdn.example/leaves.png")
    image.locator("[data-field=alt]").fill("Autumn leaves")
    page.click("[data-add=columns]")
    assert block_types(page) == ["heading", "paragraph", "button", "image", "columns", "footer"]

    # Drag the button above the heading by its handle.
    block_of(page, "button").locator(".drag-handle").drag_to(
        block_of(page, "heading"), target_position={"x": 40, "y": 4}
    )
    assert block_types(page) == ["button", "heading", "paragraph", "image", "columns", "footer"]

    # Move the image above the paragraph with Alt+ArrowUp, from its alt text field.
    block_of(page, "image").locator("[data-field=alt]").focus()
    page.keyboard.press("Alt+ArrowUp")
    assert block_types(page) == ["button", "heading", "image", "paragraph", "columns", "footer"]
    expect(block_of(page, "image").locator("[data-field=alt]")).to_be_focused()
    # ... and back down with the move-down button, from the keyboard.
    block_of(page, "image").locator("[data-action=down]").focus()
    page.keyboard.press("Enter")
    assert block_types(page) == ["button", "heading", "paragraph", "image", "columns", "footer"]

    # Duplicate the paragraph, delete the copy, undo (Ctrl+Z) and redo (the button).
    block_of(page, "paragraph").locator("[data-action=duplicate]").click()
    assert block_types(page).count("paragraph") == 2
    block_of(page, "paragraph", 1).locator("[data-action=delete]").click()
    assert block_types(page).count("paragraph") == 1
    block_of(page, "heading").locator("[data-runs]").focus()
    page.keyboard.press("Control+z")
    assert block_types(page).count("paragraph") == 2
    page.click("[data-command=redo]")
    assert block_types(page).count("paragraph") == 1
    # The footer has no move, duplicate or delete.
    expect(block_of(page, "footer").locator("[data-action=delete]")).to_have_count(0)

    wait_saved(page)
    screenshot(page, "editor-02-built")
    order = ["button", "heading", "paragraph", "image", "columns", "footer"]
    page.reload()
    expect(blocks(page).first).to_be_visible()
    assert block_types(page) == order
    expect(block_of(page, "heading").locator("[data-runs]")).to_have_text("Big autumn sale")
    expect(block_of(page, "paragraph").locator("strong, b")).to_have_text("goes")

    html = world.broadcast(broadcast_id)["html"]
    positions = [
        html.index(text)
        for text in (
            "Shop the sale",
            "Big autumn sale",
            "Everything",
            "Autumn leaves",
            "Left column",
        )
    ]
    assert positions == sorted(positions), positions
    assert re.search(r"<(strong|b)\b[^>]*>goes</(strong|b)>", html), html
    assert 'alt="Autumn leaves"' in html


def test_a_chip_is_previewed_as_a_contact_and_with_its_fallback(
    world: EditorWorld, page: Page
) -> None:
    plan = world.api.post(
        "/contact-properties", json={"key": "plan", "type": "string", "fallback_value": "free"}
    )
    assert plan.status_code in (200, 201), plan.text
    broadcast_id = world.new_broadcast("Hello")
    open_editor(page, world, broadcast_id)
    heading = block_of(page, "heading").locator("[data-runs]")
    heading.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("Welcome, ")
    page.select_option("#insert-field-name", "contact.first_name")
    page.fill("#insert-field-fallback", "reader")
    page.click("[data-command=insert-field]")
    expect(heading.locator(".chip")).to_have_text("first_name | reader")
    # A link on the paragraph's last word, with Ctrl+K and the address asked for.
    paragraph = block_of(page, "paragraph").locator("[data-runs]")
    paragraph.click()
    page.keyboard.press("Control+End")
    page.keyboard.type(" Read more")
    page.keyboard.press("Control+Shift+ArrowLeft")
    page.once("dialog", lambda dialog: dialog.accept("https://shop.example/more"))
    page.keyboard.press("Control+K")
    expect(paragraph.locator("a")).to_have_attribute("href", "https://shop.example/more")
    expect(paragraph.locator("a")).to_have_text("more")
    wait_saved(page)
    linked = re.compile(r'href="https://shop\.example/more"[^>]*>more</a>')
    wait_until(
        lambda: bool(linked.search(world.broadcast(broadcast_id)["html"])), "the link is saved"
    )

    assert "{{{contact.first_name|reader}}}" in world.broadcast(broadcast_id)["html"]

    frame = page.frame_locator("#preview-frame")
    page.fill("#preview-contact", "ada@readers.test")
    page.click("#preview-form button[type=submit]")
    expect(frame.locator("body")).to_contain_text("Welcome, Ada")
    screenshot(page, "editor-03-preview-desktop")
    page.check("#preview-phone")
    assert (
        page.locator("#preview-frame").evaluate("frame => frame.getBoundingClientRect().width")
        == 375
    )
    screenshot(page, "editor-04-preview-phone")
    page.fill("#preview-contact", "bo@readers.test")
    page.click("#preview-form button[type=submit]")
    expect(frame.locator("body")).to_contain_text("Welcome, reader")

    # A reload draws the placeholder as a chip again.
    page.reload()
    expect(block_of(page, "heading").locator(".chip")).to_have_text("first_name | reader")

    # A contact property is offered too; as the engine does, a contact without a value gets
    # the property's own fallback before the chip's.
    heading = block_of(page, "heading").locator("[data-runs]")
    heading.click()
    page.keyboard.press("End")
    page.keyboard.type(" on ")
    page.select_option("#insert-field-name", "contact.plan")
    page.fill("#insert-field-fallback", "basic")
    page.click("[data-command=insert-field]")
    wait_saved(page)
    page.fill("#preview-contact", "ada@readers.test")
    page.click("#preview-form button[type=submit]")
    expect(frame.locator("h1")).to_contain_text("Welcome, Ada on free")


def test_the_brand_kit_is_saved_and_styles_a_new_document(world: EditorWorld, page: Page) -> None:
    page.goto(world.server.url("/brand"))
    page.fill("#brand-button_background", "#aa3300")
    page.select_option("#brand-font", "georgia")
    page.select_option("#brand-button-shape", "pill")
    page.select_option("#brand-language", "fr")
    page.fill("#brand-postal-address", "1 Quay Street, Bristol")
    page.set_input_files(
        "#brand-logo-file",
        files=[{"name": "logo.png", "mimeType": "image/png", "buffer": a_png(120, 40)}],
    )
    expect(page.locator("#logo-upload-status")).to_contain_text("Uploaded logo.png")
    expect(page.locator("#brand-logo-url")).to_have_value(re.compile(r"/images/[0-9a-f-]+\.png$"))
    expect(page.locator("#brand-logo-width")).to_have_value("120")
    # The upload shows at once, from the dashboard's own origin, and asks for its alt text.
    thumbnail = page.locator("#brand-logo-image")
    expect(thumbnail).to_be_visible()
    expect(thumbnail).to_have_attribute("src", re.compile(r"^/broadcasts/images/[0-9a-f-]+$"))
    expect(page.locator("#brand-logo-note")).to_have_text("The logo as uploaded: add its alt text.")
    page.wait_for_function("() => document.getElementById('brand-logo-image').naturalWidth === 120")
    page.fill("#brand-logo-alt", "Quay Shop")
    expect(thumbnail).to_have_attribute("alt", "Quay Shop")
    page.click("#brand-form button[type=submit]")
    expect(page.locator(".flash-success")).to_contain_text("Brand kit saved")
    expect(page.locator("#brand-logo-image")).to_have_attribute("alt", "Quay Shop")  # reloaded
    page.wait_for_function("() => document.getElementById('brand-logo-image').naturalWidth === 120")
    expect(page.locator("#brand-button_background")).to_have_value("#aa3300")
    expect(page.locator("#brand-language")).to_have_value("fr")
    expect(page.frame_locator(".brand-frame").locator("body")).to_contain_text(
        "1 Quay Street, Bristol"
    )
    logo = page.frame_locator(".brand-frame").locator("img[alt='Quay Shop']")
    expect(logo).to_have_attribute("src", page.locator("#brand-logo-url").input_value())
    screenshot(page, "editor-05-brand-kit")
    # An address elsewhere is not loaded by the page (its image policy is its own origin).
    uploaded = page.locator("#brand-logo-url").input_value()
    page.fill("#brand-logo-url", "https://cdn.example.net/logo.png")
    expect(thumbnail).to_be_hidden()
    expect(page.locator("#brand-logo-note")).to_have_text(
        "An image at another address shows in the sample only."
    )
    page.fill("#brand-logo-url", uploaded)
    expect(thumbnail).to_be_visible()

    broadcast_id = world.new_broadcast("Branded")
    open_editor(page, world, broadcast_id)
    font = page.locator("#canvas").evaluate("canvas => getComputedStyle(canvas).fontFamily")
    assert "Georgia" in font
    expect(block_of(page, "footer")).to_contain_text("1 Quay Street, Bristol")
    page.click("[data-add=button]")
    wait_saved(page)
    html = world.broadcast(broadcast_id)["html"].lower()
    assert "#aa3300" in html and "georgia" in html and "1 quay street, bristol" in html
    assert '<html lang="fr" dir="auto"' in html
    expect(page.locator("#canvas")).to_have_attribute("lang", "fr")  # spelling checked in French
    # One email in another language, right to left: the inspector overrides the kit's.
    expect(page.locator("#style-document-language")).to_have_value("fr")
    page.select_option("#style-document-language", "he")
    expect(page.locator("#canvas")).to_have_attribute("dir", "rtl")
    wait_until(
        lambda: '<html lang="he" dir="rtl"' in world.broadcast(broadcast_id)["html"],
        "the email's language is saved",
    )


def test_every_control_is_labelled_and_reachable_with_tab(world: EditorWorld, page: Page) -> None:
    broadcast_id = world.new_broadcast("Accessible")
    open_editor(page, world, broadcast_id)
    for kind in ("list", "image", "button", "divider", "spacer", "columns", "social"):
        page.click(f"[data-add={kind}]")
    block_of(page, "button").locator("[data-action=select]").click()  # the inspector in use
    wait_saved(page)

    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('main input, main select, main textarea')]
            .filter(el => el.type !== 'hidden')
            .filter(el => !(el.id && document.querySelector(`label[for="${CSS.escape(el.id)}"]`))
                          && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby'))
            .map(el => el.outerHTML.slice(0, 120))"""
    )
    assert unlabelled == []
    nameless = page.evaluate(
        """() => [...document.querySelectorAll('main button, main [role=textbox], main a[href]')]
            .filter(el => !(el.getAttribute('aria-label') || el.textContent.trim()))
            .map(el => el.outerHTML.slice(0, 120))"""
    )
    assert nameless == []

    controls: list[str] = page.evaluate(
        """() => [...document.querySelectorAll(`#editor button, #editor input, #editor select,
                #editor [contenteditable=true], #envelope input`)]
            .filter(el => el.offsetParent !== null && !el.disabled && !el.closest('#block-style'))
            .map(el => el.id || el.dataset.add || el.dataset.command || el.dataset.format
                        || el.dataset.styleReset || el.outerHTML.slice(0, 80))"""
    )
    page.focus("#field-name")
    reached: set[str] = set()
    for _ in range(len(controls) * 2 + 40):
        key = page.evaluate(
            """() => { const el = document.activeElement;
                return el.id || el.dataset.add || el.dataset.command || el.dataset.format
                       || el.dataset.styleReset || el.outerHTML.slice(0, 80); }"""
        )
        reached.add(key)
        page.keyboard.press("Tab")
    missing = [control for control in controls if control not in reached]
    assert missing == [], missing
    # The selected block's style controls follow focus (each block selects itself when
    # focused): those of the block focused last were reached too.
    assert any(key.startswith("style-block-") for key in reached), reached
    # Focus is visible: the focused control draws an outline.
    page.focus("[data-add=heading]")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", "")
    screenshot(page, "editor-06-every-block")

    # The list and the social links edited from the keyboard reach the email.
    items = block_of(page, "list").locator("[data-items]")
    items.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("Alpha")
    page.keyboard.press("Enter")
    page.keyboard.type("Beta")
    social = block_of(page, "social")
    social.locator("select[data-link-field=network]").select_option("github")
    social.locator("input[data-link-field=url]").fill("https://github.com/acme")
    social.locator("[data-add-link]").click()
    expect(block_of(page, "social").locator("input[data-link-field=url]")).to_have_count(2)
    wait_until(
        lambda: all(
            text in world.broadcast(broadcast_id)["html"]
            for text in ("Alpha</li>", "Beta</li>", "https://github.com/acme")
        ),
        "the list and the social link are saved",
    )

    # Styles without CSS: the button's colour and the whole email's font, from the inspector.
    block_of(page, "button").locator("[data-action=select]").click()
    page.fill("#style-block-background", "#118833")
    page.select_option("#style-block-shape", "pill")
    page.select_option("#style-document-font", "verdana")
    sample = block_of(page, "button").locator(".button-sample .sample")
    expect(sample).to_have_css("background-color", "rgb(17, 136, 51)")
    wait_until(
        lambda: all(
            text in world.broadcast(broadcast_id)["html"].lower() for text in ("#118833", "verdana")
        ),
        "the styles are saved",
    )


def test_html_from_the_api_is_shown_until_a_blank_document_replaces_it(
    world: EditorWorld, page: Page
) -> None:
    broadcast_id = world.new_broadcast("From code", html="<p>Made by <b>our backend</b></p>")
    page.goto(world.server.url(f"/broadcasts/{broadcast_id}/edit"))
    expect(page.locator("main")).to_contain_text("This broadcast's HTML came through the API")
    expect(page.locator("#canvas")).to_have_count(0)
    expect(page.frame_locator("#preview-frame").locator("body")).to_contain_text(
        "Made by our backend"
    )
    screenshot(page, "editor-07-html-from-the-api")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Start from a blank document')")
    expect(page.locator(".flash-success")).to_contain_text("blank document")
    assert block_types(page) == ["heading", "paragraph", "footer"]
    html = world.broadcast(broadcast_id)["html"]
    assert "our backend" not in html and "Your headline" in html

    # HTML set through the API later is not silently overwritten by the next autosave.
    patched = world.api.patch(f"/broadcasts/{broadcast_id}", json={"html": "<p>Patched</p>"})
    assert patched.status_code == 200, patched.text
    page.reload()
    expect(page.locator("main")).to_contain_text("HTML was replaced through the API")
    expect(page.locator("#canvas")).to_have_count(0)
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Back to the editor')")
    expect(page.locator(".flash-success")).to_contain_text("document replaces")
    assert block_types(page) == ["heading", "paragraph", "footer"]
    assert "Your headline" in world.broadcast(broadcast_id)["html"]


def a_png(width: int, height: int) -> bytes:
    """A valid PNG of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xcc\x66\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_an_image_is_uploaded_from_its_block_and_served_to_the_preview(
    world: EditorWorld, page: Page
) -> None:
    broadcast_id = world.new_broadcast("Pictures")
    open_editor(page, world, broadcast_id)
    page.click("[data-add=image]")
    image = block_of(page, "image")
    image.locator("input[type=file]").set_input_files(
        files=[{"name": "orange.png", "mimeType": "image/png", "buffer": a_png(320, 200)}]
    )
    expect(image.locator(".upload-status")).to_contain_text("Uploaded orange.png")
    source = block_of(page, "image").locator("[data-field=src]")
    expect(source).to_have_value(re.compile(r"/images/[0-9a-f-]+\.png$"))
    expect(block_of(page, "image").locator("[data-field=width]")).to_have_value("320")
    expect(block_of(page, "image").locator("[data-field=alt]")).to_be_focused()
    page.keyboard.type("An orange square")
    wait_saved(page)
    served = world.api.get(source.input_value())
    assert served.status_code == 200 and served.content == a_png(320, 200)
    preview = page.frame_locator("#preview-frame").locator("img[alt='An orange square']")
    expect(preview).to_have_attribute("src", source.input_value())
    assert preview.evaluate("img => img.naturalWidth") == 320

    # A file that is no image is refused in words, and the block keeps its image.
    block_of(page, "image").locator("input[type=file]").set_input_files(
        files=[{"name": "notes.png", "mimeType": "image/png", "buffer": b"just some text"}]
    )
    expect(block_of(page, "image").locator(".upload-status")).to_contain_text("Not uploaded")
    expect(block_of(page, "image").locator("[data-field=src]")).to_have_value(re.compile(r"\.png$"))

    # A block dragged from the palette lands where it is dropped.
    page.locator("[data-add=divider]").drag_to(
        block_of(page, "heading"), target_position={"x": 40, "y": 4}
    )
    assert block_types(page) == ["divider", "heading", "paragraph", "image", "footer"]


def test_a_second_window_does_not_silently_undo_the_first(world: EditorWorld, page: Page) -> None:
    broadcast_id = world.new_broadcast("Two windows")
    open_editor(page, world, broadcast_id)
    other = page.context.new_page()
    open_editor(other, world, broadcast_id)

    page.fill("#field-subject", "Saved from the first window")
    wait_saved(page)
    other.fill("#field-subject", "Typed in the second window")
    expect(other.locator("#save-status")).to_have_text(
        re.compile(r"^Not saved: .*another window.*Reload"), timeout=10_000
    )
    expect(other.locator("#save-status")).to_have_attribute("data-state", "error")
    screenshot(other, "editor-08-second-window-refused")
    assert world.broadcast(broadcast_id)["subject"] == "Saved from the first window"

    other.reload()
    expect(other.locator("#field-subject")).to_have_value("Saved from the first window")
    other.fill("#field-subject", "Now from the second window")
    wait_saved(other)
    assert world.broadcast(broadcast_id)["subject"] == "Now from the second window"
    other.close()
