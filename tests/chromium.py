"""Debian's chromium, headless, driven by Playwright's sync API: the one way every browser test
starts it (Playwright downloads no browser of its own here)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, sync_playwright

from tests.peers import require_peer

CHROMIUM = "/usr/bin/chromium"


def chromium_path() -> str:
    """The chromium program; the test fails, naming the package, where it is missing."""
    return require_peer(CHROMIUM if shutil.which(CHROMIUM) else None, "chromium", "chromium")


@contextmanager
def launched_chromium() -> Iterator[Browser]:
    """A headless chromium, closed on exit.

    Playwright's sync API runs on an asyncio loop of its own in this thread. Once trio-asyncio
    is imported (by any test that loads Postwire's SMTP submission), `asyncio.new_event_loop()`
    makes trio-asyncio's synchronous loop instead, on which Playwright's driver breaks and leaves
    a loop marked running for every test after it. An explicit asyncio policy for this thread is
    what trio-asyncio steps aside for while the loop is made."""
    executable = chromium_path()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        driver_context = sync_playwright()
        driver = driver_context.__enter__()
    finally:
        asyncio.set_event_loop_policy(None)
    try:
        browser = driver.chromium.launch(executable_path=executable, headless=True)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        driver_context.__exit__(None, None, None)
