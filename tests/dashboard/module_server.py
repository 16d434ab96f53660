"""A live `postwire serve` with its dashboard for the tests of one module that neither stop,
restart nor reconfigure it: each test signs in to a team of its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, Page

from tests.dashboard.conftest import PAGE_TIMEOUT_MS, DashboardServer, log_in
from tests.dashboard.page_problems import watch_problems
from tests.e2e.conftest import write_config
from tests.ports import free_port


def create_key_in_page(page: Page, server: DashboardServer, name: str) -> str:
    """Create a full-access key through the API keys form; return the token the page shows
    once."""
    page.goto(server.url("/api-keys"))
    page.fill("#key-name", name)
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.click("form[action='/api-keys'] button[type=submit]")
    assert answer.value.headers["cache-control"] == "no-store"
    token = page.locator("#new-token").inner_text()
    assert token.startswith("re_")
    return token


@contextmanager
def running_dashboard(directory: Path, **config: Any) -> Iterator[DashboardServer]:
    """A server whose data is in `directory`, its dashboard on a free localhost port, with
    `write_config` keywords; stopped when the block ends."""
    port = free_port()
    server = DashboardServer(config_path=directory / "postwire.toml", data_dir=directory / "data")
    settings: dict[str, Any] = {
        "dashboard_listen": f"127.0.0.1:{port}",
        "dashboard_public_url": f"http://localhost:{port}",
        "metrics_listen": "",
    }
    write_config(server.config_path, server.data_dir, **(settings | config))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def team_with_key(
    browser: Browser, server: DashboardServer, email: str, password: str, team: str
) -> str:
    """Make `email` the owner of a new `team` and return a full-access API key of that team,
    created on the API keys page in a profile of its own."""
    server.create_user(email, password, team=team)
    profile = browser.new_context(locale="en-US", timezone_id="UTC")
    profile.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page = profile.new_page()
        log_in(page, server, email, password)
        return create_key_in_page(page, server, f"{team} tests")
    finally:
        profile.close()


@dataclass(frozen=True)
class TeamOnServer:
    server: DashboardServer
    api: httpx.Client  # the REST API with a full-access key of the team


@contextmanager
def team_on_dashboard(
    browser: Browser, directory: Path, email: str, password: str, team: str
) -> Iterator[TeamOnServer]:
    """A server (`running_dashboard`) with a `team` whose owner is `email`, and a REST client
    of that team."""
    with running_dashboard(directory) as server:
        token = team_with_key(browser, server, email, password, team)
        with httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as client:
            yield TeamOnServer(server, client)


@contextmanager
def signed_in_cleanly(
    page: Page, server: DashboardServer, email: str, password: str
) -> Iterator[Page]:
    """`page` signed in as `email`; the block must end with no script error and nothing the
    page's policy refused (`watch_problems`)."""
    problems = watch_problems(page)
    log_in(page, server, email, password)
    yield page
    assert problems == []
