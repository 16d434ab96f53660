"""The dashboard in a real browser: a live `postwire serve` with its dashboard on a free port,
Debian's chromium driven by Playwright (sync API: tests are plain `def` functions), screenshots
as artifacts, and the shell commands an operator runs to create the first user.

Fixtures:
- `dashboard_server`: a live server (API, dashboard, delivery routed to `smtp_receiver`, DNS
  through the `dns_server` Knot fixture), `auth.signup = "invite_only"`.
- `start_dashboard(**config)`: the same with `write_config` keywords of the test's choosing
  (`auth_signup="open"`, `auth_extra="google_client_id = ..."`); stopped after the test.
- `browser` (one chromium per test session), `context` and `page` (new for every test; a test
  that fails leaves a screenshot named after it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from tests.chromium import launched_chromium
from tests.dashboard.screenshots import screenshot
from tests.dns_server import AuthoritativeDnsServer
from tests.live_postwire import DASHBOARD_READY, LiveServer, write_config
from tests.ports import free_port
from tests.smtp_receiver import ScriptedSmtpReceiver

# Playwright waits this long for an element or a navigation before a test fails.
PAGE_TIMEOUT_MS = 15_000


@dataclass
class DashboardServer(LiveServer):
    """A live `postwire serve` and its dashboard's URL; tests wait for lines of its log (links
    written there when `auth.mail_from` is empty: invitations, password resets, address
    checks)."""

    dashboard_url: str = ""

    def start(self) -> None:
        super().start()
        # The dashboard starts before the server says it is ready: no line by then, none ever.
        dashboard = self.wait_for_log(DASHBOARD_READY, 0, what="dashboard listening on")
        listening = dashboard.group(1).rstrip("/")
        # The public URL (localhost) is the origin cookies and WebAuthn are bound to.
        self.dashboard_url = self.public_dashboard_url() or listening

    def public_dashboard_url(self) -> str:
        match = re.search(
            r'^\[dashboard\]\n(?:.*\n)*?public_url = "([^"]+)"', self.config_path.read_text(), re.M
        )
        return match.group(1) if match else ""

    def url(self, path: str) -> str:
        """The dashboard's URL of `path` ("/emails?status=delivered")."""
        return self.dashboard_url + path


StartDashboard = Callable[..., DashboardServer]


@pytest.fixture
def smtp_receiver() -> Iterator[ScriptedSmtpReceiver]:
    """Where the server delivers every message (`delivery.routes` "*")."""
    receiver = ScriptedSmtpReceiver()
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def start_dashboard(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, smtp_receiver: ScriptedSmtpReceiver
) -> Iterator[StartDashboard]:
    """Start a live server with `write_config` keywords (at most one per test); it is stopped
    when the test ends."""
    started: list[DashboardServer] = []

    def start(**config: Any) -> DashboardServer:
        port = free_port()
        server = DashboardServer(config_path=tmp_path / "postwire.toml", data_dir=tmp_path / "data")
        settings: dict[str, Any] = {
            "nameservers": (dns_server.nameserver,),
            "routes": {"*": f"{smtp_receiver.host}:{smtp_receiver.port}"},
            "dashboard_listen": f"127.0.0.1:{port}",
            "dashboard_public_url": f"http://localhost:{port}",
        }
        write_config(server.config_path, server.data_dir, **(settings | config))
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        if server.process is not None:
            server.stop()


@pytest.fixture
def dashboard_server(start_dashboard: StartDashboard) -> DashboardServer:
    return start_dashboard()


# Package scope, not session: Playwright's sync API runs an asyncio loop in the main thread
# while it is open, and tests after this package call asyncio.run(), which that loop forbids.
@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Debian's chromium, headless, one for all the browser tests of this package."""
    with launched_chromium() as chromium:
        yield chromium


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh profile for each test: no cookies, storage or credentials carried over; its
    clock is in UTC whatever the machine's time zone, so pages read the same everywhere."""
    profile = browser.new_context(
        viewport={"width": 1280, "height": 900}, locale="en-US", timezone_id="UTC"
    )
    profile.set_default_timeout(PAGE_TIMEOUT_MS)
    yield profile
    profile.close()


FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture
def page(context: BrowserContext, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A tab in the test's own profile; if the test fails, what it showed is saved as
    `failed-<test name>.png`."""
    tab = context.new_page()
    yield tab
    if request.node.stash.get(FAILED, False) and not tab.is_closed():
        screenshot(tab, f"failed-{request.node.name}")


def log_in(page: Page, server: DashboardServer, email: str, password: str) -> None:
    """Sign in through the login form as a person would, and wait to land past it."""
    page.goto(server.url("/login"))
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', password)
    page.click('form button[type="submit"]')
    page.wait_for_load_state()
