"""Parsing of delivery status notifications (RFC 3464) and feedback reports (RFC 5965).

Pure functions over the stdlib `email` package. Every input is hostile: a field that does not
parse is dropped, and a message that is not a recognisable report gives None, never an
exception. Only the machine-readable parts are read; the human-readable text is ignored.
"""

from __future__ import annotations

import email
import email.parser
import email.policy
import re
from dataclasses import dataclass
from email.message import Message
from typing import Final

from postwire.delivery.resolver import EnhancedStatus

_STATUS: Final = re.compile(r"([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])")
# A bare mailbox: no spaces, brackets, quotes or controls, which keeps it safe to store and show.
_ADDRESS: Final = re.compile(r"[^\s<>\"(),;:\\@]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251})")
_MESSAGE_ID: Final = re.compile(r"<[^\s<>]{1,996}>")
_ACTIONS: Final = frozenset({"failed", "delayed", "delivered", "relayed", "expanded"})
_MAX_FIELD: Final = 2000  # longer values (diagnostics, user agents) are cut, not rejected


@dataclass(frozen=True, slots=True)
class RecipientStatus:
    """One per-recipient block of a DSN's message/delivery-status part."""

    action: str  # failed | delayed | delivered | relayed | expanded
    final_recipient: str | None
    original_recipient: str | None
    status: EnhancedStatus | None
    diagnostic_code: str | None  # as written, on one line: "smtp; 550 5.1.1 user unknown"
    remote_mta: str | None


@dataclass(frozen=True, slots=True)
class DeliveryStatusReport:
    """An RFC 3464 DSN."""

    reporting_mta: str | None
    recipients: tuple[RecipientStatus, ...]
    # From the returned message or its headers, when the DSN includes them.
    original_return_path: str | None
    original_message_id: str | None


@dataclass(frozen=True, slots=True)
class FeedbackReport:
    """An RFC 5965 ARF report: a recipient (or their provider) reported our message."""

    feedback_type: str  # abuse | fraud | virus | other | not-spam | ...
    user_agent: str | None
    original_mail_from: str | None  # the reported message's envelope sender
    original_rcpt_to: tuple[str, ...]
    # From the reported message or its headers.
    original_return_path: str | None
    original_message_id: str | None


Report = DeliveryStatusReport | FeedbackReport


def parse_report(message: bytes) -> Report | None:
    """The DSN or ARF report in `message`, or None if it is neither or is malformed."""
    try:
        root = email.message_from_bytes(message, policy=email.policy.compat32)
        if root.get_content_type() != "multipart/report" or not root.is_multipart():
            return None
        payload = root.get_payload()
        if not isinstance(payload, list):
            return None
        parts = [part for part in payload if isinstance(part, Message)]
        # By the machine-readable part rather than the report-type parameter, which some
        # senders leave out.
        if _first_part(parts, "message/feedback-report") is not None:
            return _parse_arf(parts)
        return _parse_dsn(parts)
    # The stdlib parser is lenient but not total: odd charsets, encodings and nesting can
    # still raise deep inside it, and a hostile message must not take the listener down.
    except Exception:
        return None


def _parse_dsn(parts: list[Message]) -> DeliveryStatusReport | None:
    status_part = _first_part(parts, "message/delivery-status")
    if status_part is None:
        return None
    blocks = _field_blocks(status_part)
    if len(blocks) < 2:  # the per-message block and at least one recipient
        return None
    recipients = tuple(r for r in map(_recipient_status, blocks[1:]) if r is not None)
    if not recipients:
        return None
    return_path, message_id = _original_headers(parts)
    return DeliveryStatusReport(
        reporting_mta=_typed_value(blocks[0].get("Reporting-MTA")),
        recipients=recipients,
        original_return_path=return_path,
        original_message_id=message_id,
    )


