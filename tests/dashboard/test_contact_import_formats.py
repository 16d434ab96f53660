"""CSV files as spreadsheets outside the English-speaking world write them, imported through
the dashboard in chromium against a live server: Excel's semicolons and Windows-1252 text are
detected and shown in the separator and encoding choices; a file detection is unsure of says
so and is read again with the separator a person chooses; tabs are detected; and columns no
property holds become new contact properties, of the type chosen on the mapping step."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import DashboardServer
from tests.dashboard.module_server import TeamOnServer, signed_in_cleanly, team_on_dashboard
from tests.dashboard.screenshots import screenshot
from tests.dashboard.test_audience_pages import check_accessible, submit
from tests.e2e.conftest import wait_until

OWNER = "owner@formats.example"
PASSWORD = "correct horse battery staple 13"
# What Excel in Germany saves as "CSV": semicolons (the comma is the decimal mark) and
# Windows-1252.
GERMAN_EXCEL = (
    "E-Mail;Vorname;Stadt;Sitze\r\n"
    "jörg@example.de;Jörg;Köln;3\r\n"
    "anne@example.de;Änne;München;12\r\n"
).encode("cp1252")


@pytest.fixture(scope="module")
def world(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamOnServer]:
    directory = tmp_path_factory.mktemp("import-formats")
    with team_on_dashboard(browser, directory, OWNER, PASSWORD, "Formats") as team:
        yield team


@pytest.fixture
def signed_in(world: TeamOnServer, page: Page) -> Iterator[Page]:
    with signed_in_cleanly(page, world.server, OWNER, PASSWORD) as signed:
        yield signed


def upload(page: Page, server: DashboardServer, name: str, data: bytes) -> None:
    page.goto(server.url("/contacts/import"))
    page.set_input_files(
        "#import-file", files=[{"name": name, "mimeType": "text/csv", "buffer": data}]
    )
    submit(page, "form[action='/contacts/import']")
    expect(page.locator("h1")).to_contain_text(name)


def header_cells(page: Page) -> list[str]:
    return page.locator(".csv-preview thead th").all_inner_texts()


def test_excel_semicolons_and_windows_1252_with_new_properties(
    world: TeamOnServer, signed_in: Page
) -> None:
    server, api = world.server, world.api
    page = signed_in
    upload(page, server, "kunden.csv", GERMAN_EXCEL)

    # Detected, shown in the choices; Windows-1252 is likely, not certain: the page says so.
    expect(page.locator("#import-separator")).to_have_value(";")
    expect(page.locator("#import-encoding")).to_have_value("windows-1252")
    expect(page.locator("#format-unsure")).to_be_visible()
    assert header_cells(page) == ["E-Mail", "Vorname", "Stadt", "Sitze"]
    expect(page.locator(".csv-preview tbody tr").first).to_contain_text("Köln")
    expect(page.locator(".csv-preview tbody tr").nth(1)).to_contain_text("Änne")

    # The mapping: the key field shows only for a column becoming a new property.
    expect(page.locator("#column-0")).to_have_value("email")
    page.select_option("#column-1", "first_name")
    expect(page.locator("#new-key-2")).to_be_hidden()
    page.select_option("#column-2", "new.string")
    expect(page.locator("#new-key-2")).to_be_visible()
    expect(page.locator("#new-key-2")).to_have_value("stadt")
    page.select_option("#column-3", "new.number")
    page.fill("#new-key-3", "seats")
    check_accessible(page, "the mapping step with new properties")
    screenshot(page, "audience-import-formats-mapping")
    submit(page, "#mapping-form")
    expect(page.locator(".flash-success")).to_contain_text("The import has started")
    expect(page.locator("#import-status")).to_have_text("Completed", timeout=30_000)
    expect(page.locator("[data-count]")).to_have_text(["2", "2", "0", "0", "0"])

    # The properties exist as the properties API makes them, and hold the rows' values.
    properties = {p["key"]: p["type"] for p in api.get("/contact-properties").json()["data"]}
    assert properties == {"stadt": "string", "seats": "number"}
    anne = api.get("/contacts/anne@example.de").json()
    assert anne["first_name"] == "Änne"
    assert anne["properties"]["stadt"] == {"value": "München", "type": "string"}
    assert anne["properties"]["seats"] == {"value": "12", "type": "number"}  # as the API answers


def test_a_file_detection_is_unsure_of_is_read_again_as_chosen(
    world: TeamOnServer, signed_in: Page
) -> None:
    server = world.server
    page = signed_in
    # Commas and semicolons both split every line in two: only a person can say.
    upload(page, server, "ambiguous.csv", b"email,tag;name\nada@example.org,a;Ada\n")
    expect(page.locator("#format-unsure")).to_be_visible()
    expect(page.locator("#import-separator")).to_have_value(",")
    assert header_cells(page) == ["email", "tag;name"]

    page.select_option("#import-separator", ";")
    submit(page, "#format-form")
    expect(page.locator(".flash-success")).to_contain_text(
        "read again as UTF-8, semicolon-separated"
    )
    assert header_cells(page) == ["email,tag", "name"]
    expect(page.locator("#import-separator")).to_have_value(";")
    expect(page.locator("#format-unsure")).to_have_count(0)
    expect(page.locator(".csv-preview tbody tr").first).to_contain_text("Ada")


def test_tabs_are_detected(world: TeamOnServer, signed_in: Page) -> None:
    server = world.server
    page = signed_in
    upload(page, server, "export.tsv", b"email\tfirst_name\nbo@example.org\tBo, Jr.; the 2nd\n")
    expect(page.locator("#import-separator")).to_have_value("tab")
    expect(page.locator("#import-encoding")).to_have_value("utf-8")
    expect(page.locator("#format-unsure")).to_have_count(0)
    assert header_cells(page) == ["email", "first_name"]
    expect(page.locator(".csv-preview tbody tr").first).to_contain_text("Bo, Jr.; the 2nd")


def finished_import(api: httpx.Client, import_id: str) -> dict[str, Any]:
    def done() -> bool:
        return api.get(f"/contacts/imports/{import_id}").json()["status"] in ("completed", "failed")

    wait_until(done, f"contact import {import_id} finished")
    found: dict[str, Any] = api.get(f"/contacts/imports/{import_id}").json()
    return found


def test_the_api_detects_the_format_and_takes_one_chosen(world: TeamOnServer) -> None:
    """The REST import reads the same files: detected, or as its `separator` and `encoding`
    fields say."""
    api = world.api
    file = ("email;first_name\r\nzoe@example.fr;Zoé\r\n").encode("cp1252")
    made = api.post("/contacts/imports", files={"file": ("zoe.csv", file, "text/csv")})
    assert made.status_code == 201, made.text
    job = finished_import(api, made.json()["id"])
    assert job["status"] == "completed" and job["counts"]["created"] == 1, job
    assert api.get("/contacts/zoe@example.fr").json()["first_name"] == "Zoé"

    # One column by any separator: the encoding given is used as given.
    file = "email\r\nlea@example.fr\r\n".encode("cp1252")
    fields = {"separator": "tab", "encoding": "windows-1252"}
    made = api.post("/contacts/imports", data=fields, files={"file": ("l.csv", file, "text/csv")})
    assert made.status_code == 201, made.text
    assert finished_import(api, made.json()["id"])["counts"]["created"] == 1

    refused = api.post(
        "/contacts/imports", data={"separator": "|"}, files={"file": ("x.csv", file, "text/csv")}
    )
    assert refused.status_code == 422 and "`separator`" in refused.json()["message"]
