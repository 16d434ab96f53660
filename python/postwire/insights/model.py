"""What one insight is: a finding about an email, how much it matters, and what to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# "error": likely to hurt delivery or break a rule mailbox providers enforce; "warning": worth
# fixing; "info": context; "ok": a check that passed (shown so a person sees what was checked).
Severity = Literal["error", "warning", "info", "ok"]


@dataclass(frozen=True, slots=True)
class Insight:
    code: str  # stable, documented in docs/insights.md: "dmarc_missing", "shortener_link", ...
    severity: Severity
    message: str  # one line: what was found
    fix: str  # one line: what to do ("" for "ok")
