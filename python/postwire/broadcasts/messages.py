"""A broadcast's content, compiled once per run of its walk and made into each member's send
request: the subject, HTML and text personalized with the member's values, and the member's
own `List-Unsubscribe` header fields."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from postwire.broadcasts.rules import with_preview_text
from postwire.compose.addresses import Mailbox, parse_mailbox
from postwire.compose.html_text import html_to_text
from postwire.compose.request import SendRequest
from postwire.errors import validation_error
from postwire.store.broadcasts import BroadcastRecord
from postwire.templates.placeholders import Compiled, compile_placeholders

# What a personalized subject may not hold: a value with a line break would end the header.
_LINE_BREAKS = str.maketrans({"\r": " ", "\n": " "})


@dataclass(frozen=True, slots=True)
class BroadcastContent:
    """What every message of one broadcast shares, placeholders parsed."""

    broadcast_id: str
    sender: Mailbox
    from_as_sent: str
    reply_to: tuple[Mailbox, ...]
    reply_to_as_sent: tuple[str, ...]
    subject: Compiled
    html: Compiled | None
    text: Compiled | None

    @property
    def sender_domain(self) -> str:
        return self.sender[1].rpartition("@")[2].lower()

    def request_for(
        self,
        address: str,
        values: Mapping[str, str],
        headers: Sequence[tuple[str, str]],
    ) -> SendRequest:
        """The send request of one member at `address`, personalized with `values`."""
        subject = self.subject.render(values, escape_html=False).translate(_LINE_BREAKS)
        html = None if self.html is None else self.html.render(values, escape_html=True)
        text = None if self.text is None else self.text.render(values, escape_html=False)
        return SendRequest(
            sender=self.sender,
            to=((None, address),),
            cc=(),
            bcc=(),
            reply_to=self.reply_to,
            from_as_sent=self.from_as_sent,
            to_as_sent=(address,),
            cc_as_sent=(),
            bcc_as_sent=(),
            reply_to_as_sent=self.reply_to_as_sent,
            subject=subject,
            html=html or None,
            text=text or None,
            headers=tuple(headers),
            tags=(),
            attachments=(),
            scheduled_at=None,
            size=0,
            broadcast_id=self.broadcast_id,
        )


def parse_sender(value: str) -> Mailbox:
    mailbox = parse_mailbox(value)
    if mailbox is None:
        raise validation_error(
            "Invalid `from` field. The email address needs to follow the `email@example.com` "
            "or `Name <email@example.com>` format."
        )
    return mailbox


def compile_broadcast(record: BroadcastRecord) -> BroadcastContent:
    """The record's content, ready for every member. Text, when the broadcast has none, is
    made from its HTML (placeholders survive the conversion and are filled in after)."""
    reply_to = tuple(parse_sender(value) for value in record.reply_to)
    html = None if record.html is None else with_preview_text(record.html, record.preview_text)
    text = record.text
    if text is None and record.html:
        text = html_to_text(record.html) or None
    return BroadcastContent(
        broadcast_id=record.id,
        sender=parse_sender(record.sender),
        from_as_sent=record.sender,
        reply_to=reply_to,
        reply_to_as_sent=tuple(record.reply_to),
        subject=compile_placeholders(record.subject),
        html=None if html is None else compile_placeholders(html),
        text=None if text is None else compile_placeholders(text),
    )
