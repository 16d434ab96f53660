"""Content findings of one email: its parts, HTML, images, links and unsubscribe headers. Pure.

The HTML is read with the standard library's tokenizer in one linear pass (the sender writes
it: no input may make this quadratic). Links Postwire's click tracking rewrote are read back
to the link they stand for, so a tracked message is judged by what its author linked to.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Final
from urllib.parse import urlsplit

from postwire.insights.catalogue import Finding, finding

# Gmail clips a message whose HTML passes this, hiding the rest behind "View entire message".
GMAIL_CLIP_BYTES: Final = 102 * 1024
# Below this share of words in common (of all words of both), the parts say different things.
TEXT_MATCH_PERCENT: Final = 50
# Fewer words of text than this per image: the email is mostly pictures.
WORDS_PER_IMAGE: Final = 20
# How many examples a finding names.
EXAMPLES: Final = 3
SHORTENERS: Final = frozenset(
    {
        "bit.ly", "bitly.com", "tinyurl.com", "t.co", "goo.gl", "ow.ly", "is.gd", "buff.ly",
        "rebrand.ly", "cutt.ly", "shorturl.at", "tiny.cc", "t.ly", "rb.gy", "s.id", "v.gd",
        "bl.ink", "short.io", "lnkd.in", "soo.gd", "clck.ru", "qr.ae", "po.st", "adf.ly",
    }
)  # fmt: skip
# Second-level labels under which registries sell names (`example.co.uk`): the organizational
# domain then has three labels. An approximation of the public-suffix list, which Postwire
# does not keep.
_REGISTRY_LABELS: Final = frozenset({"co", "com", "net", "org", "ac", "gov", "edu", "ne", "or"})
CLICK_PATH: Final = "/t/c/"  # `webhooks.tracking.CLICK_PATH`: a tracked link's path
OPEN_PATH: Final = "/t/o/"
_TRACKING_IDS_BYTES: Final = 32
_TRACKING_TAG_BYTES: Final = 16
_HIDDEN: Final = frozenset({"script", "style", "head", "title", "template", "noscript"})
_WORD: Final = re.compile(r"[^\W_]{2,}")
ONE_CLICK: Final = "List-Unsubscribe=One-Click"


@dataclass(frozen=True, slots=True)
class ContentFacts:
    """What the content checks read of one email."""

    html: str | None
    text: str | None
    from_domain: str
    public_url: str  # `api.public_url`: its host serves tracking and unsubscribe links
    tracked: bool  # open or click tracking, or a broadcast's unsubscribe links, point there
    bulk: bool  # a broadcast (headers may mark others bulk)
    headers: Sequence[tuple[str, str]] | None  # None: not known (the message was gone)


class _HtmlScan(HTMLParser):
    """The links, images and visible words of an HTML body."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.images_without_alt: list[str] = []
        self.images = 0
        self.words: list[str] = []
        self._hidden_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in _HIDDEN:
            self._hidden_depth += 1
        elif tag in ("a", "area") and values.get("href"):
            self.links.append((values["href"] or "").strip())
        elif tag == "img":
            src = (values.get("src") or "").strip()
            if values.get("width") == "1" and values.get("height") == "1":
                return  # a tracking pixel, not content
            if OPEN_PATH in src:
                return
            self.images += 1
            if "alt" not in values:
                self.images_without_alt.append(src.rsplit("/", 1)[-1][:60] or "(no src)")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HIDDEN:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN and self._hidden_depth:
            self._hidden_depth -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth:
            self.words += _WORD.findall(data.lower())


