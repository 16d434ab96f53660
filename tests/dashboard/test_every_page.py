"""Every page of the dashboard in chromium, signed in as an owner whose team has one of every
record (the two-team world of test_isolation): every GET route of the app's URL map that
renders a page is visited, and on each there is no CSP violation, no console error, no broken
asset, every POST form carries a CSRF token (and no GET form does: it would end up in an
address); each is screenshotted. The signed-out pages the same. Then, with JavaScript turned
off, the pages that read data still show it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Request, Response, expect

from postwire.dashboard.app import CONTENT_SECURITY_POLICY
from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_isolation import (
    MEMBER,
    PASSWORD,
    PUBLIC_ID_ROUTES,
    Route,
    Team,
    World,
    fill,
    personal,
    routes,
    world,
)

__all__ = ["routes", "world"]  # the module-scoped fixtures, shared with the isolation test

# GET routes that answer something other than a page: JSON for scripts, an image, a download,
# the email's HTML (checked inside its page's frame), and sign-in hand-offs to a provider.
NOT_PAGES = {
    "/emails/status",
    "/emails/<email_id>/raw",
    "/emails/<email_id>/html",
    "/broadcasts/<broadcast_id>/progress",
    "/broadcasts/<broadcast_id>/html",
    "/broadcasts/images",
    "/broadcasts/images/<image_id>",
    "/broadcasts/<broadcast_id>/preview",
    "/brand/preview",
    "/account/mfa/totp/<device_id>/qr.svg",
    "/contacts/imports/<import_id>/progress",
    "/contacts/imports/<import_id>/errors.csv",
    "/login/google",
    "/login/github",
    "/",
}
SIGNED_OUT_PAGES = ("/login", "/signup", "/password/forgot", "/login/sso")
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
# Chromium reports a CSP violation as a console error too; this catches every one of them,
# including those of frames, with the directive that refused it.
LISTEN_FOR_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', event => {
  window.__violations.push(event.violatedDirective + ' ' + (event.blockedURI || 'inline'));
});
"""


@dataclass
class Watch:
    """What went wrong on the page being visited: console errors, script errors, assets
    that failed."""

    problems: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        page.on(
            "console",
            lambda message: (
                self.problems.append(f"console {message.type}: {message.text}")
                if message.type in ("error", "warning")
                else None
            ),
        )
        page.on("pageerror", lambda error: self.problems.append(f"script error: {error}"))
        page.on("requestfailed", self.failed)
        page.on("response", self.response)

    def failed(self, request: Request) -> None:
        # Aborted: the next page was opened before this one's favicon came, which is no fault.
        if request.failure != "net::ERR_ABORTED":
            self.problems.append(f"failed: {request.url} ({request.failure})")

    def response(self, response: Response) -> None:
        kind = response.request.resource_type
        if kind in ("stylesheet", "script", "image", "font") and response.status != 200:
            self.problems.append(f"{kind} {response.url}: {response.status}")

    def take(self) -> list[str]:
        taken, self.problems = self.problems, []
        return taken


@pytest.fixture
def owner_page(browser: Browser, world: World) -> Iterator[tuple[Page, Watch]]:
    profile = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    profile.add_init_script(LISTEN_FOR_VIOLATIONS)
    page = profile.new_page()
    watch = Watch()
    watch.attach(page)
    log_in(page, world.server, world.alpha.owner, PASSWORD)
    try:
        yield page, watch
    finally:
        profile.close()


def page_paths(routes: list[Route], team: Team) -> list[str]:
    """The address of every page a signed-in owner can open, ids filled with the team's."""
    paths = []
    for route in routes:
        rule = route.rule
        access = route.access
        if "GET" not in (rule.methods or set()) or rule.rule in NOT_PAGES:
            continue
        if rule.rule in PUBLIC_ID_ROUTES or (access is not None and access.public):
            continue
        if access is not None and access.pending_mfa:
            continue  # the second step of a login: this session is past it
        paths.append(fill(rule, team.ids))
    return sorted(paths)


