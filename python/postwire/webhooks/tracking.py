"""Open and click tracking: the signed tokens, the HTML rewriting that puts them in mail, and
the events recorded when a recipient's client fetches them.

A token is URL-safe base64 (no padding) of what it names, followed by a tag:

    open    team id (16 bytes) | email id (16 bytes)              | tag (16 bytes)
    click   team id (16 bytes) | email id (16 bytes) | link UTF-8 | tag (16 bytes)

The tag is HMAC-SHA256, cut to 128 bits, over the token's kind and its content, under a
32-byte secret kept in the spool's `meta` table: every process on the spool and every restart
reads the same one. Nothing is stored per token; the link to redirect to travels in the token,
and only a token this server signed is answered (no open redirect, no open event for a guessed
email id).

HTML is rewritten by scanning start tags the way an HTML tokenizer does (quoted attribute
values may hold `>`, the first `href` of a tag wins, a tag left open runs to the end of the
document), in one linear pass: the sender controls the HTML, so no input may make it quadratic.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from html.entities import html5 as _HTML5_ENTITIES
from typing import Any, Final, Literal
from urllib.parse import quote

import trio

from postwire._core import WriteBatch
from postwire.store.broadcasts import count_engagement
from postwire.store.deliveries import add_event
from postwire.store.emails import EMAILS, email_key, record_last_event
from postwire.store.metric_counters import count_first_engagement, counted_tags
from postwire.store.server_secrets import SECRET_BYTES, server_secret
from postwire.store.spool import Spool
from postwire.webhooks.payloads import iso_from_ms

log = logging.getLogger("postwire.tracking")

TAG_BYTES: Final = 16  # 128 bits: forging one is out of reach, and links stay short
# Links whose token would make a URL longer than servers and proxies reliably take stay as
# they are (the tracked URL is 4/3 of this plus the base).
MAX_TRACKED_LINK_BYTES: Final = 8 * 1024
OPEN_PATH: Final = "/t/o/"
CLICK_PATH: Final = "/t/c/"

Kind = Literal["o", "c"]

# --- tokens ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrackedEmail:
    """What an open token names."""

    team_id: str
    email_id: str


@dataclass(frozen=True, slots=True)
class TrackedLink:
    """What a click token names: the email and the exact link it replaced."""

    team_id: str
    email_id: str
    link: str


_TOKEN_TEXT = re.compile(r"[A-Za-z0-9_-]+")
_IDS_BYTES = 32


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class TokenSigner:
    """Signs and checks tracking tokens under one secret. Pure: no I/O."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < SECRET_BYTES:
            raise ValueError(f"the tracking secret must have at least {SECRET_BYTES} bytes")
        self._secret = secret

    def _tag(self, kind: Kind, content: bytes) -> bytes:
        return hmac.new(self._secret, kind.encode() + content, hashlib.sha256).digest()[:TAG_BYTES]

    def _sign(self, kind: Kind, content: bytes) -> str:
        return _b64(content + self._tag(kind, content))

    def _open(self, kind: Kind, token: str) -> bytes | None:
        """The content of a token of `kind` this signer made, else None."""
        if not _TOKEN_TEXT.fullmatch(token) or len(token) % 4 == 1:
            return None
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        if _b64(raw) != token:  # other spellings of the same bytes (unused trailing bits)
            return None
        content, tag = raw[:-TAG_BYTES], raw[-TAG_BYTES:]
        if len(content) < _IDS_BYTES or not hmac.compare_digest(tag, self._tag(kind, content)):
            return None
        return content

    def open_token(self, team_id: str, email_id: str) -> str:
        return self._sign("o", _ids(team_id, email_id))

    def click_token(self, team_id: str, email_id: str, link: str) -> str:
        return self._sign("c", _ids(team_id, email_id) + link.encode())

    def read_open(self, token: str) -> TrackedEmail | None:
        content = self._open("o", token)
        if content is None or len(content) != _IDS_BYTES:
            return None
        return TrackedEmail(*_split_ids(content))

    def read_click(self, token: str) -> TrackedLink | None:
        content = self._open("c", token)
        if content is None:
            return None
        try:
            link = content[_IDS_BYTES:].decode()
        except UnicodeDecodeError:
            return None
        if not is_trackable_link(link):
            return None
        return TrackedLink(*_split_ids(content), link)


def _ids(team_id: str, email_id: str) -> bytes:
    """Postwire's ids are UUIDs: 16 bytes each rather than 36 characters."""
    return uuid.UUID(team_id).bytes + uuid.UUID(email_id).bytes


def _split_ids(content: bytes) -> tuple[str, str]:
    return str(uuid.UUID(bytes=content[:16])), str(uuid.UUID(bytes=content[16:32]))


