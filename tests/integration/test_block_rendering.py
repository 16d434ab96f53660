"""Every block and a full document rendered and shown in Debian's chromium at 600 px and 375 px
wide: screenshots saved as test artifacts (`blocks-*.png`), nothing wider than a phone's screen,
columns side by side on a desktop and stacked on a phone, every image shown."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Literal

import pytest
from playwright.sync_api import Browser, Page, Route

from postwire.broadcasts.blocks.document import BLOCK_TYPES, parse_document
from postwire.broadcasts.blocks.render import render_document
from tests.chromium import launched_chromium
from tests.dashboard.screenshots import screenshot_path
from tests.unit.broadcast_blocks.sample_documents import BRAND, full_document, single_block

WIDTHS = (600, 375)
CASES = {kind: single_block(kind) for kind in BLOCK_TYPES} | {"full": full_document()}


def solid_png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A one-colour PNG, standing in for the uploaded images the documents point at."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


IMAGE = solid_png(1200, 600, (79, 70, 229))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched_chromium() as chromium:
        yield chromium


def serve_images(route: Route) -> None:
    if route.request.resource_type == "image":
        route.fulfill(status=200, content_type="image/png", body=IMAGE)
    else:
        route.abort()  # nothing else may be fetched by an email


def shown(
    browser: Browser, html: str, width: int, scheme: Literal["light", "dark"] = "light"
) -> Page:
    context = browser.new_context(viewport={"width": width, "height": 800}, color_scheme=scheme)
    page = context.new_page()
    page.route("**/*", serve_images)
    page.set_content(html, wait_until="load")
    return page


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_blocks_in_chromium(browser: Browser, name: str, width: int) -> None:
    html = render_document(parse_document(CASES[name]), BRAND).html
    page = shown(browser, html, width)
    try:
        page.screenshot(path=str(screenshot_path(f"blocks-{name}-{width}")), full_page=True)
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        assert scroll_width <= width, f"{name} is {scroll_width} px wide at {width} px"
        broken = page.evaluate(
            "[...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.alt)"
        )
        assert broken == []
        if name in ("columns", "full"):
            lefts = page.evaluate(
                "[...document.querySelectorAll('.mj-column-px-192')]"
                ".map(column => Math.round(column.getBoundingClientRect().left))"
            )
            assert len(lefts) == 3
            if width == 600:
                assert lefts[0] < lefts[1] < lefts[2]  # side by side
            else:
                assert len(set(lefts)) == 1  # stacked
    finally:
        page.context.close()


def test_text_stays_readable_at_phone_width(browser: Browser) -> None:
    html = render_document(parse_document(full_document()), BRAND).html
    page = shown(browser, html, 375)
    try:
        sizes = page.evaluate(
            "[...document.querySelectorAll('p, li, h1, h3, a')]"
            ".filter(element => element.textContent.trim())"
            ".map(element => parseFloat(getComputedStyle(element).fontSize))"
        )
        assert sizes and min(sizes) >= 12
    finally:
        page.context.close()


def test_a_dark_system_theme_keeps_the_colours_as_designed(browser: Browser) -> None:
    """The email declares `color-scheme: light`: a dark system theme repaints nothing."""
    html = render_document(parse_document(full_document()), BRAND).html
    colours = (
        "[...document.querySelectorAll('body, h1, p, a')]"
        ".map(e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor])"
    )
    light = shown(browser, html, 600)
    dark = shown(browser, html, 600, scheme="dark")
    try:
        assert dark.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
        assert dark.evaluate(colours) == light.evaluate(colours)
        assert dark.evaluate("getComputedStyle(document.documentElement).colorScheme") == "light"
        dark.screenshot(path=str(screenshot_path("blocks-full-600-dark-theme")), full_page=True)
    finally:
        light.context.close()
        dark.context.close()
