"""MIME assembly: `_core.build_message` against Python's `email.message.EmailMessage`.

Both sides build the same message from scratch on every iteration: a non-ASCII display name
and subject, text + html (multipart/alternative), one small PDF attachment, fixed Date and
Message-ID, random boundaries, serialized with CRLF line ends (`policy.SMTP` for Python).
The two are timed in alternating slices so load on a shared machine hits both alike.
"""

import email
import email.policy
import time
from collections.abc import Callable
from email.headerregistry import Address
from email.message import EmailMessage

from postwire import _core

SENDER = ("Zoë Martín", "zoe@example.com")
TO = [("Ann Lee", "ann@example.org"), (None, "bob@example.net")]
SUBJECT = "Your receipt — order #12345"
TEXT = "Hello Ann,\n\nThanks for your order. Your receipt is attached.\n\nZoë\n" * 3
HTML = (
    "<html><body><p>Hello Ann,</p><p>Thanks for your order. Your receipt is attached.</p>"
    "<p>Zoë</p></body></html>\n"
) * 3
ATTACHMENT = bytes(range(256)) * 8  # 2 KiB
FILENAME = "receipt-12345.pdf"
DATE = 1_700_000_000
DATE_HEADER = "Tue, 14 Nov 2023 22:13:20 +0000"
MESSAGE_ID = "<bench-1@example.com>"


def build_with_core() -> bytes:
    return _core.build_message(
        sender=SENDER,
        to=TO,
        subject=SUBJECT,
        text=TEXT,
        html=HTML,
        attachments=[_core.Attachment(ATTACHMENT, FILENAME, "application/pdf")],
        message_id=MESSAGE_ID,
        date=DATE,
    )


def build_with_email() -> bytes:
    message = EmailMessage()
    message["From"] = Address(SENDER[0], addr_spec=SENDER[1])
    message["To"] = ", ".join(f"{name} <{addr}>" if name else addr for name, addr in TO)
    message["Subject"] = SUBJECT
    message["Date"] = DATE_HEADER
    message["Message-ID"] = MESSAGE_ID
    message.set_content(TEXT)
    message.add_alternative(HTML, subtype="html")
    message.add_attachment(ATTACHMENT, maintype="application", subtype="pdf", filename=FILENAME)
    return message.as_bytes(policy=email.policy.SMTP)


def _same_message(core: bytes, python: bytes) -> bool:
    """Both builders must produce the same content, or the comparison is meaningless."""

    def summary(data: bytes) -> tuple[object, ...]:
        message = email.message_from_bytes(data, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        plain, html = message.get_body(("plain",)), message.get_body(("html",))
        assert plain is not None and html is not None
        (attachment,) = message.iter_attachments()
        return (
            str(message["From"]),
            str(message["To"]),
            str(message["Subject"]),
            str(message["Message-ID"]),
            plain.get_content().replace("\r\n", "\n"),
            html.get_content().replace("\r\n", "\n"),
            attachment.get_filename(),
            attachment.get_payload(decode=True),
        )

    return summary(core) == summary(python)


def _time_slice(build: Callable[[], bytes], seconds: float) -> tuple[int, float]:
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(50):
            build()
        count += 50
        now = time.perf_counter()
        if now >= deadline:
            return count, now - start


def run(seconds: float) -> dict[str, float]:
    """Messages per second for each builder over about `seconds` in total, and their ratio."""
    assert _same_message(build_with_core(), build_with_email())
    for build in (build_with_core, build_with_email):  # warm caches and lazy imports
        for _ in range(100):
            build()
    rounds = max(1, round(seconds / 0.5))
    totals = {"core": [0.0, 0.0], "python": [0.0, 0.0]}
    for _ in range(rounds):
        for name, build in (("core", build_with_core), ("python", build_with_email)):
            count, elapsed = _time_slice(build, seconds / rounds / 2)
            totals[name][0] += count
            totals[name][1] += elapsed
    core = totals["core"][0] / totals["core"][1]
    python = totals["python"][0] / totals["python"][1]
    return {
        "mime_core_messages_per_s": core,
        "mime_python_email_messages_per_s": python,
        "mime_ratio": core / python,
    }