def shot_name(prefix: str, path: str) -> str:
    """ "every-page-webhooks-id-events-id" for /webhooks/<id>/events/<id>."""
    return prefix + re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "id", path).replace("/", "-")


def check_page(page: Page, watch: Watch, server: DashboardServer, path: str) -> list[str]:
    """Open `path`; what is wrong with it, in words."""
    answer = page.goto(server.url(path))
    page.wait_for_load_state("load")
    page.wait_for_timeout(200)  # deferred scripts run and report
    problems = [f"{path}: {problem}" for problem in watch.take()]
    if answer is None or answer.status != 200:
        problems.append(f"{path}: answered {answer and answer.status}")
    else:
        headers = answer.headers
        for name, value in SECURITY_HEADERS.items():
            if headers.get(name) != value:
                problems.append(f"{path}: {name} is {headers.get(name)!r}")
    violations = page.evaluate("window.__violations || []")
    problems += [f"{path}: CSP violation {violation}" for violation in violations]
    for selector, attribute in (
        ("link[href]", "href"),
        ("script[src]", "src"),
        ("img[src]", "src"),
    ):
        for element in page.locator(selector).all():
            url = element.get_attribute(attribute) or ""
            if url.startswith("data:"):
                continue
            if not url.startswith("/") or url.startswith("//"):
                problems.append(f"{path}: {url} is not served by Postwire")
                continue
            fetched = page.request.get(server.url(url))
            if fetched.status != 200:
                problems.append(f"{path}: {url} answered {fetched.status}")
    for form in page.locator("form").all():
        method = (form.get_attribute("method") or "get").lower()
        has_token = form.locator("input[name=csrf_token]").count() == 1
        action = form.get_attribute("action")
        if method == "post" and not has_token:
            problems.append(f"{path}: POST form {action} without a CSRF token")
        if method == "get" and has_token:
            problems.append(f"{path}: GET form {action} carries the CSRF token")
    screenshot(page, shot_name("every-page", path))
    return problems


def test_every_page_of_an_owner_is_clean(
    owner_page: tuple[Page, Watch], world: World, routes: list[Route]
) -> None:
    page, watch = owner_page
    watch.take()
    paths = page_paths(routes, world.alpha)
    assert len(paths) >= 15, paths
    problems = [p for path in paths for p in check_page(page, watch, world.server, path)]
    assert not problems, "\n".join(problems)

    # The watch sees what it is there to see: an inline style the policy refuses.
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<p style=\"color: red\">x</p>')")
    page.wait_for_timeout(200)
    assert any("style-src" in v for v in page.evaluate("window.__violations")), "no violation"
    assert watch.take(), "the console error of the violation was not seen"


def test_every_signed_out_page_is_clean(browser: Browser, world: World) -> None:
    profile: BrowserContext = browser.new_context()
    profile.add_init_script(LISTEN_FOR_VIOLATIONS)
    try:
        page, watch = profile.new_page(), Watch()
        watch.attach(page)
        problems = [
            p for path in SIGNED_OUT_PAGES for p in check_page(page, watch, world.server, path)
        ]
        assert not problems, "\n".join(problems)
    finally:
        profile.close()


