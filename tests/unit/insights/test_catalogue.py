"""The catalogue is the single source of the insights' wording: every code renders with the
values its checks give, and docs/insights.md lists every code with its severity."""

from __future__ import annotations

import string
from pathlib import Path

from postwire.insights.catalogue import CATALOGUE, Finding, finding
from postwire.insights.rspamd import RSPAMD_CODES

DOCS = Path(__file__).parents[3] / "docs" / "insights.md"


def test_every_code_renders_from_its_values() -> None:
    for code, entry in CATALOGUE.items():
        names = {
            name
            for text in (entry.message, entry.fix)
            for _, name, _, _ in string.Formatter().parse(text)
            if name
        }
        insight = finding(code, **{name: f"<{name}>" for name in names}).insight()
        assert insight.severity == entry.severity and insight.message.endswith(".")
        # Nothing to do about a check that passed; always something about a problem.
        if entry.severity == "ok":
            assert not insight.fix, code
        elif entry.severity in ("error", "warning"):
            assert insight.fix, code
        assert "{" not in insight.message + insight.fix


def test_a_stored_finding_renders_as_it_was_found() -> None:
    found = finding("role_address", address="info@example.com", role="info")
    assert Finding(found.code, dict(found.values)).insight() == found.insight()


def test_the_docs_list_every_code_with_its_severity() -> None:
    docs = DOCS.read_text()
    for code, entry in CATALOGUE.items():
        assert f"| `{code}` | {entry.severity} |" in docs, code
    for code in RSPAMD_CODES:
        assert f"`{code}`" in docs, code