# --- HTML ------------------------------------------------------------------------------------

_TRACKABLE = re.compile(r"https?://", re.IGNORECASE)
# HTML's whitespace is these five; `\s` would also take U+00A0, which is part of a name there.
_WS = r"[\t\n\f\r ]"
# An <a> start tag, or a comment to step over (its content is no markup). Outlook's conditional
# comments are markup to Outlook, so their content is scanned like the rest.
_A_TAG_OR_COMMENT = re.compile(
    r"<!--(?!\[if)(?:.*?-->|.*\Z)|<a(?=[\t\n\f\r />])", re.IGNORECASE | re.DOTALL
)
# One attribute at a time, as HTML's tokenizer reads them. Possessive quantifiers, and a quote
# left open takes the rest of the document (so does a browser, which then drops the tag): the
# scan cannot go back over the same text twice.
_ATTRIBUTE = re.compile(
    rf"""(?:{_WS}|/)*+(?P<name>[^\t\n\f\r />][^\t\n\f\r />=]*+)
    (?:{_WS}*+={_WS}*+(?:"(?P<dq>[^"]*+)"?|'(?P<sq>[^']*+)'?|(?P<uq>[^\t\n\f\r >]++)))?""",
    re.VERBOSE,
)
_TAG_END = re.compile(rf"(?:{_WS}|/)*+>")
_CHARACTER_REFERENCE = re.compile(r"&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]*+;?)")
_URL_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")
_C0_OR_SPACE = "".join(map(chr, range(0x21)))


def is_trackable_link(link: str) -> bool:
    return _TRACKABLE.match(link) is not None


def attribute_value_text(value: str) -> str:
    """The text of an attribute value as a browser reads it: character references decoded, but
    a named one without `;` followed by `=` (or one that is no entity name) left as written, so
    `?a=1&para=2` keeps its `&para` (plain `html.unescape` would make it `¶`)."""
    if "&" not in value:
        return value

    def decode(match: re.Match[str]) -> str:
        reference = match[0]
        if reference[1] == "#":
            return html.unescape(reference)
        name = reference[1:]
        if name not in _HTML5_ENTITIES:  # `&ampx;` too: a browser takes no prefix of a name here
            return reference
        if not name.endswith(";") and value.startswith("=", match.end()):
            return reference
        return _HTML5_ENTITIES[name]

    return _CHARACTER_REFERENCE.sub(decode, value)


def link_of_href(value: str) -> str:
    """The URL a browser follows for an `href` value (already decoded): tabs and newlines
    dropped, leading and trailing controls and spaces stripped (WHATWG URL parsing)."""
    return _URL_TAB_OR_NEWLINE.sub("", value).strip(_C0_OR_SPACE)


def rewrite_links(document: str, tracked_url: Callable[[str], str | None]) -> str:
    """`document` with the `href` of every <a> tag that links to an http(s) URL replaced by
    `tracked_url(link)` (left alone where that is None). Other links (mailto:, #anchors,
    relative ones) and everything else stay byte for byte."""
    parts: list[str] = []
    copied = 0  # document[:copied] is in parts
    position = 0
    while (found := _A_TAG_OR_COMMENT.search(document, position)) is not None:
        position = found.end()
        if found[0].startswith("<!"):
            continue
        href: re.Match[str] | None = None
        while (end := _TAG_END.match(document, position)) is None:
            attribute = _ATTRIBUTE.match(document, position)
            if attribute is None:
                return "".join(parts) + document[copied:]  # the document ends inside the tag
            if href is None and attribute["name"].lower() == "href":
                href = attribute
            position = attribute.end()
        position = end.end()
        if href is None:
            continue
        group = next((g for g in ("dq", "sq", "uq") if href[g] is not None), None)
        if group is None:
            continue
        link = link_of_href(attribute_value_text(href[group]))
        if not is_trackable_link(link):
            continue
        replacement = tracked_url(link)
        if replacement is None:
            continue
        quotes = 0 if group == "uq" else 1
        start, stop = href.start(group) - quotes, href.end(group) + quotes
        parts += [document[copied:start], '"', html.escape(replacement), '"']
        copied = stop
    return "".join(parts) + document[copied:]


def open_pixel(url: str) -> str:
    return (
        f'<img src="{html.escape(url)}" width="1" height="1" alt="" '
        'style="display:block;width:1px;height:1px;border:0;margin:0;padding:0" />'
    )


def add_open_pixel(document: str, url: str) -> str:
    """`document` with a 1x1 image of `url` just before its last `</body>`, else at its end."""
    cut = document.lower().rfind("</body")
    if cut < 0:
        return document + open_pixel(url)
    return document[:cut] + open_pixel(url) + document[cut:]


