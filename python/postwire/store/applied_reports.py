"""Which reports (bounces, delays, complaints) have been applied, so that each is applied once.

A report is applied once per email, recipient and status: the key names all three, and its row
commits in the same batch as the events it caused. A mail server that sends the same DSN twenty
times, or a flood of copies, raises one event.

    <team_id>/<email_id>/<recipient, lower case>/<status>    AppliedReport

`status` is the event and what distinguishes one report of it from another:
`bounced:5.1.1`, `delivery_delayed:4.4.1`, `complained:abuse`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table


@dataclass(frozen=True, slots=True)
class AppliedReport:
    applied_at_ms: int


APPLIED_REPORTS: Final = Table("applied_reports", AppliedReport)


def applied_report_key(team_id: str, email_id: str, recipient: str, status: str) -> str:
    return f"{team_id}/{email_id}/{recipient.lower()}/{status}"


def was_applied(spool: Spool, key: str) -> bool:
    return APPLIED_REPORTS.get(spool, key) is not None


def mark_applied(batch: WriteBatch, key: str, now_ms: int) -> None:
    APPLIED_REPORTS.put(batch, key, AppliedReport(now_ms))
