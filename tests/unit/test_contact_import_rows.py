"""The pure rules of CSV imports: records and their offsets, the column map, a row's contact."""

from __future__ import annotations

from typing import Any

import pytest

from postwire.audiences.csv_rows import (
    ContactRow,
    column_indexes,
    contact_row,
    parse_column_map,
    parse_number,
    read_header,
    read_records,
    resolve_columns,
    target_named_like,
)
from postwire.errors import ApiError

FILE = (
    b"\xef\xbb\xbfEmail,First Name,plan\r\n"
    b"ann@example.org,Ann,3\r\n"
    b"\r\n"
    b",,\n"
    b'"bob@example.org","B\nob",x\n'
    b"cy@example.org,\xff,1"
)


def test_records_carry_the_offset_of_the_next_one() -> None:
    header = read_header(FILE, at_eof=True)
    assert header is not None
    assert (header.row, header.cells) == (1, ["Email", "First Name", "plan"])
    records = read_records(FILE[header.end :], header.end, 2, at_eof=True)
    assert [(r.row, r.cells, r.problem) for r in records] == [
        (2, ["ann@example.org", "Ann", "3"], None),
        (3, [], None),  # blank rows count as rows, as a spreadsheet shows them
        (4, [], None),
        (5, ["bob@example.org", "B\nob", "x"], None),  # a quoted cell spans two lines
        (6, ["cy@example.org", "\ufffd", "1"], "the row is not UTF-8 text"),
    ]
    assert records[-1].end == len(FILE)
    # Reading on from any record's end gives the rest, as a resumed import does.
    again = read_records(FILE[records[2].end :], records[2].end, 5, at_eof=True)
    assert again == records[3:]


def test_a_window_short_of_the_end_keeps_its_last_record_for_the_next() -> None:
    header = read_header(FILE, at_eof=True)
    assert header is not None
    cut = FILE.index(b"ob") + 2  # inside the quoted cell of row 5
    records = read_records(FILE[header.end : cut], header.end, 2, at_eof=False)
    assert [r.row for r in records] == [2, 3]  # row 4 might go on: read again next time
    assert read_records(b"no line end yet", 0, 2, at_eof=False) == []


def test_unreadable_rows_are_reported_and_reading_goes_on() -> None:
    records = read_records(b"a,b\rc,d\ne@x.org,f\n", 0, 2, at_eof=True)
    assert records[0].problem is not None and records[0].problem.startswith("the row is not CSV")
    assert records[1].cells == ["e@x.org", "f"]


def test_a_header_longer_than_what_came_is_not_read() -> None:
    assert read_header(b"email,first_name", at_eof=False) is None
    assert read_header(b"email,first_name", at_eof=True) is not None


MAP_CASES: list[tuple[str, Any, dict[str, tuple[str, str | None]] | None]] = [
    ("resend form", {"email": "E-mail", "properties": {"plan": {"column": "Plan"}}},
     {"email": ("E-mail", None), "properties.plan": ("Plan", None)}),
    ("property as a bare column", {"properties": {"age": " Age "}},
     {"properties.age": ("Age", None)}),
    ("typed property", {"properties": {"age": {"column": "Age", "type": "number"}}},
     {"properties.age": ("Age", "number")}),
    ("reverse form", {"E-mail": "email", "Plan": "properties.plan"},
     {"email": ("E-mail", None), "properties.plan": ("Plan", None)}),
    ("not an object", ["email"], None),
    ("unknown target", {"Email": "phone"}, None),
    ("empty column", {"email": ""}, None),
    ("bad type", {"properties": {"ok": {"column": "Ok", "type": "boolean"}}}, None),
    ("twice", {"email": "A", "B": "email"}, None),
]  # fmt: skip


@pytest.mark.parametrize(("label", "raw", "expected"), MAP_CASES, ids=[c[0] for c in MAP_CASES])
def test_column_maps(
    label: str, raw: Any, expected: dict[str, tuple[str, str | None]] | None
) -> None:
    if expected is None:
        with pytest.raises(ApiError) as refused:
            parse_column_map(raw)
        assert refused.value.status == 422
    else:
        assert parse_column_map(raw) == expected


PROPERTIES = {"plan": "string", "age": "number"}

