"""Screenshots of dashboard pages, kept as test artifacts.

They go to `$POSTWIRE_TEST_ARTIFACTS/screenshots/` when that variable is set (a CI job uploads
the directory), else to `test-artifacts/screenshots/` at the repository root (ignored by git).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from playwright.sync_api import Page

REPO_ROOT = Path(__file__).resolve().parents[2]


def artifacts_dir() -> Path:
    configured = os.environ.get("POSTWIRE_TEST_ARTIFACTS")
    return Path(configured) if configured else REPO_ROOT / "test-artifacts"


def screenshot_path(name: str) -> Path:
    """Where the screenshot `name` goes: a file name made of its words, ending in .png."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "page"
    directory = artifacts_dir() / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{safe}.png"


def screenshot(page: Page, name: str) -> Path:
    """A full-page PNG of what `page` shows now, saved as `name`; returns its path."""
    path = screenshot_path(name)
    # Chromium paints a frame only once it has been in view: an email's HTML below the fold
    # would show blank in a full-page capture.
    for frame in page.locator("iframe").all():
        frame.scroll_into_view_if_needed()
    page.screenshot(path=str(path), full_page=True)
    return path