def _parse_arf(parts: list[Message]) -> FeedbackReport | None:
    report_part = _first_part(parts, "message/feedback-report")
    if report_part is None:
        return None
    blocks = _field_blocks(report_part)
    if not blocks:
        return None
    fields = blocks[0]
    feedback_type = _one_line(fields.get("Feedback-Type"))
    if feedback_type is None or not re.fullmatch(r"[A-Za-z0-9-]{1,64}", feedback_type):
        return None
    rcpt_to = tuple(
        address
        for value in fields.get_all("Original-Rcpt-To") or []
        if (address := _address(value)) is not None
    )
    return_path, message_id = _original_headers(parts)
    return FeedbackReport(
        feedback_type=feedback_type.lower(),
        user_agent=_one_line(fields.get("User-Agent")),
        original_mail_from=_address(fields.get("Original-Mail-From")),
        original_rcpt_to=rcpt_to,
        original_return_path=return_path,
        original_message_id=message_id,
    )


def _recipient_status(fields: Message) -> RecipientStatus | None:
    action = (_one_line(fields.get("Action")) or "").lower()
    if action not in _ACTIONS:
        return None
    final = _address(_typed_value(fields.get("Final-Recipient")))
    original = _address(_typed_value(fields.get("Original-Recipient")))
    if final is None and original is None:
        return None
    return RecipientStatus(
        action=action,
        final_recipient=final,
        original_recipient=original,
        status=_status(fields.get("Status")),
        diagnostic_code=_one_line(fields.get("Diagnostic-Code")),
        remote_mta=_typed_value(fields.get("Remote-MTA")),
    )


def _first_part(parts: list[Message], content_type: str) -> Message | None:
    return next((p for p in parts if p.get_content_type() == content_type), None)


def _field_blocks(part: Message) -> list[Message]:
    """The header-like blocks of a delivery-status or feedback-report part."""
    payload = part.get_payload()
    if isinstance(payload, list):  # the stdlib splits message/delivery-status itself
        return [block for block in payload if isinstance(block, Message)]
    raw = part.get_payload(decode=True)
    if not isinstance(raw, bytes):
        return []
    # Blank lines separate blocks (RFC 3464 section 2.1); normalise line ends first.
    text = raw.replace(b"\r\n", b"\n")
    parser = email.parser.BytesHeaderParser(policy=email.policy.compat32)
    return [parser.parsebytes(block.strip(b"\n") + b"\n") for block in text.split(b"\n\n")]


def _original_headers(parts: list[Message]) -> tuple[str | None, str | None]:
    """Return-Path and Message-ID of the returned message (message/rfc822 or its headers)."""
    for part in parts:
        content_type = part.get_content_type()
        if content_type in ("message/rfc822", "message/global"):
            payload = part.get_payload()
            inner = payload[0] if isinstance(payload, list) and payload else None
        elif content_type in ("text/rfc822-headers", "message/global-headers"):
            raw = part.get_payload(decode=True)
            inner = (
                email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw)
                if isinstance(raw, bytes)
                else None
            )
        else:
            continue
        if isinstance(inner, Message):
            message_id = _one_line(inner.get("Message-ID"))
            id_match = None if message_id is None else _MESSAGE_ID.search(message_id)
            return _address(inner.get("Return-Path")), None if id_match is None else id_match[0]
    return None, None


def _one_line(value: object) -> str | None:
    if value is None:
        return None
    text = " ".join(str(value).split())[:_MAX_FIELD]
    return text or None


def _typed_value(value: object) -> str | None:
    """The value of a `type; value` field (`rfc822; ann@example.org`, `dns; mx.example.org`)."""
    text = _one_line(value)
    if text is None:
        return None
    kind, semicolon, rest = text.partition(";")
    return (rest.strip() if semicolon else kind) or None


def _address(value: object) -> str | None:
    text = _one_line(value)
    if text is None:
        return None
    text = text.strip().removeprefix("<").removesuffix(">")
    return text if _ADDRESS.fullmatch(text) else None


def _status(value: object) -> EnhancedStatus | None:
    text = _one_line(value)
    match = None if text is None else _STATUS.match(text)
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])
