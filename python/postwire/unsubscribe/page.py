"""The hosted unsubscribe page: server-rendered HTML (Jinja, escaped), one stylesheet of our own
whose name carries its content hash, and no script, under a CSP that allows nothing else.

Every action is a form POST: a GET never changes anything, since link scanners and mailbox
providers' previews follow GETs.
"""

from __future__ import annotations

import hashlib
from email.utils import parseaddr
from importlib import resources
from typing import Final

import jinja2

from postwire.unsubscribe.apply import Recipient
from postwire.unsubscribe.changes import Standing
from postwire.unsubscribe.links import URL_PATH

_STYLESHEET_SOURCE: Final = resources.files(__package__).joinpath("static/unsubscribe.css")
STYLESHEET: Final = _STYLESHEET_SOURCE.read_bytes()
STYLESHEET_NAME: Final = f"unsubscribe.{hashlib.sha256(STYLESHEET).hexdigest()[:16]}.css"
ASSETS_PATH: Final = f"{URL_PATH}assets/"
STYLESHEET_URL: Final = ASSETS_PATH + STYLESHEET_NAME

# Everything the page loads comes from Postwire itself; forms post back to it; nothing frames it.
PAGE_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # The token in the URL is the recipient's key to the page: no Referer carries it away.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_TEMPLATES: Final = jinja2.Environment(
    loader=jinja2.PackageLoader(__package__, "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def recipient_page(recipient: Recipient, token: str, notice: str | None = None) -> str:
    """The page of one recipient, reached by `token`: confirm (or subscribe again), and the
    topic preferences; `notice` says what the last action did."""
    subscribed = recipient.standing is Standing.SUBSCRIBED
    token_path = f"{URL_PATH}{token}"
    return _TEMPLATES.get_template("recipient.html").render(
        title="Unsubscribe" if subscribed else "You are unsubscribed",
        stylesheet=STYLESHEET_URL,
        email=recipient.contact.email,
        notice=notice,
        subscribed=subscribed,
        what=_what(recipient),
        action=token_path,
        topics_action=f"{token_path}/topics",
        choices=recipient.choices,
        unsubscribed_from_all=recipient.standing is Standing.UNSUBSCRIBED,
    )


def error_page(title: str, message: str) -> str:
    return _TEMPLATES.get_template("error.html").render(
        title=title, stylesheet=STYLESHEET_URL, message=message
    )


def _what(recipient: Recipient) -> str:
    """What the contact stops (or resumes) receiving, in words: the topic, and whose mail by
    the broadcast's From (its display name, else its address)."""
    name, address = parseaddr(recipient.sender or "")
    source = name or address
    if recipient.standing is not Standing.UNSUBSCRIBED and recipient.topic is not None:
        topic = f"“{recipient.topic.name}” emails"
        return f"{topic} from {source}" if source else topic
    return f"emails from {source}" if source else "emails like the one that brought you here"
