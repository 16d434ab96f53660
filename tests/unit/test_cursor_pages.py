"""Pages of a list held in memory, continued after the id of the last row shown."""

from __future__ import annotations

import pytest

from postwire.dashboard.pages.cursor_pages import page_after

ROWS = [f"r{n}" for n in range(7)]


def same(row: str) -> str:
    return row


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (None, (["r0", "r1", "r2"], "r2")),
        ("r2", (["r3", "r4", "r5"], "r5")),
        ("r3", (["r4", "r5", "r6"], None)),  # exactly the rest: no further page
        ("r5", (["r6"], None)),
        ("r6", ([], None)),
        ("gone", ([], None)),  # a row removed meanwhile: nothing rather than the top again
    ],
)
def test_pages_follow_the_cursor(after: str | None, expected: tuple[list[str], str | None]) -> None:
    assert page_after(ROWS, after, same, 3) == expected


def test_an_empty_list_has_one_empty_page() -> None:
    assert page_after([], None, same, 3) == ([], None)
