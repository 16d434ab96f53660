"""The Emails page's query string: what it filters by, where it pages from, and the links
that keep the filters while paging. Pure functions of the query's text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Final
from urllib.parse import urlencode

from postwire.store.email_search import EmailFilter

# Every `last_event` an email can have, in the order an email lives them.
STATUSES: Final = (
    "scheduled",
    "queued",
    "sent",
    "delivered",
    "delivery_delayed",
    "opened",
    "clicked",
    "bounced",
    "complained",
    "suppressed",
    "canceled",
)
# The query's fields, as the filter form names them.
FIELDS: Final = ("q", "status", "since", "until", "from", "to", "subject", "tag", "domain", "key")
# A cursor is an email id or an id's time part (where a partial search stopped).
_CURSOR: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}(?:-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?")
_ID: Final = re.compile(r"[0-9A-Za-z-]{1,64}")
_MAX_TEXT: Final = 200


@dataclass(frozen=True, slots=True)
class EmailQuery:
    wanted: EmailFilter
    after: str | None = None
    before: str | None = None
    form: dict[str, str] = field(default_factory=dict)  # the filters as given, to show again
    errors: list[str] = field(default_factory=list)

    @property
    def filtered(self) -> bool:
        return any(self.form.values())

    def link(self, **cursor: str | None) -> str:
        """The Emails page with these filters and `after` or `before`."""
        params = {k: v for k, v in self.form.items() if v}
        params |= {k: v for k, v in cursor.items() if v is not None}
        return "/emails" + ("?" + urlencode(params) if params else "")


def is_email_id(text: str) -> bool:
    return _CURSOR.fullmatch(text) is not None and len(text) == 36


def parse_email_query(args: Mapping[str, str]) -> EmailQuery:
    """The filter, cursors and form values of the page's query string; a value that cannot
    be used is left out of the filter and named in `errors`, in plain words."""
    form = {name: args.get(name, "").strip()[:_MAX_TEXT] for name in FIELDS}
    errors: list[str] = []
    status = form["status"] or None
    if status is not None and status not in STATUSES:
        errors.append(f"There is no status called {status!r}.")
        status = None
    since = _day(form["since"], "From date", errors)
    until = _day(form["until"], "To date", errors)
    domain = _id(form["domain"], "domain", errors)
    key = _id(form["key"], "API key", errors)
    wanted = EmailFilter(
        status=status,
        domain_id=domain,
        api_key_id=key,
        since_ms=None if since is None else _ms(since),
        until_ms=None if until is None else _ms(until + timedelta(days=1)),
        sender=form["from"],
        to=form["to"],
        subject=form["subject"],
        tag=form["tag"],
        search=form["q"],
    )
    return EmailQuery(wanted, _cursor(args.get("after")), _cursor(args.get("before")), form, errors)


def _day(text: str, label: str, errors: list[str]) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        errors.append(f"{label} {text!r} is not a date like 2026-11-25.")
        return None


def _ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def _id(text: str, label: str, errors: list[str]) -> str | None:
    if not text:
        return None
    if _ID.fullmatch(text) is None:
        errors.append(f"That {label} does not exist.")
        return None
    return text


def _cursor(text: str | None) -> str | None:
    return text if text is not None and _CURSOR.fullmatch(text) else None
