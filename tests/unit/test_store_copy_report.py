"""What `postwire store copy` prints after its check: the next steps only when every table
matches, the mismatched tables named otherwise, and never the URL's password."""

from __future__ import annotations

from pathlib import Path

from postwire.config import Config
from postwire.operator.store_copy import describe_copy
from postwire.store.table_copy import CopyReport, TableCheck, without_password

URL = "postgresql://postwire:***@db.example.net:5432/postwire"


def check(table: str, lmdb: tuple[int, str], postgresql: tuple[int, str]) -> TableCheck:
    return TableCheck(table, lmdb[0], postgresql[0], lmdb[1], postgresql[1])


def test_a_table_that_differs_fails_the_copy_and_names_it() -> None:
    report = CopyReport(
        URL,
        0,
        [
            check("teams", (1, "aa"), (1, "aa")),
            check("emails", (3, "bb"), (3, "cc")),  # same count, other bytes
            check("contacts", (2, "dd"), (1, "ee")),
        ],
    )
    assert report.mismatched == ["emails", "contacts"]
    text = describe_copy(report, Config(data_dir=Path("/srv/postwire")))
    assert "does NOT match the LMDB tables in: emails, contacts" in text
    assert 'backend = "postgresql"' not in text
    assert report.to_json()["matches"] is False


def test_every_table_matching_says_what_to_set_next() -> None:
    report = CopyReport(URL, 5, [check("teams", (1, "aa"), (1, "aa"))])
    text = describe_copy(report, Config(data_dir=Path("/srv/postwire")))
    assert "5 rows that the database held were deleted first" in text
    assert 'backend = "postgresql"' in text and f'url = "{URL}"' in text
    assert "POSTWIRE_STORE_BACKEND=postgresql" in text and "left as they were" in text


def test_the_password_is_never_printed() -> None:
    assert without_password("postgresql://u:s3cret@h:5432/d") == "postgresql://u:***@h:5432/d"
    assert without_password("postgresql://u@h/d") == "postgresql://u@h/d"