def test_pages_show_their_data_without_javascript(browser: Browser, world: World) -> None:
    alpha, server = world.alpha, world.server
    profile = browser.new_context(java_script_enabled=False)
    try:
        page = profile.new_page()
        log_in(page, server, alpha.owner, PASSWORD)
        ids = alpha.ids
        expected = {
            "/emails": [alpha.subject, f"customer@{alpha.name.lower()}-reader.test"],
            f"/emails/{ids['email_id']}": [alpha.subject, "delivered", f"shop@{alpha.domain}"],
            "/metrics": [],
            "/domains": [alpha.domain],
            f"/domains/{ids['domain_id']}": [alpha.domain, "DKIM", "Verified"],
            "/api-keys": [f"{alpha.name} key"],
            "/webhooks": [world.hooks.url],
            f"/webhooks/{ids['webhook_id']}": [world.hooks.url, "email.sent"],
            "/suppressions": [f"gone@{alpha.name.lower()}-x.test"],
            "/team": [alpha.owner, "member@alpha-iso.test", f"new@{alpha.name.lower()}-x.test"],
            "/account": [alpha.owner, "password"],
        }
        for path, words in expected.items():
            answer = page.goto(server.url(path))
            assert answer is not None and answer.status == 200, path
            main = page.locator("main")
            for word in words:
                expect(main).to_contain_text(word)
            screenshot(page, shot_name("no-js", path))
        # Metrics: the team's one email counted as sent and delivered.
        page.goto(server.url("/metrics"))
        expect(page.locator("[data-metric=sent] .value")).to_have_text("1")
        expect(page.locator("[data-metric=delivered] .value")).to_have_text("1")
    finally:
        profile.close()


def test_a_member_sees_no_form_for_a_change_they_may_not_make(
    browser: Browser, world: World, routes: list[Route]
) -> None:
    """A member opens every page an owner can (the delete confirmations are refused, the
    owner's enrolment is not theirs): clean, and none offers a form the guard would refuse."""
    access = {route.rule.rule: route.access for route in routes}
    adapter = routes[0].rule.map.bind("localhost")
    profile = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    profile.add_init_script(LISTEN_FOR_VIOLATIONS)
    try:
        page, watch = profile.new_page(), Watch()
        watch.attach(page)
        log_in(page, world.server, MEMBER, PASSWORD)
        watch.take()
        problems, shown = [], 0
        for path in page_paths(routes, world.alpha):
            status = page.request.get(world.server.url(path), max_redirects=0).status
            if path.endswith("/delete") and status == 403:
                continue
            if path.startswith("/account/mfa/totp/") and status == 404:
                continue
            shown += 1
            problems += check_page(page, watch, world.server, path)
            for action in page.locator("main form[method=post]").evaluate_all(
                "forms => forms.map(form => form.getAttribute('action'))"
            ):
                rule, _ = adapter.match(action, method="POST", return_rule=True)
                if not personal(access[rule.rule]):
                    problems.append(f"{path}: a form posting to {action}, refused to a member")
        assert not problems, "\n".join(problems)
        assert shown >= 12
    finally:
        profile.close()


HOSTILE = '<i id="injected">x</i><script>window.ran = 1</script>"\'&amp;'


def test_markup_a_sender_chose_is_shown_as_text(
    owner_page: tuple[Page, Watch], world: World
) -> None:
    """Whoever holds an API key chooses an email's subject and text; the dashboard's
    people see them as text, on every page that shows them. (Last: it sends one more email.)"""
    page, watch = owner_page
    alpha = world.alpha
    sent = world.api.post(
        "/emails",
        headers={"Authorization": f"Bearer {alpha.token}"},
        json={
            "from": f"Shop <shop@{alpha.domain}>",
            "to": "reader@alpha-reader.test",
            "subject": HOSTILE,
            "text": HOSTILE,
        },
    )
    assert sent.status_code == 200, sent.text
    email_id = sent.json()["id"]
    watch.take()
    for path in ("/emails", f"/emails/{email_id}", f"/webhooks/{alpha.ids['webhook_id']}"):
        page.goto(world.server.url(path))
        page.wait_for_load_state("load")
        assert page.locator("#injected").count() == 0, path
        assert page.evaluate("window.ran") is None, path
        if path != f"/webhooks/{alpha.ids['webhook_id']}":
            expect(page.locator("main")).to_contain_text('<i id="injected">x</i>')
        assert not page.evaluate("window.__violations"), path
        screenshot(page, shot_name("markup-as-text", path))
    assert not watch.take()
