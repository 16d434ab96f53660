"""Text nobody broke into words stays inside the window: an email whose subject is 10,000
characters without a space (and whose text part has a line as long), a contact whose names
are as long as the API allows, and a template named the same way. On the Emails list, the
email's page, the contact's page, the Audience list and the Templates pages, the document is
no wider than the window, and the long text is still shown whole, wrapped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import log_in
from tests.dashboard.screenshots import screenshot_path
from tests.dashboard.sending_team import PASSWORD, SendingTeam, sending_team

OWNER = "owner@long-text.test"
DOMAIN = "long-text.test"
SUBJECT = "Receipt" + "x" * 9_993  # 10,000 characters, no space
NAME = "N" * 256  # the most a contact's first or last name may hold
WIDTH = 1280


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SendingTeam]:
    with sending_team(tmp_path_factory.mktemp("long-text"), owner=OWNER, domain=DOMAIN) as made:
        yield made


def test_unbroken_text_wraps_on_every_page_that_shows_it(team: SendingTeam, page: Page) -> None:
    # Scheduled: nothing is delivered, and the page shows the email as it was accepted.
    email_id = team.created(
        "/emails",
        {
            "from": f"Shop <shop@{DOMAIN}>",
            "to": f"{'r' * 60}@{DOMAIN}",
            "subject": SUBJECT,
            "text": "y" * 10_000,
            "scheduled_at": "in 1 day",
        },
    )
    contact_id = team.created(
        "/contacts",
        {"email": f"{'c' * 60}@{DOMAIN}", "first_name": NAME, "last_name": NAME},
    )
    template_id = team.created("/templates", {"name": "T" * 256, "html": "<p>" + "z" * 5000})
    page.set_viewport_size({"width": WIDTH, "height": 900})
    log_in(page, team.server, OWNER, PASSWORD)
    for path, shown in (
        ("/emails", SUBJECT),
        (f"/emails/{email_id}", SUBJECT),
        ("/contacts", NAME),
        (f"/contacts/{contact_id}", NAME),
        ("/templates", "T" * 256),
        (f"/templates/{template_id}", "T" * 256),
    ):
        page.goto(team.server.url(path))
        expect(page.locator("main")).to_contain_text(shown)
        width = page.evaluate("document.documentElement.scrollWidth")
        # The window, not the whole page: wrapped, the text makes a page thousands of px tall.
        page.screenshot(path=screenshot_path(f"long-text{path.replace('/', '-')[:40]}"))
        assert width <= WIDTH, f"{path} is {width} px wide in a {WIDTH} px window"
