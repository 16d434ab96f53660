"""Telling a CSV file's separator and encoding from its first bytes, and reading its rows in
them: what Excel writes in Europe (`;`, Windows-1252), tab-separated exports, UTF-8 with and
without a byte order mark, and the files detection cannot be sure of."""

from __future__ import annotations

import pytest

from postwire.audiences.csv_format import (
    UTF8,
    WINDOWS_1252,
    CsvFormat,
    detect_format,
    parse_format,
)
from postwire.audiences.csv_rows import read_header, read_records

GERMAN_EXCEL = (
    "E-Mail;Vorname;Betrag\r\njörg@example.de;Jörg;3,50\r\nanna@example.de;Änne;12,00\r\n"
)


def test_excel_in_europe_semicolons_and_windows_1252() -> None:
    data = GERMAN_EXCEL.encode("cp1252")
    detected = detect_format(data, at_eof=True)
    assert detected.format == CsvFormat(";", WINDOWS_1252)
    assert detected.separator_sure
    # Not UTF-8 is certain; which 8-bit encoding it is, only likely: the page asks.
    assert not detected.encoding_sure and not detected.sure
    header = read_header(data, at_eof=True, fmt=detected.format)
    assert header is not None and header.cells == ["E-Mail", "Vorname", "Betrag"]
    rows = read_records(data[header.end :], header.end, 2, at_eof=True, fmt=detected.format)
    assert [row.cells for row in rows] == [
        ["jörg@example.de", "Jörg", "3,50"],
        ["anna@example.de", "Änne", "12,00"],
    ]
    assert all(row.problem is None for row in rows)


def test_the_same_file_in_utf8_with_a_byte_order_mark() -> None:
    data = b"\xef\xbb\xbf" + GERMAN_EXCEL.encode()
    detected = detect_format(data, at_eof=True)
    assert detected.format == CsvFormat(";", UTF8) and detected.sure
    header = read_header(data, at_eof=True, fmt=detected.format)
    assert header is not None and header.cells[0] == "E-Mail"


def test_tabs() -> None:
    data = b"email\tfirst_name\tnote\nada@example.org\tAda\tlikes, commas; and semicolons\n"
    detected = detect_format(data, at_eof=True)
    assert detected.format == CsvFormat("\t", UTF8) and detected.sure


def test_commas_with_quoted_separators_inside() -> None:
    data = b'email,name,note\nada@example.org,"Lovelace; Ada","a\tb"\nbo@example.org,Bo,\n'
    detected = detect_format(data, at_eof=True)
    assert detected.format == CsvFormat(",", UTF8) and detected.sure


def test_one_column_is_read_alike_by_every_separator() -> None:
    detected = detect_format(b"email\nada@example.org\nbo@example.org\n", at_eof=True)
    assert detected.format == CsvFormat(",", UTF8) and detected.sure


def test_two_separators_that_both_fit_make_it_unsure() -> None:
    # Two columns by commas, two by semicolons, on every line: a person must say.
    data = b"email,tag;name\nada@example.org,a;Ada\nbo@example.org,b;Bo\n"
    detected = detect_format(data, at_eof=True)
    assert not detected.separator_sure
    assert detected.format.separator in (",", ";")


def test_rows_of_uneven_length_make_it_unsure() -> None:
    data = b"email;name\nada@example.org;Ada;extra\nbo@example.org\n"
    detected = detect_format(data, at_eof=True)
    assert detected.format.separator == ";" and not detected.separator_sure


def test_a_character_cut_at_the_end_of_the_first_bytes_is_still_utf8() -> None:
    data = ("email,name\n" + "ada@example.org,Zoë\n" * 10).encode()
    head = data[: data.index("ë".encode()) + 1]  # half of the ë
    assert detect_format(head, at_eof=False).format.encoding == UTF8
    assert detect_format(head, at_eof=True).format.encoding == WINDOWS_1252


def test_a_row_not_in_the_chosen_encoding_is_refused_on_its_own() -> None:
    data = "email,name\nada@example.org,Zoë\n".encode() + b"bo@example.org,B\x81o\n"
    fmt = CsvFormat(",", WINDOWS_1252)  # 0x81 is not a Windows-1252 character
    rows = read_records(data, 0, 1, at_eof=True, fmt=fmt)
    assert [row.problem for row in rows] == [None, None, "the row is not Windows-1252 text"]


@pytest.mark.parametrize(
    ("separator", "encoding", "expected"),
    [
        (";", "windows-1252", CsvFormat(";", WINDOWS_1252)),
        ("tab", "utf-8", CsvFormat("\t", UTF8)),
        ("\t", "utf-8", CsvFormat("\t", UTF8)),
        ("|", "utf-8", None),
        (",", "latin-9", None),
        (None, "utf-8", None),
    ],
)
def test_a_chosen_format(separator: object, encoding: object, expected: CsvFormat | None) -> None:
    assert parse_format(separator, encoding) == expected
