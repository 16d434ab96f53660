"""The checklist a broadcast passes before it is sent from the dashboard.

The content checks are the block document's (`blocks.checks.content_checks`: unsubscribe link,
postal address, alt text, links, button labels, contrast); a broadcast without a document (its
HTML came through the REST API) has its HTML checked here for the first three that apply to
any HTML. The sending checks are the same for both: a subject, a from address on a verified
domain, a segment with members (read from its counter, never by scanning contacts). Any item
that fails blocks sending, and says why in words, except the one warning: HTML that Gmail
will clip.
"""

from __future__ import annotations

from collections.abc import Iterable
from html.parser import HTMLParser

from postwire.broadcasts.blocks.brand import BrandKit
from postwire.broadcasts.blocks.checks import Check, content_checks
from postwire.broadcasts.blocks.document import DocumentError, parse_document
from postwire.broadcasts.blocks.links import is_safe_link
from postwire.broadcasts.messages import parse_sender
from postwire.domains.store import find_verified_domain_for_sender_parked
from postwire.errors import ApiError
from postwire.insights.content import GMAIL_CLIP_BYTES
from postwire.store.broadcast_documents import get_document_parked
from postwire.store.broadcasts import BroadcastRecord
from postwire.store.segments import get_segment_parked, segment_member_count_parked
from postwire.store.spool import Spool
from postwire.templates.placeholders import PLACEHOLDER, UNSUBSCRIBE_URL_NAMES


async def send_checklist(spool: Spool, record: BroadcastRecord, brand: BrandKit) -> list[Check]:
    """Every item, passed or not, in the order the page lists them; its reads are parked
    rather than blocking on a table store on the network."""
    return [
        *await content_items(spool, record, brand),
        *size_items(record),
        *await sending_items(spool, record),
    ]


def blocking(checks: Iterable[Check]) -> list[Check]:
    return [check for check in checks if not check.passed and check.blocks_sending]


def size_items(record: BroadcastRecord) -> list[Check]:
    """A warning when Gmail will clip the HTML. Measured as saved: each contact's fields and
    tracked links make the sent HTML a little larger still."""
    if not record.html:
        return []
    size = len(record.html.encode())
    if size > GMAIL_CLIP_BYTES:
        return [
            Check(
                "html_size",
                False,
                f"The HTML is {size // 1024} KB: Gmail clips emails over "
                f"{GMAIL_CLIP_BYTES // 1024} KB and hides the rest, the unsubscribe link "
                "with it. Remove blocks or images to shorten it.",
                blocks_sending=False,
            )
        ]
    return [
        Check(
            "html_size",
            True,
            f"The HTML is {max(1, size // 1024)} KB, under Gmail's "
            f"{GMAIL_CLIP_BYTES // 1024} KB clip.",
        )
    ]


async def content_items(spool: Spool, record: BroadcastRecord, brand: BrandKit) -> list[Check]:
    saved = await get_document_parked(spool, record.team_id, record.id)
    if saved is not None:
        try:
            return content_checks(parse_document(saved.document), brand)
        except DocumentError as error:
            return [Check("document", False, f"The document cannot be read: {error}")]
    if not record.html and not record.text:
        return [Check("content", False, "Write the email's content in the editor first.")]
    return html_checks(record.html or "", has_text_only=not record.html)


def html_checks(html: str, *, has_text_only: bool = False) -> list[Check]:
    """The checks of HTML written elsewhere: the unsubscribe link, alt text, links."""
    if has_text_only:
        return []
    found = _HtmlFacts()
    found.feed(html)
    found.close()
    unsubscribe = any(
        match.group("name") in UNSUBSCRIBE_URL_NAMES for match in PLACEHOLDER.finditer(html)
    )
    checks = [
        Check("unsubscribe_link", True, "The email holds an unsubscribe link.")
        if unsubscribe
        else Check(
            "unsubscribe_link",
            False,
            "Add an unsubscribe link: a link to {{{RESEND_UNSUBSCRIBE_URL}}}.",
        )
    ]
    if found.images_without_alt:
        count = found.images_without_alt
        checks.append(
            Check(
                "image_alt",
                False,
                f"{count} image{' has' if count == 1 else 's have'} no alt text: describe "
                "each image for people who cannot see it.",
            )
        )
    else:
        checks.append(Check("image_alt", True, "Every image has alt text."))
    bad = [link for link in found.links if not _valid_link(link)]
    if bad:
        checks.append(
            Check(
                "links_valid",
                False,
                f"{len(bad)} link{' is' if len(bad) == 1 else 's are'} not a valid web or "
                f"mailto address, such as {bad[0] or '(empty)'}.",
            )
        )
    else:
        checks.append(Check("links_valid", True, "Every link is a valid web or mailto address."))
    return checks


async def sending_items(spool: Spool, record: BroadcastRecord) -> list[Check]:
    checks = [
        Check("subject", True, "The subject is set.")
        if record.subject.strip()
        else Check("subject", False, "Write a subject in the editor.")
    ]
    checks.append(await _sender_check(spool, record))
    checks.append(await _segment_check(spool, record))
    return checks


async def _sender_check(spool: Spool, record: BroadcastRecord) -> Check:
    if not record.sender.strip():
        return Check("from_domain", False, "Choose a from address in the editor.")
    try:
        address = parse_sender(record.sender)[1]
    except ApiError:
        return Check("from_domain", False, f"The from address {record.sender} is not valid.")
    domain = address.rpartition("@")[2].lower()
    if await find_verified_domain_for_sender_parked(spool, record.team_id, domain) is None:
        return Check(
            "from_domain",
            False,
            f"The domain {domain} is not verified: verify it on the Domains page first.",
        )
    return Check("from_domain", True, f"The from domain {domain} is verified.")


async def _segment_check(spool: Spool, record: BroadcastRecord) -> Check:
    segment = (
        await get_segment_parked(spool, record.team_id, record.segment_id)
        if record.segment_id
        else None
    )
    if segment is None:
        return Check("segment", False, "Choose the segment to send to.")
    members = await segment_member_count_parked(spool, record.team_id, segment.id)
    if members <= 0:
        return Check("segment", False, f"The segment {segment.name} has no contacts.")
    return Check(
        "segment",
        True,
        f"The segment {segment.name} has {members} contact{'' if members == 1 else 's'}.",
    )


def _valid_link(url: str) -> bool:
    url = url.strip()
    if PLACEHOLDER.fullmatch(url):  # the unsubscribe link, or a link a contact's field fills
        return True
    if url.startswith("#"):  # a place in the email itself
        return True
    return is_safe_link(url)


class _HtmlFacts(HTMLParser):
    """The links and the images without alt text of an HTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.images_without_alt = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "a" and "href" in values:
            self.links.append(values["href"] or "")
        elif tag == "img" and not (values.get("alt") or "").strip():
            self.images_without_alt += 1
