"""A live `postwire serve` with its dashboard for the tests of one module that neither stop,
restart nor reconfigure it: each test signs in to a team of its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser

from tests.dashboard.conftest import PAGE_TIMEOUT_MS, DashboardServer, log_in
from tests.dashboard.test_settings_pages import create_key_in_page
from tests.e2e.conftest import write_config
from tests.ports import free_port


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
