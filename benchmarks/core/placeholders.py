"""Placeholder rendering: a template compiled once and rendered per recipient, against
substituting with `re.sub` on every message (parsing the template each time).

The html is a 10 KiB newsletter with five placeholders (a name with a fallback, a property,
the address, the unsubscribe link in an attribute, a missing property with a fallback), and
every message gets a different contact; both sides escape values for HTML and produce the
same text. A broadcast renders html, text and subject this way for each contact.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Mapping

from postwire.templates.placeholders import PLACEHOLDER, compile_placeholders, contact_values

_ROW = (
    '<tr><td style="padding:8px 16px;font-family:Arial,sans-serif;font-size:14px">Lorem ipsum '
    "dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt.</td></tr>\n"
)
HTML = (
    "<html><body><table><tr><td>Hi {{{contact.first_name|there}}},</td></tr>\n"
    + _ROW * 52
    + "<tr><td>Your plan: {{{contact.plan}}}. Sent to {{{EMAIL}}}. {{{contact.city|}}}</td></tr>"
    + '<tr><td><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></td></tr>'
    + "</table></body></html>\n"
)
CONTACTS = [
    contact_values(
        f"user{n}@example.org",
        f"Ann & Co {n}" if n % 3 else None,
        None,
        {"plan": "pro <annual>"},
        {"plan": "free"},
        f"https://mail.example.com/u/tok{n}?t=1&s=2",
    )
    for n in range(1000)
]


def render_compiled() -> Callable[[Mapping[str, str]], str]:
    compiled = compile_placeholders(HTML)
    return lambda values: compiled.render(values, escape_html=True)


def render_with_re_sub(values: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        value = values.get(match.group("name"))
        if value:
            return html.escape(value)
        fallback = match.group("fallback")
        return "" if fallback is None else fallback.strip()

    return PLACEHOLDER.sub(substitute, HTML)


def _time_slice(render: Callable[[Mapping[str, str]], str], seconds: float) -> tuple[int, float]:
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for values in CONTACTS:
            render(values)
        count += len(CONTACTS)
        now = time.perf_counter()
        if now >= deadline:
            return count, now - start


def run(seconds: float) -> dict[str, float]:
    """Renders per second of each way over about `seconds` in total, and the compiled way's
    cost per message in microseconds."""
    compiled = render_compiled()
    assert all(compiled(values) == render_with_re_sub(values) for values in CONTACTS)
    rounds = max(1, round(seconds / 0.5))
    totals = {"compiled": [0.0, 0.0], "re.sub": [0.0, 0.0]}
    for _ in range(rounds):
        for name, render in (("compiled", compiled), ("re.sub", render_with_re_sub)):
            count, elapsed = _time_slice(render, seconds / rounds / 2)
            totals[name][0] += count
            totals[name][1] += elapsed
    ours = totals["compiled"][0] / totals["compiled"][1]
    baseline = totals["re.sub"][0] / totals["re.sub"][1]
    return {
        "placeholders compiled renders/s": ours,
        "placeholders re.sub renders/s": baseline,
        "placeholders compiled us/render": 1e6 / ours,
    }
