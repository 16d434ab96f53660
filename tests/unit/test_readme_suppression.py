"""The README names exactly the failures that put an address on the suppression list."""

from __future__ import annotations

import re
from pathlib import Path

from postwire.delivery.bounces import classify_reply, should_suppress

README = Path(__file__).resolve().parents[2] / "README.md"


def suppression_paragraph() -> str:
    text = README.read_text()
    start = text.index("Only a permanent")
    return text[start : text.index("- SMTP:", start)]


def test_the_readme_lists_the_enhanced_codes_that_suppress() -> None:
    listed = set(re.findall(r"\b5\.\d\.\d+\b", suppression_paragraph()))
    suppressing = {
        f"5.{subject}.{detail}"
        for subject in range(8)
        for detail in range(20)
        if should_suppress(classify_reply(550, (5, subject, detail), "no"))
    }
    assert listed == suppressing


def test_the_readme_lists_the_bare_replies_that_suppress() -> None:
    paragraph = suppression_paragraph()
    listed = set(map(int, re.findall(r"\b5\d\d\b", paragraph)))
    suppressing = {
        code for code in range(500, 600) if should_suppress(classify_reply(code, None, "no"))
    }
    assert listed == suppressing
    # Nothing transient or permanent-but-not-hard suppresses.
    assert not should_suppress(classify_reply(552, (5, 2, 2), "mailbox full"))
    assert not should_suppress(classify_reply(550, (5, 7, 1), "policy"))
    assert not should_suppress(classify_reply(450, (4, 1, 1), "try later"))
