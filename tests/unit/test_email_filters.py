"""Table tests of the Emails page's query string: filters, dates as UTC day bounds, cursors
that must look like ids, errors in plain words, and links that keep the filters."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from postwire.dashboard.email_filters import is_email_id, parse_email_query
from postwire.store.email_search import EmailFilter

ID = "01a210eb-7910-7217-a3db-460306535475"
DAY_MS = 86_400_000
NOV_25_MS = 1_795_564_800_000  # 2026-11-25 00:00 UTC


def test_an_empty_query_filters_nothing() -> None:
    query = parse_email_query({})
    assert query.wanted == EmailFilter()
    assert (query.after, query.before, query.errors, query.filtered) == (None, None, [], False)
    assert query.link() == "/emails"


def test_every_filter_is_read() -> None:
    query = parse_email_query(
        {
            "q": " ann ",
            "status": "bounced",
            "since": "2026-11-25",
            "until": "2026-11-26",
            "from": "shop@",
            "to": "example.org",
            "subject": "Receipt",
            "tag": "category=receipt",
            "domain": "d-1",
            "key": "k-1",
            "after": ID,
        }
    )
    assert query.wanted == EmailFilter(
        status="bounced",
        domain_id="d-1",
        api_key_id="k-1",
        since_ms=NOV_25_MS,
        until_ms=NOV_25_MS + 2 * DAY_MS,  # the To date is included
        sender="shop@",
        to="example.org",
        subject="Receipt",
        tag="category=receipt",
        search="ann",
    )
    assert query.after == ID and query.errors == [] and query.filtered


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"status": "lost"}, "There is no status called 'lost'."),
        ({"since": "25/11/2026"}, "From date '25/11/2026' is not a date like 2026-11-25."),
        ({"until": "soon"}, "To date 'soon' is not a date like 2026-11-25."),
        ({"domain": "../x"}, "That domain does not exist."),
        ({"key": "a b"}, "That API key does not exist."),
    ],
)
def test_unusable_values_are_named_and_left_out(args: dict[str, str], error: str) -> None:
    query = parse_email_query(args)
    assert query.errors == [error]
    assert query.wanted == EmailFilter()


@pytest.mark.parametrize(
    ("cursor", "kept"),
    [(ID, True), (ID[:13], True), ("x" * 36, False), (ID + "/", False), ("", False)],
)
def test_cursors_are_ids_or_id_bounds(cursor: str, kept: bool) -> None:
    assert (parse_email_query({"before": cursor}).before == cursor) is kept


def test_links_keep_the_filters_and_add_a_cursor() -> None:
    query = parse_email_query({"status": "sent", "q": "a&b=c", "after": ID})
    link = urlsplit(query.link(before=ID))
    assert link.path == "/emails"
    assert parse_qs(link.query) == {"status": ["sent"], "q": ["a&b=c"], "before": [ID]}


def test_email_ids() -> None:
    assert is_email_id(ID)
    assert not is_email_id(ID[:13]) and not is_email_id(ID.upper()) and not is_email_id("x")
