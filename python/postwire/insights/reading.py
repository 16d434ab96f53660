"""An email's insights as the API and the dashboard show them: stored findings made into
text by the catalogue, with its sending identity's latest authentication check, ordered by
area and worst first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from postwire.insights.catalogue import AREAS, CATALOGUE, SEVERITY_ORDER, Finding, area_of
from postwire.insights.model import Insight, Severity
from postwire.store.email_insights import (
    AUTH_CHECKS,
    EMAIL_INSIGHTS,
    AuthCheck,
    StoredInsights,
    get_auth_check,
    get_stored_insights,
    insights_key,
)
from postwire.store.spool import Spool


class InsightJson(TypedDict):
    """An insight as the API shows it (`api.models.InsightObject`)."""

    code: str
    severity: Severity
    message: str
    fix: str


_AREA_ORDER = {area: index for index, area in enumerate(AREAS)}


@dataclass(frozen=True, slots=True)
class EmailInsights:
    insights: list[Insight]  # by area (authentication first), worst first within each
    computed_at_ms: int
    auth_checked_at_ms: int | None  # when DNS was last asked about the sending identity


def stored_finding(item: Finding | Insight) -> dict[str, Any]:
    """How a finding is kept: its code and values, or an rspamd insight whole."""
    if isinstance(item, Finding):
        return {"code": item.code, "values": item.values}
    return {"code": item.code, "severity": item.severity, "message": item.message, "fix": item.fix}


def _insights(stored: Iterable[dict[str, Any]]) -> list[Insight]:
    insights = []
    for item in stored:
        code = str(item.get("code"))
        if "values" in item:
            if code in CATALOGUE:  # a code a later version retired is left out
                insights.append(Finding(code, item["values"]).insight())
        elif item.get("severity") in SEVERITY_ORDER:
            insights.append(Insight(code, item["severity"], item["message"], item.get("fix", "")))
    return insights


def ordered(insights: Sequence[Insight]) -> list[Insight]:
    return sorted(
        insights, key=lambda i: (_AREA_ORDER[area_of(i.code)], SEVERITY_ORDER[i.severity])
    )


def read_email_insights(spool: Spool, team_id: str, email_id: str) -> EmailInsights | None:
    """The email's insights; None while they have not been computed (or never will be:
    insights were off when it was sent)."""
    stored = get_stored_insights(spool, team_id, email_id)
    if stored is None:
        return None
    check = None if stored.auth_key is None else get_auth_check(spool, stored.auth_key)
    return _email_insights(stored, check)


async def read_email_insights_parked(
    spool: Spool, team_id: str, email_id: str
) -> EmailInsights | None:
    """`read_email_insights` with parked reads."""
    stored = await EMAIL_INSIGHTS.aget(spool, insights_key(team_id, email_id))
    if stored is None:
        return None
    check = None if stored.auth_key is None else await AUTH_CHECKS.aget(spool, stored.auth_key)
    return _email_insights(stored, check)


def _email_insights(stored: StoredInsights, check: AuthCheck | None) -> EmailInsights:
    authentication = stored.authentication
    checked_at = stored.auth_checked_at_ms
    if check is not None:  # the identity's latest check: never older than the email's
        authentication, checked_at = check.findings, check.checked_at_ms
    insights = ordered(_insights([*authentication, *stored.findings]))
    return EmailInsights(insights, stored.computed_at_ms, checked_at)


def insights_json(insights: Sequence[Insight]) -> list[InsightJson]:
    return [
        {"code": i.code, "severity": i.severity, "message": i.message, "fix": i.fix}
        for i in insights
    ]


def by_area(insights: Sequence[Insight]) -> list[tuple[str, list[Insight]]]:
    """(heading, insights) of each area that has any, in the areas' order."""
    groups: dict[str, list[Insight]] = {}
    for insight in ordered(insights):
        groups.setdefault(AREAS[area_of(insight.code)], []).append(insight)
    return list(groups.items())
