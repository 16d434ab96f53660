"""A CSV import through the dashboard in chromium, against a live server: the file uploaded,
its columns mapped (one to a contact property, one ignored) beside its first rows, the
import started into a segment, its counts followed live until it completes, a bad row's
error shown and the refused rows downloaded as CSV; a file larger than the dashboard's other
forms taken, kept as a draft and dropped. Screenshots of each step."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import DashboardServer, log_in
from tests.dashboard.module_server import running_dashboard
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_audience_pages import (
    check_accessible,
    create_property,
    create_segment,
    listed,
    submit,
)

PASSWORD = "correct horse battery staple 42"
PEOPLE = (
    "Email,First name,Plan,Notes\r\n"
    "ada@example.org,Ada,pro,likes engines\r\n"
    'not-an-address,Bob,basic,=HYPERLINK("x")\r\n'
    "\r\n"
    "carol@example.net,Carol,free,\r\n"
)


# Each test signs in as the owner of a team of its own on the module's server.
OWNER_NUMBERS = itertools.count(1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    with running_dashboard(tmp_path_factory.mktemp("contact-import-page")) as running:
        yield running


@pytest.fixture
def signed_in(server: DashboardServer, page: Page) -> Iterator[DashboardServer]:
    number = next(OWNER_NUMBERS)
    owner = f"owner-{number}@imports.example"
    server.create_user(owner, PASSWORD, team=f"Imports {number}")
    log_in(page, server, owner, PASSWORD)
    page.on("dialog", lambda dialog: dialog.accept())
    yield server


def test_a_csv_is_uploaded_mapped_imported_and_its_refused_rows_downloaded(
    signed_in: DashboardServer, page: Page
) -> None:
    server = signed_in
    create_property(page, server, "plan", "string", "free")
    readers = create_segment(page, server, "Readers")

    page.goto(server.url("/contacts/import"))
    expect(page.locator(".empty")).to_contain_text("No imports yet")
    screenshot(page, "audience-import-upload")
    page.set_input_files(
        "#import-file",
        files=[{"name": "people.csv", "mimeType": "text/csv", "buffer": PEOPLE.encode()}],
    )
    submit(page, "form[action='/contacts/import']")

    # The mapping step: the header and the first rows, a choice per column.
    expect(page.locator("h1")).to_contain_text("people.csv")
    preview = page.locator(".csv-preview table")
    expect(preview.locator("thead th")).to_have_text(["Email", "First name", "Plan", "Notes"])
    expect(preview.locator("tbody tr")).to_have_count(3)  # the blank row is not shown
    expect(preview.locator("tbody tr").first).to_contain_text("likes engines")
    expect(page.locator("#column-0")).to_have_value("email")  # named like a field
    expect(page.locator("#column-1")).to_have_value("first_name")
    expect(page.locator("#column-2")).to_have_value("ignore")  # keys are case-sensitive
    check_accessible(page, "the mapping step")
    page.select_option("#column-2", "properties.plan")
    page.select_option("#column-3", "ignore")
    page.select_option("#import-conflict", "upsert")
    page.get_by_label("Readers").check()
    screenshot(page, "audience-import-mapping")
    submit(page, "#mapping-form")

    # Progress: the page's script follows the counts and reloads once the job is done.
    expect(page.locator(".flash-success")).to_contain_text("The import has started")
    expect(page.locator("#import-status")).to_have_text("Completed", timeout=30_000)
    counts = page.locator("[data-count]")
    expect(counts).to_have_text(["3", "2", "0", "0", "1"])
    refused = page.locator("#refused-rows tbody tr")
    expect(refused).to_have_count(1)
    expect(refused.first).to_contain_text("3")
    expect(refused.first).to_contain_text("not-an-address")
    expect(refused.first).to_contain_text("is not an email address: it should look like name@")
    screenshot(page, "audience-import-done")
    check_accessible(page, "the import's page")

    with page.expect_download() as download:
        page.click("a[href$='/errors.csv']")
    text = Path(download.value.path()).read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["row", "email", "reason"]
    assert rows[1][0] == "3" and rows[1][1] == "not-an-address"
    assert "is not an email address" in rows[1][2]
    assert len(rows) == 2

    page.goto(server.url(f"/contacts?segment={readers}"))
    assert listed(page) == ["carol@example.net", "ada@example.org"]
    page.locator("table a", has_text="ada@example.org").click()
    expect(page.get_by_label("plan")).to_have_value("pro")
    expect(page.locator("#contact-first-name")).to_have_value("Ada")

    page.goto(server.url("/contacts/import"))
    expect(page.locator("table tbody tr")).to_have_count(1)
    expect(page.locator("table tbody tr")).to_contain_text("Completed")


def test_a_file_without_an_email_column_is_refused_at_the_mapping_step(
    signed_in: DashboardServer, page: Page, tmp_path: Path
) -> None:
    server = signed_in
    page.goto(server.url("/contacts/import"))
    page.set_input_files(
        "#import-file",
        files=[{"name": "names.csv", "mimeType": "text/csv", "buffer": b"Name\nAda\n"}],
    )
    submit(page, "form[action='/contacts/import']")
    expect(page.locator("#column-0")).to_have_value("ignore")
    submit(page, "#mapping-form")
    expect(page.locator(".flash-error")).to_contain_text(
        "Choose the column that holds the email addresses"
    )
    page.select_option("#column-0", "email")
    submit(page, "#mapping-form")
    expect(page.locator("#import-status")).to_have_text("Completed", timeout=30_000)
    expect(page.locator("[data-count=failed]")).to_have_text("1")

    page.goto(server.url("/contacts/import"))
    page.set_input_files(
        "#import-file",
        files=[{"name": "empty.csv", "mimeType": "text/csv", "buffer": b""}],
    )
    submit(page, "form[action='/contacts/import']")
    expect(page.locator(".flash-error")).to_contain_text("The CSV file is empty")
    # Larger than any other form the dashboard takes (16 MB), as the API's uploads may be.
    big = tmp_path / "later.csv"  # a file on disk: chromium reads it, not the test's pipe
    big.write_bytes(b"email\n" + b"".join(b"p%07d@example.org\n" % n for n in range(900_000)))
    assert 16 * 1024 * 1024 < big.stat().st_size < 50 * 1024 * 1024
    page.set_input_files("#import-file", big)
    with page.expect_navigation(timeout=120_000):
        page.locator("form[action='/contacts/import'] button[type=submit]").click()
    expect(page.locator(".csv-preview tbody tr").first).to_contain_text("p0000000@example.org")
    page.goto(server.url("/contacts/import"))
    expect(page.locator("table").first).to_contain_text("later.csv")
    page.locator("table a", has_text="later.csv").click()
    submit(page, "form[action$='/discard']")
    expect(page.locator(".flash-success")).to_contain_text("The upload of later.csv was dropped")
    expect(page.locator("table a", has_text="later.csv")).to_have_count(0)
