"""An image block's picture in the broadcast editor's canvas, in chromium against a live server:
an uploaded image shows as a thumbnail served by the dashboard itself (the page's policy loads
images from its own origin only), follows the alt text, width and address as they are typed,
and is still there after a reload; an external address is left to the preview; another team
gets a 404 for the same image."""

from __future__ import annotations

import re

from playwright.sync_api import Locator, Page, expect

from tests.dashboard.conftest import log_in
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_broadcast_editor import (
    EditorWorld,
    a_png,
    block_of,
    open_editor,
    wait_saved,
)

# The fixtures, re-exported: the module's own server, a team of its own for each test.
from tests.dashboard.test_broadcast_editor import editor_server as editor_server
from tests.dashboard.test_broadcast_editor import world as world

THUMBNAIL = re.compile(r"^/broadcasts/images/[0-9a-f-]{36}$")
LOADING_MS = 20_000  # the machine may be busy: an image can take a while to arrive


def picture(page: Page) -> Locator:
    return block_of(page, "image").locator(".picture-holder img.picture")


def note(page: Page) -> Locator:
    return block_of(page, "image").locator(".picture-holder .picture-note")


def loaded_width(image: Locator) -> int:
    """The picture's natural width once it has loaded (0: it did not load)."""
    expect(image).to_have_js_property("complete", True, timeout=LOADING_MS)
    width: int = image.evaluate("img => img.naturalWidth")
    return width


def test_an_uploaded_image_shows_in_the_canvas_and_follows_its_fields(
    world: EditorWorld, page: Page
) -> None:
    broadcast_id = world.new_broadcast("Pictures in the canvas")
    open_editor(page, world, broadcast_id)
    page.click("[data-add=image]")
    expect(note(page)).to_contain_text("No image yet")

    block_of(page, "image").locator("input[type=file]").set_input_files(
        files=[{"name": "orange.png", "mimeType": "image/png", "buffer": a_png(320, 200)}]
    )
    expect(block_of(page, "image").locator(".upload-status")).to_contain_text(
        "Uploaded orange.png", timeout=LOADING_MS
    )
    thumbnail = picture(page)
    expect(thumbnail).to_have_attribute("src", THUMBNAIL)
    assert loaded_width(thumbnail) == 320
    # No alt text yet: an empty alt and a visible request for one.
    expect(thumbnail).to_have_attribute("alt", "")
    expect(note(page)).to_have_text(re.compile("Add alt text"))

    # The alt field has the focus after an upload: typing there names the picture at once.
    page.keyboard.type("An orange square")
    expect(thumbnail).to_have_attribute("alt", "An orange square")
    expect(note(page)).to_have_count(0)
    width_field = block_of(page, "image").locator("[data-field=width]")
    width_field.fill("120")
    expect(thumbnail).to_have_attribute("width", "120")
    assert round(thumbnail.bounding_box()["width"]) == 120  # type: ignore[index]
    width_field.fill("600")
    expect(thumbnail).to_have_attribute("width", "600")
    holder = block_of(page, "image").locator(".picture-holder")
    shown = thumbnail.evaluate("img => img.getBoundingClientRect().width")
    assert shown <= holder.evaluate("div => div.clientWidth")  # never wider than the canvas
    wait_saved(page)
    screenshot(page, "editor-image-thumbnail")

    # The same image after a reload, served with its type, nosniff, its own policy and caching.
    page.reload()
    expect(block_of(page, "image")).to_be_visible()
    thumbnail = picture(page)
    expect(thumbnail).to_have_attribute("alt", "An orange square")
    assert loaded_width(thumbnail) == 320
    path = thumbnail.get_attribute("src") or ""
    answer = page.request.get(world.server.url(path))
    assert answer.status == 200 and answer.body() == a_png(320, 200)
    headers = answer.headers
    assert headers["content-type"] == "image/png"
    assert headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in headers["content-security-policy"]
    assert headers["cache-control"].startswith("private, max-age=")
    again = page.request.get(world.server.url(path), headers={"If-None-Match": headers["etag"]})
    assert again.status == 304

    # An external address is left to the preview; the upload's address shows it again.
    source = block_of(page, "image").locator("[data-field=src]")
    uploaded = source.input_value()
    source.fill("https://cdn.example/leaves.png")
    expect(note(page)).to_contain_text("External image: it shows in the preview")
    expect(picture(page)).to_have_count(0)
    # An address shaped like an upload that is none of this team's says so instead.
    source.fill(re.sub(r"[0-9a-f-]{36}", "01234567-89ab-7def-8123-456789abcdef", uploaded))
    expect(note(page)).to_contain_text("could not be shown here", timeout=LOADING_MS)
    source.fill(uploaded)
    assert loaded_width(picture(page)) == 320

    # Another team's session finds no such image.
    world.server.create_user("owner@other-pictures.test", "another careful passphrase 17", team="B")
    stranger = page.context.browser.new_context()  # type: ignore[union-attr]
    try:
        other = stranger.new_page()
        log_in(other, world.server, "owner@other-pictures.test", "another careful passphrase 17")
        assert other.request.get(world.server.url(path)).status == 404
    finally:
        stranger.close()
