"""The pure rules of broadcasts: what each status allows, who the walk skips, and the pace.

Statuses: `draft` (editable) -> `scheduled` (editable until due) or `queued` (sent now) ->
`sending` (the walk has begun) -> `sent` (every member done); `canceled` stops a queued or
sending broadcast for good. Canceling a scheduled one makes it a draft again, as Resend does.
"""

from __future__ import annotations

import html
import re
from typing import Final

# What may be done to a broadcast in which statuses: its content changes (or it goes) only
# while the walk has not begun.
ALLOWED: Final = {
    "update": ("draft", "scheduled"),
    "delete": ("draft", "scheduled"),
    "send": ("draft", "scheduled"),
    "cancel": ("scheduled", "queued", "sending"),
}
_PAST = {"update": "updated", "delete": "deleted", "send": "sent", "cancel": "canceled"}


def refusal(status: str, action: str) -> str | None:
    """Why `action` is refused to a broadcast in `status`, or None: it is allowed."""
    allowed = ALLOWED[action]
    if status in allowed:
        return None
    names = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
    return f"Only {names} broadcasts can be {_PAST[action]}; this broadcast is `{status}`."


def status_after_cancel(status: str) -> str:
    """A scheduled broadcast goes back to draft (nothing was sent); a queued or sending one
    is canceled: what was enqueued stays, nothing more is."""
    return "draft" if status == "scheduled" else "canceled"


def skip_reason(
    *, unsubscribed: bool, topic_subscription: str | None, suppressed: bool
) -> str | None:
    """Why the walk does not mail a member, or None: it does. Checked in this order, so each
    skipped member is counted once: its global opt-out, its choice about the broadcast's topic
    (`topic_subscription` None: the broadcast has no topic), the team's suppression list."""
    if unsubscribed:
        return "skipped_unsubscribed"
    if topic_subscription == "opt_out":
        return "skipped_topic"
    if suppressed:
        return "suppressed"
    return None


def topic_subscription(
    explicit: dict[str, str], topic_id: str, default_subscription: str | None
) -> str:
    """A contact's subscription to a topic: its own choice, else the topic's default. A topic
    deleted since the broadcast named it (`default_subscription` None) leaves contacts'
    explicit choices, which still count: only an opt-out skips."""
    return explicit.get(topic_id, default_subscription or "opt_in")


def next_page_at(previous_at: float, now: float, messages: int, rate: int) -> float:
    """When the walk may enqueue its next page, `messages` having just been enqueued at a pace
    of `rate` messages a second. Time not used (an idle walk) is not saved up for a burst."""
    return max(previous_at, now) + messages / rate


_BODY_START = re.compile(r"<body\b[^>]*>", re.IGNORECASE)
# Hidden in the message, shown by mail clients next to the subject in the inbox.
_PREVIEW_STYLE = (
    "display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;"
    "overflow:hidden;mso-hide:all"
)


def with_preview_text(html_body: str, preview_text: str | None) -> str:
    """The HTML with the preview text as a hidden first element of its body."""
    if not preview_text:
        return html_body
    hidden = f'<div style="{_PREVIEW_STYLE}">{html.escape(preview_text)}</div>'
    body = _BODY_START.search(html_body)
    if body is None:
        return hidden + html_body
    return html_body[: body.end()] + hidden + html_body[body.end() :]
