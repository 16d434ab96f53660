"""The docs give the reply Postwire gives when its spool is full."""

from __future__ import annotations

import itertools
from pathlib import Path

from postwire import errors
from postwire.smtp.submission_policy import INSUFFICIENT_STORAGE

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_full_spool_reply_is_documented_as_given() -> None:
    code, enhanced, _ = INSUFFICIENT_STORAGE
    reply = f"{code} {enhanced}"
    configuration = (DOCS / "configuration.md").read_text().splitlines()
    (map_size,) = [line for line in configuration if line.startswith("| `spool.map_size`")]
    assert reply in map_size
    assert reply in (DOCS / "smtp.md").read_text()
    assert errors.__doc__ is not None
    tree = errors.__doc__.splitlines()
    (at,) = [index for index, line in enumerate(tree) if "SpoolFullError" in line]
    # The entry and the lines that continue it (no class name of their own).
    entry = [tree[at], *itertools.takewhile(lambda line: "Error" not in line, tree[at + 1 :])]
    assert reply in " ".join(entry)