RESOLVE_CASES: list[tuple[str, list[str], Any, dict[str, str] | str]] = [
    ("named like the fields", ["Email", "First Name", "last-name", "plan", "other"], {},
     {"email": "Email", "first_name": "First Name", "last_name": "last-name",
      "properties.plan": "plan"}),
    ("prefixed property", ["email", "properties.age"], {},
     {"email": "email", "properties.age": "properties.age"}),
    ("the map wins", ["email", "Mail"], {"email": "Mail"}, {"email": "Mail"}),
    ("map and names together", ["Mail", "first_name"], {"email": "Mail"},
     {"email": "Mail", "first_name": "first_name"}),
    ("no email column", ["first_name"], {}, "no `email` column"),
    ("mapped column missing", ["email"], {"first_name": "Given"}, "`Given`"),
    ("unknown property mapped", ["email", "x"], {"properties": {"tier": "x"}}, "`tier`"),
    ("unknown prefixed property", ["email", "properties.tier"], {}, "`tier`"),
    ("type mismatch", ["email", "Age"], {"properties": {"age": {"column": "Age",
     "type": "string"}}}, "holds a number"),
    ("ambiguous column", ["email", "email"], {}, "two columns"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("label", "header", "raw", "expected"), RESOLVE_CASES, ids=[c[0] for c in RESOLVE_CASES]
)
def test_columns_resolved_against_the_header(
    label: str, header: list[str], raw: Any, expected: dict[str, str] | str
) -> None:
    if isinstance(expected, str):
        with pytest.raises(ApiError) as refused:
            resolve_columns(header, parse_column_map(raw), PROPERTIES)
        assert expected in refused.value.message
    else:
        assert resolve_columns(header, parse_column_map(raw), PROPERTIES) == expected


INDEXES = {"email": 0, "first_name": 1, "unsubscribed": 2, "properties.plan": 3,
           "properties.age": 4}  # fmt: skip

ROW_CASES: list[tuple[list[str], ContactRow | str]] = [
    (["a@example.org", " Ann ", "yes", "pro", "42"],
     ContactRow("a@example.org", "Ann", None, True, {"plan": "pro", "age": 42})),
    (["a@example.org", "", "", "", "-1.5e2"],
     ContactRow("a@example.org", None, None, None, {"age": -150.0})),
    (["a@example.org"], ContactRow("a@example.org", None, None, None, {})),  # short row
    (["", "Ann"], "the row has no email address"),
    (["not-an-address"], "`not-an-address` is not an email address: it should look like name@"),
    (["a@localhost"], "`a@localhost` is not a valid address"),
    (["a@example.org", "", "maybe"], "`unsubscribed` must be true or false"),
    (["a@example.org", "", "", "", "forty"], "`age` is a number, not `forty`"),
    (["a@example.org", "A" * 257], "`first_name` is longer than 256 characters"),
    (["a@example.org", "", "", "p" * 2001], "`plan` is longer than 2000 characters"),
]  # fmt: skip


@pytest.mark.parametrize(("cells", "expected"), ROW_CASES)
def test_a_rows_contact(cells: list[str], expected: ContactRow | str) -> None:
    got = contact_row(cells, INDEXES, PROPERTIES)
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got, got
    else:
        assert got == expected


def test_a_property_deleted_since_the_upload_refuses_the_rows_that_set_it() -> None:
    assert contact_row(["a@example.org", "", "", "pro"], INDEXES, {"age": "number"}) == (
        "the contact property `plan` does not exist"
    )
    assert isinstance(contact_row(["a@example.org"], INDEXES, {}), ContactRow)


def test_column_indexes_follow_the_header() -> None:
    columns = {"email": "Mail", "first_name": "Name", "last_name": "Gone"}
    assert column_indexes(["Name", "Mail"], columns) == {"email": 1, "first_name": 0}


@pytest.mark.parametrize(
    ("text", "value"),
    [("42", 42), ("-7", -7), ("3.25", 3.25), (".5", 0.5), ("1e3", 1000.0), ("1_000", None),
     ("nan", None), ("inf", None), ("1e999", None), ("", None), ("0x10", None)],
)  # fmt: skip
def test_numbers(text: str, value: float | None) -> None:
    assert parse_number(text) == value


@pytest.mark.parametrize(
    ("column", "target"),
    [
        ("E-mail", "email"),
        ("Email Address", "email"),
        ("e-mail address", "email"),
        ("FirstName", "first_name"),
        ("Given name", "first_name"),
        ("Surname", "last_name"),
        ("Family Name", "last_name"),
    ],
)
def test_headers_of_common_exports_are_read_as_their_field(column: str, target: str) -> None:
    assert target_named_like(column, {}) == target