@dataclass(frozen=True, slots=True)
class EmailTracking:
    """What to track in one email, and how to sign its URLs."""

    signer: TokenSigner
    base_url: str  # `api.public_url`, no trailing slash
    team_id: str
    email_id: str
    opens: bool
    clicks: bool

    def pixel_url(self) -> str:
        return self.base_url + OPEN_PATH + self.signer.open_token(self.team_id, self.email_id)

    def click_url(self, link: str) -> str | None:
        if len(link.encode()) > MAX_TRACKED_LINK_BYTES:
            return None
        token = self.signer.click_token(self.team_id, self.email_id, link)
        return self.base_url + CLICK_PATH + token

    def apply(self, document: str) -> str:
        if self.clicks:
            document = rewrite_links(document, self.click_url)
        if self.opens:
            document = add_open_pixel(document, self.pixel_url())
        return document


def redirect_location(link: str) -> str:
    """`link` as a Location header: anything but printable ASCII percent-encoded (UTF-8), as a
    browser does before following it."""
    if link.isascii() and link.isprintable() and " " not in link:
        return link
    return "".join(char if "!" <= char <= "~" else quote(char, safe="") for char in link)


# --- the server's side -------------------------------------------------------------------------


SECRET_KEY: Final = "tracking_secret"


async def tracking_secret(spool: Spool) -> bytes:
    """The spool's tracking secret, made on first use."""
    return await server_secret(spool, SECRET_KEY)


class Tracking:
    """Tracking as one server does it: its public URL and the spool's secret (read once)."""

    def __init__(self, spool: Spool, public_url: str) -> None:
        self.spool = spool
        self.public_url = public_url.rstrip("/")
        self._signer: TokenSigner | None = None
        self._loading = trio.Lock()

    async def signer(self) -> TokenSigner:
        if self._signer is None:
            async with self._loading:
                if self._signer is None:
                    self._signer = TokenSigner(await tracking_secret(self.spool))
        return self._signer

    async def for_email(
        self, team_id: str, email_id: str, *, opens: bool, clicks: bool
    ) -> EmailTracking | None:
        """How to track an email of a domain with these settings; None when neither is on."""
        if not (opens or clicks):
            return None
        signer = await self.signer()
        return EmailTracking(signer, self.public_url, team_id, email_id, opens, clicks)


async def record_open(spool: Spool, opened: TrackedEmail, now: datetime) -> None:
    """An `email.opened` event, and `last_event` "opened" unless a bounce or complaint stands."""
    await _record(spool, opened.team_id, opened.email_id, "opened", now)


async def record_click(
    spool: Spool, clicked: TrackedLink, now: datetime, *, ip_address: str, user_agent: str
) -> None:
    """An `email.clicked` event with the contract's `click` data, and `last_event` "clicked"."""
    click = {
        "ipAddress": ip_address,
        "link": clicked.link,
        "timestamp": iso_from_ms(_millis(now)),
        "userAgent": user_agent,
    }
    await _record(
        spool, clicked.team_id, clicked.email_id, "clicked", now, link=clicked.link, click=click
    )


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


async def _record(
    spool: Spool,
    team_id: str,
    email_id: str,
    what: str,
    now: datetime,
    *,
    link: str | None = None,
    **data: Any,
) -> None:
    key = email_key(team_id, email_id)
    # Under the record's lock, as the delivery engine and inbound reports change it.
    async for attempt in spool.guarded(key):
        with attempt:
            record = EMAILS.get(spool, key)
            if record is None:
                log.info("%s of an email that is no longer kept: %s", what, email_id)
                return
            batch = WriteBatch()
            now_ms = _millis(now)
            # The broadcast's own counts of engagement are `count_engagement`'s (recipients, not
            # events); add_event counts the event in the metrics' per-broadcast counts only.
            broadcast_id, tags = record.broadcast_id, counted_tags(spool, team_id, record.tags)
            add_event(
                batch, team_id, email_id, f"email.{what}", now_ms,
                broadcast_id=broadcast_id, domain_id=record.domain_id, counted_tags=tags, **data,
            )  # fmt: skip
            count_first_engagement(
                batch, spool, team_id, record.domain_id, email_id, what, now_ms,
                broadcast_id=broadcast_id, tags=tags,
            )  # fmt: skip
            if record.broadcast_id is not None and record.to:
                count_engagement(
                    batch, spool, team_id, record.broadcast_id, email_id, record.to[0], what, link
                )
            record_last_event(batch, record, what)
            await spool.commit(batch)
