"""The harness itself: the live server's dashboard opens in chromium, an owner created from the
shell logs in through the form, and screenshots land where the artifacts are collected."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page

from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.screenshots import screenshot, screenshot_path

OWNER = "owner@example.org"
PASSWORD = "correct horse battery staple 42"


def test_screenshot_names_become_safe_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POSTWIRE_TEST_ARTIFACTS", str(tmp_path))
    assert screenshot_path("failed-test_x[chromium]") == (
        tmp_path / "screenshots" / "failed-test_x-chromium.png"
    )
    assert screenshot_path("../../etc/passwd").parent == tmp_path / "screenshots"
    assert screenshot_path("///").name == "page.png"


def test_an_owner_created_from_the_shell_logs_in(
    dashboard_server: DashboardServer, page: Page
) -> None:
    assert urlsplit(dashboard_server.dashboard_url).hostname == "localhost"
    page.goto(dashboard_server.url("/"))
    assert urlsplit(page.url).path == "/login"  # a signed-out visitor is sent to log in
    screenshot(page, "harness-login")

    dashboard_server.create_user(OWNER, PASSWORD, team="Harness")
    log_in(page, dashboard_server, OWNER, PASSWORD)
    assert urlsplit(page.url).path != "/login", page.content()
    screenshot(page, "harness-landing")