def organizational_domain(host: str) -> str:
    """`www.news.example.co.uk` -> `example.co.uk`, approximately (see _REGISTRY_LABELS)."""
    if _ip(host) is not None:
        return host  # an address has no organization to shorten it to
    labels = host.lower().rstrip(".").split(".")
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _REGISTRY_LABELS:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def untracked_link(link: str, public_url: str) -> str:
    """The link a tracked click URL stands for (the token carries it), else `link`. The
    token's tag is not checked: this reads Postwire's own message, it does not trust it."""
    base = public_url.rstrip("/") + CLICK_PATH
    if not link.startswith(base):
        return link
    token = link[len(base) :]
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        return raw[_TRACKING_IDS_BYTES:-_TRACKING_TAG_BYTES].decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return link


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _unreachable(host: str) -> bool:
    """Loopback, private or link-local: recipients on the internet cannot reach it."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = _ip(host)
    return address is not None and not address.is_global


def _examples(items: Sequence[str]) -> str:
    unique = list(dict.fromkeys(items))
    shown = ", ".join(unique[:EXAMPLES])
    return shown + (f" and {len(unique) - EXAMPLES} more" if len(unique) > EXAMPLES else "")


def _parts_findings(facts: ContentFacts, scan: _HtmlScan) -> list[Finding]:
    if facts.html is None:
        return []
    if facts.text is None or not facts.text.strip():
        return [finding("text_part_missing")]
    html_words = set(scan.words)
    text_words = {w for w in _WORD.findall(_without_urls(facts.text.lower()))}
    both = html_words | text_words
    percent = 100 if not both else round(100 * len(html_words & text_words) / len(both))
    code = "text_part_matches" if percent >= TEXT_MATCH_PERCENT else "text_part_differs"
    return [finding(code, percent=percent)]


_URL: Final = re.compile(r"\S+://\S+")
_TEXT_URL: Final = re.compile(r"https?://[^\s<>\"']+", re.IGNORECASE)


def _without_urls(text: str) -> str:
    return _URL.sub(" ", text)


def _link_findings(facts: ContentFacts, links: list[str]) -> list[Finding]:
    found: list[Finding] = []
    web = [link for link in links if link.lower().startswith(("http://", "https://"))]
    plain = [link for link in web if link.lower().startswith("http://")]
    if plain:
        found.append(finding("http_link", count=len(plain), examples=_examples(plain)))
    hosts = [host for host in map(_host, web) if host]
    shortened = [host for host in hosts if host in SHORTENERS]
    if shortened:
        found.append(finding("shortener_link", domains=_examples(shortened)))
    own = {organizational_domain(facts.from_domain), organizational_domain(_host(facts.public_url))}
    foreign = [
        host for host in hosts if host not in SHORTENERS and organizational_domain(host) not in own
    ]
    if foreign:
        found.append(
            finding(
                "link_domain_unaligned",
                domains=_examples([organizational_domain(h) for h in foreign]),
                from_domain=facts.from_domain,
            )
        )
    return found


def _header(headers: Sequence[tuple[str, str]], name: str) -> list[str]:
    return [value for key, value in headers if key.lower() == name]


def unsubscribe_findings(facts: ContentFacts) -> list[Finding]:
    headers = facts.headers
    if headers is None:
        return []
    listed = _header(headers, "list-unsubscribe")
    precedence = {v.strip().lower() for v in _header(headers, "precedence")}
    bulk = (
        facts.bulk
        or bool(precedence & {"bulk", "list", "junk"})
        or bool(_header(headers, "list-id"))
    )
    if not listed:
        return [finding("list_unsubscribe_missing")] if bulk else []
    targets = re.findall(r"<([^>]*)>", " ".join(listed))
    https = [t for t in targets if t.lower().startswith("https://")]
    posts = [v.strip() for v in _header(headers, "list-unsubscribe-post")]
    if not https:
        plain = [t for t in targets if t.lower().startswith("http://")]
        problem = "its URL is http://, not https://" if plain else "it has no https URL"
    elif any(_unreachable(_host(t)) for t in https):
        problem = f"its URL points to {_host(https[0])}, which recipients cannot reach"
    elif ONE_CLICK not in posts:
        problem = "List-Unsubscribe-Post: List-Unsubscribe=One-Click is missing"
    else:
        return [finding("list_unsubscribe_ok")]
    return [finding("list_unsubscribe_broken", problem=problem)]


def _tracking_findings(facts: ContentFacts) -> list[Finding]:
    if not facts.tracked:
        return []
    host = _host(facts.public_url)
    if _unreachable(host):
        return [finding("tracking_unreachable", host=host)]
    if _ip(host) is not None:
        return [finding("tracking_on_ip", host=host)]
    return []


def content_findings(facts: ContentFacts) -> list[Finding]:
    """Every content finding of the email (none about the parts when it has no HTML)."""
    return body_findings(facts) + unsubscribe_findings(facts)


def body_findings(facts: ContentFacts) -> list[Finding]:
    """The findings about the parts, HTML, images, links and tracking (not the headers)."""
    scan = _HtmlScan()
    if facts.html is not None:
        scan.feed(facts.html)
        scan.close()
    # A text-only email's links are its URLs (with HTML, the text part repeats its links).
    if facts.html is not None:
        written = scan.links
    else:  # the sentence's punctuation after a URL is not part of it
        written = [url.rstrip(".,;:!?)]") for url in _TEXT_URL.findall(facts.text or "")]
    links = [untracked_link(link, facts.public_url) for link in written]
    found = _parts_findings(facts, scan)
    if facts.html is not None:
        size = len(facts.html.encode())
        if size > GMAIL_CLIP_BYTES:
            # One decimal: 102.4 KB shown as "102 KB" would not read as over Gmail's 102 KB.
            found.append(finding("html_clipped", size_kb=round(size / 1024, 1)))
    if scan.images_without_alt:
        found.append(
            finding(
                "image_missing_alt",
                count=len(scan.images_without_alt),
                examples=_examples(scan.images_without_alt),
            )
        )
    if scan.images and len(scan.words) < WORDS_PER_IMAGE * scan.images:
        found.append(finding("image_heavy", images=scan.images, words=len(scan.words)))
    found += _link_findings(facts, links)
    found += _tracking_findings(facts)
    return found
