"""MIME assembly through `postwire._core.build_message`, checked by parsing the output back with
Python's `email` package (an independent reader) and against golden bytes."""

import email
import email.header
import email.policy
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import pytest

from postwire import _core
from postwire.errors import HeaderInjectionError, MessageError

PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\nbinary \x00\xff tail"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
TEXT = "Hello Ann,\nthe report is attached. Ünïcödé too.\n"
HTML = '<p>Hello Ann,</p>\n<p><img src="cid:logo@example.com"> ½ price</p>\n'


def full_kwargs(**overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "sender": ("José Pérez", "jose@example.com"),
        "to": [("Ann Lee", "ann@example.org"), (None, "bob@bücher.example")],
        "cc": [("山田太郎", "taro@example.jp")],
        "bcc": [("Hidden Person", "hidden@example.net")],
        "reply_to": [("Support, Team", "support@example.com")],
        "subject": "Résumé — quarterly report",
        "text": TEXT,
        "html": HTML,
        "attachments": [
            _core.Attachment(PDF, "report 2024.pdf"),
            _core.Attachment(b"a,b\n1,2\n", "données.csv", "text/csv"),
            _core.Attachment(PNG, "logo.png", content_id="<logo@example.com>"),
        ],
        "headers": [("X-Campaign", "spring"), ("List-Unsubscribe", "<https://example.com/u>")],
        "message_id": "<fixed-1@example.com>",
        "date": 1_700_000_000,
        "utc_offset_minutes": 120,
        "boundary_seed": "golden",
    }
    kwargs.update(overrides)
    return kwargs


def parse(data: bytes) -> EmailMessage:
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


def crlf_to_lf(value: str) -> str:
    return value.replace("\r\n", "\n")


def test_every_field_round_trips_through_python_email() -> None:
    data = _core.build_message(**full_kwargs())
    message = parse(data)

    (sender,) = message["From"].addresses
    assert (sender.display_name, sender.addr_spec) == ("José Pérez", "jose@example.com")
    to = [(a.display_name, a.addr_spec) for a in message["To"].addresses]
    assert to == [("Ann Lee", "ann@example.org"), ("", "bob@xn--bcher-kva.example")]
    cc = [(a.display_name, a.addr_spec) for a in message["Cc"].addresses]
    assert cc == [("山田太郎", "taro@example.jp")]
    reply_to = [(a.display_name, a.addr_spec) for a in message["Reply-To"].addresses]
    assert reply_to == [("Support, Team", "support@example.com")]
    assert message["Subject"] == "Résumé — quarterly report"

    assert message["Bcc"] is None
    assert b"hidden" not in data.lower()
    assert b"bcc" not in data.lower()

    assert message["X-Campaign"] == "spring"
    assert message["List-Unsubscribe"] == "<https://example.com/u>"
    assert message["Message-ID"] == "<fixed-1@example.com>"
    assert message["MIME-Version"] == "1.0"
    expected_date = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert message["Date"].datetime == expected_date
    assert message["Date"].datetime.utcoffset() == timedelta(minutes=120)

    assert message.get_content_type() == "multipart/mixed"
    text_part = message.get_body(("plain",))
    html_part = message.get_body(("html",))
    assert text_part is not None and html_part is not None
    assert crlf_to_lf(text_part.get_content()) == TEXT
    assert crlf_to_lf(html_part.get_content()) == HTML

    attachments = [
        (part.get_filename(), part.get_content_type(), part.get_payload(decode=True))
        for part in message.iter_attachments()
    ]
    assert attachments == [
        ("report 2024.pdf", "application/pdf", PDF),
        # A text attachment's line breaks arrive as CRLF (text's canonical form).
        ("données.csv", "text/csv", b"a,b\r\n1,2\r\n"),
    ]

    # The inline image sits beside the html in multipart/related, inside the alternative.
    (alternative,) = [p for p in message.walk() if p.get_content_type() == "multipart/alternative"]
    kinds = [p.get_content_type() for p in alternative.iter_parts()]
    assert kinds == ["text/plain", "multipart/related"]
    (related,) = [p for p in alternative.iter_parts() if p.is_multipart()]
    html_inner, inline = related.iter_parts()
    assert html_inner.get_content_type() == "text/html"
    assert inline["Content-ID"] == "<logo@example.com>"
    assert inline.get_content_disposition() == "inline"
    assert inline.get_filename() == "logo.png"
    assert inline.get_content_type() == "image/png"
    assert inline.get_payload(decode=True) == PNG

    assert all(not defect for part in message.walk() for defect in [part.defects])


GOLDEN = (
    b"From: <a@example.com>\r\n"
    b'To: "Ann Lee" <ann@example.org>\r\n'
    b"Subject: =?utf-8?B?UsOpc3Vtw6k=?=\r\n"
    b"Date: Tue, 14 Nov 2023 22:13:20 +0000\r\n"
    b"Message-ID: <golden@example.com>\r\n"
    b"X-Tag: one\r\n"
    b"MIME-Version: 1.0\r\n"
    b'Content-Type: multipart/mixed; boundary="b_1"\r\n'
    b"\r\n"
    b"\r\n"
    b"--b_1\r\n"
    b'Content-Type: multipart/alternative; boundary="b_2"\r\n'
    b"\r\n"
    b"\r\n"
    b"--b_2\r\n"
    b'Content-Type: text/plain; charset="utf-8"\r\n'
    b"Content-Transfer-Encoding: 7bit\r\n"
    b"\r\n"
    b"Hi\r\n"
    b"\r\n"
    b"--b_2\r\n"
    b'Content-Type: text/html; charset="utf-8"\r\n'
    b"Content-Transfer-Encoding: 7bit\r\n"
    b"\r\n"
    b"<p>Hi</p>\r\n"
    b"\r\n"
    b"--b_2--\r\n"
    b"\r\n"
    b"--b_1\r\n"
    b"Content-Type: application/pdf\r\n"
    b'Content-Disposition: attachment; filename="a.pdf"\r\n'
    b"Content-Transfer-Encoding: base64\r\n"
    b"\r\n"
    b"JVBERg==\r\n"
    b"\r\n"
    b"--b_1--\r\n"
)


def test_golden_bytes() -> None:
    data = _core.build_message(
        sender=(None, "a@example.com"),
        to=[("Ann Lee", "ann@example.org")],
        bcc=[(None, "secret@example.org")],
        subject="Résumé",
        text="Hi\n",
        html="<p>Hi</p>\n",
        attachments=[_core.Attachment(b"%PDF", "a.pdf")],
        headers=[("X-Tag", "one")],
        message_id="golden@example.com",
        date=1_700_000_000,
        boundary_seed="b",
    )
    assert data == GOLDEN


def test_lines_are_crlf_and_at_most_998_octets() -> None:
    long_word = "x" * 2500
    data = _core.build_message(
        **full_kwargs(
            subject=f"{long_word} é {long_word}",
            text=f"{long_word} {'word ' * 3000}\n",
            html=f"<p>{long_word}</p>\n",
            sender=("Ü" * 500, "jose@example.com"),
        )
    )
    assert data.endswith(b"\r\n")
    lines = data.split(b"\r\n")
    assert all(b"\n" not in line and b"\r" not in line for line in lines)
    assert max(len(line) for line in lines) <= 998
    message = parse(data)
    assert message["Subject"] == f"{long_word} é {long_word}"
    # policy.default keeps the folding space between adjacent encoded words of a display name
    # (its own output round-trips the same way); RFC 2047 section 6.2 drops it, as compat32 does.
    raw_from = email.message_from_bytes(data, policy=email.policy.compat32)["From"]
    decoded = str(email.header.make_header(email.header.decode_header(raw_from)))
    assert decoded == "Ü" * 500 + " <jose@example.com>"


def test_bare_cr_and_lf_never_reach_the_wire() -> None:
    raw_file = b"a\rb\nc\x00d\r\n"
    data = _core.build_message(
        sender=(None, "a@example.com"),
        text="x\r.\rRCPT TO:<evil@example.net>\n",
        html="<p>\r</p>\n",
        attachments=[_core.Attachment(raw_file, "notes.txt")],
    )
    assert re.search(rb"\r(?!\n)|(?<!\r)\n", data) is None
    message = parse(data)
    text_part = message.get_body(("plain",))
    assert text_part is not None
    assert text_part.get_content() == "x\r\n.\r\nRCPT TO:<evil@example.net>\r\n"
    # A text attachment holding NUL is binary: base64, so its bytes arrive exactly.
    (attachment,) = message.iter_attachments()
    assert attachment["Content-Transfer-Encoding"] == "base64"
    assert attachment.get_payload(decode=True) == raw_file


LATIN = "Grüße aus München: the quarterly report is attached, as agreed.\n" * 20
CYRILLIC = "Отчёт во вложении, всё в порядке.\n" * 20


@pytest.mark.parametrize(
    ("content", "content_type", "encoding", "decoded"),
    [
        (b"name,total\r\nAnn,12\r\n", "text/csv", "7bit", None),
        (b"name,total\nAnn,12\n", "text/csv", "7bit", b"name,total\r\nAnn,12\r\n"),
        (b"old mac\rline ends\r", "text/plain", "7bit", b"old mac\r\nline ends\r\n"),
        (b"ends without a line break", "text/plain", "7bit", None),
        (
            b"".join([b"x" * 1200, b"\r\n", b"trailing space \r\n"]),
            "text/plain",
            "quoted-printable",
            None,
        ),
        (LATIN.encode().replace(b"\n", b"\r\n"), "text/plain", "quoted-printable", None),
        (LATIN.encode(), "text/plain", "quoted-printable", LATIN.encode().replace(b"\n", b"\r\n")),
        (
            b"caf\xe9 au lait = 3 \x80 (Latin-1 and a stray byte)\r\n",
            "text/plain",
            "quoted-printable",
            None,
        ),
        (CYRILLIC.encode().replace(b"\n", b"\r\n"), "text/plain", "base64", None),
        (CYRILLIC.encode(), "text/plain", "base64", CYRILLIC.encode().replace(b"\n", b"\r\n")),
        (b"a\x00b\nc\r", "text/plain", "base64", None),
        (b"\xff\xfeh\x00i\x00\n\x00", "text/plain", "base64", None),
        (b"ascii json\n", "application/json", "base64", None),
        (PDF, "application/pdf", "base64", None),
    ],
)
def test_attachment_transfer_encoding_follows_content(
    content: bytes, content_type: str, encoding: str, decoded: bytes | None
) -> None:
    """ASCII text is 7bit (base64 around it is what rspamd scores as MIME_BASE64_TEXT_BOGUS),
    text with a little non-ASCII or long lines quoted-printable, mostly non-ASCII text and
    anything binary base64; Python's parser decodes each to the original bytes, or for text
    with bare CR or LF line ends to the same text with CRLF."""
    data = _core.build_message(
        sender=(None, "a@example.com"),
        to=[(None, "b@example.com")],
        text="see attached\n",
        attachments=[_core.Attachment(content, "file", content_type)],
    )
    assert re.search(rb"\r(?!\n)|(?<!\r)\n", data) is None
    assert max(len(line) for line in data.split(b"\r\n")) <= 998
    message = parse(data)
    (attachment,) = message.iter_attachments()
    assert attachment["Content-Transfer-Encoding"] == encoding
    assert attachment.get_content_type() == content_type
    assert attachment.get_payload(decode=True) == (content if decoded is None else decoded)
    assert not attachment.defects


def test_single_part_and_alternative_structures() -> None:
    base: dict[str, Any] = {"sender": (None, "a@example.com"), "to": [(None, "b@example.com")]}
    text_only = parse(_core.build_message(**base, text="only text\n"))
    assert text_only.get_content_type() == "text/plain"
    assert crlf_to_lf(text_only.get_content()) == "only text\n"
    html_only = parse(_core.build_message(**base, html="<b>only</b>\n"))
    assert html_only.get_content_type() == "text/html"
    both = parse(_core.build_message(**base, text="t\n", html="<p>h</p>\n"))
    assert both.get_content_type() == "multipart/alternative"
    inline_only = parse(
        _core.build_message(
            **base, html="<img src='cid:x'>\n", attachments=[_core.Attachment(PNG, content_id="x")]
        )
    )
    assert inline_only.get_content_type() == "multipart/related"


def test_content_type_is_guessed_from_the_filename() -> None:
    data = _core.build_message(
        sender=(None, "a@example.com"),
        to=[(None, "b@example.com")],
        text="see attached\n",
        attachments=[
            _core.Attachment(b"1", "photo.JPG"),
            _core.Attachment(b"2", "unknown.zzz"),
            _core.Attachment(b"3"),
            _core.Attachment(b"4", "x.bin", "Application/X-Custom"),
        ],
    )
    types = [part.get_content_type() for part in parse(data).iter_attachments()]
    assert types == [
        "image/jpeg",
        "application/octet-stream",
        "application/octet-stream",
        "application/x-custom",
    ]


def test_defaults_date_message_id_and_boundaries() -> None:
    kwargs = full_kwargs(message_id=None, date=None, utc_offset_minutes=0, boundary_seed=None)
    first, second = _core.build_message(**kwargs), _core.build_message(**kwargs)
    message = parse(first)
    match = re.fullmatch(r"<([0-9a-f-]{36})@example\.com>", message["Message-ID"])
    assert match is not None
    assert uuid.UUID(match.group(1)).version == 7
    assert abs(message["Date"].datetime.timestamp() - time.time()) < 60
    assert message["Date"].datetime.utcoffset() == timedelta(0)
    assert message.get_boundary() != parse(second).get_boundary()
    assert parse(second)["Message-ID"] != message["Message-ID"]


def test_idn_and_utf8_local_parts() -> None:
    data = _core.build_message(
        sender=(None, "news@müller.example"),
        to=[(None, "用户@例子.example"), (None, "ops@[192.0.2.1]")],
        text="x\n",
    )
    assert b"From: <news@xn--mller-kva.example>\r\n" in data
    # RFC 6532: the local part stays UTF-8; the domain is still punycode.
    assert "<用户@xn--fsqu00a.example>".encode() in data
    assert b"<ops@[192.0.2.1]>" in data
    # The default Message-ID takes the sender's ASCII domain.
    assert re.search(rb"Message-ID: <[0-9a-f-]{36}@xn--mller-kva\.example>", data)


def test_large_attachment_round_trips() -> None:
    blob = bytes(range(256)) * 8192  # 2 MiB: built with the GIL released
    data = _core.build_message(
        sender=(None, "a@example.com"),
        to=[(None, "b@example.com")],
        text="big\n",
        attachments=[_core.Attachment(blob, "blob.bin")],
    )
    (part,) = parse(data).iter_attachments()
    assert part.get_payload(decode=True) == blob


def test_attachment_is_a_frozen_value() -> None:
    attachment = _core.Attachment(b"abc", "a.txt", "text/plain", "cid1")
    assert attachment.content == b"abc"
    assert attachment.filename == "a.txt"
    assert attachment.content_type == "text/plain"
    assert attachment.content_id == "cid1"
    assert repr(attachment) == (
        "Attachment(<3 bytes>, filename='a.txt', content_type='text/plain', content_id='cid1')"
    )
    with pytest.raises(AttributeError):
        attachment.filename = "b.txt"  # type: ignore[misc]


Poison = Callable[[str], dict[str, Any]]

# Each entry: the field named in the error, and how to put a value into it.
INJECTABLE_FIELDS: list[tuple[str, Poison]] = [
    ("sender display name", lambda v: {"sender": (v, "jose@example.com")}),
    ("sender address", lambda v: {"sender": ("José", f"jose{v}@example.com")}),
    ("to[1] display name", lambda v: {"to": [(None, "a@example.com"), (v, "b@example.com")]}),
    ("to[0] address", lambda v: {"to": [(None, f"a@example.com{v}")]}),
    ("cc[0] display name", lambda v: {"cc": [(v, "c@example.com")]}),
    ("cc[0] address", lambda v: {"cc": [(None, f"c{v}@example.com")]}),
    ("bcc[0] display name", lambda v: {"bcc": [(v, "d@example.com")]}),
    ("bcc[0] address", lambda v: {"bcc": [(None, f"d@example.com{v}")]}),
    ("reply_to[0] display name", lambda v: {"reply_to": [(v, "r@example.com")]}),
    ("reply_to[0] address", lambda v: {"reply_to": [(None, f"r{v}@example.com")]}),
    ("subject", lambda v: {"subject": f"Hello{v}"}),
    ("headers[1] name", lambda v: {"headers": [("X-Ok", "1"), (f"X-Evil{v}", "1")]}),
    ("header X-Evil value", lambda v: {"headers": [("X-Evil", f"1{v}")]}),
    ("message_id", lambda v: {"message_id": f"<id{v}@example.com>"}),
    ("boundary_seed", lambda v: {"boundary_seed": f"seed{v}"}),
    (
        "attachments[0] filename",
        lambda v: {"attachments": [_core.Attachment(b"x", f"a{v}.pdf")]},
    ),
    (
        "attachments[0] content type",
        lambda v: {"attachments": [_core.Attachment(b"x", "a.pdf", f"application/pdf{v}")]},
    ),
    (
        "attachments[0] content id",
        lambda v: {"attachments": [_core.Attachment(b"x", "a.png", None, f"cid{v}")]},
    ),
]

INJECTIONS = {
    "CRLF": ("\r\nBcc: victim@example.net", "carriage return"),
    "CR": ("\rBcc: victim@example.net", "carriage return"),
    "LF": ("\nBcc: victim@example.net", "line feed"),
    "NUL": ("\x00", "NUL"),
}


@pytest.mark.parametrize("injection", INJECTIONS.values(), ids=INJECTIONS.keys())
@pytest.mark.parametrize(
    ("field", "poison"), INJECTABLE_FIELDS, ids=[name for name, _ in INJECTABLE_FIELDS]
)
def test_header_injection_is_refused(
    field: str, poison: Poison, injection: tuple[str, str]
) -> None:
    value, what = injection
    with pytest.raises(HeaderInjectionError) as caught:
        _core.build_message(**full_kwargs(**poison(value)))
    assert field in str(caught.value)
    assert what in str(caught.value)


@pytest.mark.parametrize(
    "name",
    [
        "From",
        "to",
        "CC",
        "Bcc",
        "Reply-To",
        "subject",
        "Date",
        "message-id",
        "MIME-Version",
        "Content-Type",
        "content-transfer-encoding",
    ],
)
def test_structural_headers_cannot_be_overridden(name: str) -> None:
    with pytest.raises(MessageError) as caught:
        _core.build_message(**full_kwargs(headers=[(name, "x")]))
    assert not isinstance(caught.value, HeaderInjectionError)
    assert "headers[0]" in str(caught.value)


@pytest.mark.parametrize(
    "overrides",
    [
        {"headers": [("X Space", "1")]},
        {"headers": [("X:Colon", "1")]},
        {"headers": [("", "1")]},
        {"headers": [("X-Long", "y" * 1200)]},
        {"subject": "bell\x07"},
        {"to": [(None, "no-at-sign")]},
        {"to": [(None, "two@at@example.com")]},
        {"to": [(None, '"quoted"@example.com')]},
        {"to": [(None, "a@exa mple.com")]},
        {"message_id": "no-at"},
        {"boundary_seed": "has space"},
        {"boundary_seed": "seed", "text": "a line\n--seed_1\n"},
        {"date": -1},
        {"utc_offset_minutes": 1440},
        {"attachments": [_core.Attachment(b"x", "a", "multipart/mixed")]},
        {"attachments": [_core.Attachment(b"x", "a", "image/png; name=a")]},
        {"text": "nul\x00body\n"},
    ],
)
def test_malformed_messages_raise_message_error(overrides: dict[str, Any]) -> None:
    with pytest.raises(MessageError) as caught:
        _core.build_message(**full_kwargs(**overrides))
    assert not isinstance(caught.value, HeaderInjectionError)


def test_custom_headers_keep_order_and_encode_non_ascii() -> None:
    data = _core.build_message(
        **full_kwargs(headers=[("X-B", "2"), ("X-A", "1"), ("X-B", "3"), ("X-Note", "größe")])
    )
    message = parse(data)
    assert message.get_all("X-B") == ["2", "3"]
    names = [name for name, _ in message.items() if name.startswith("X-")]
    assert names == ["X-B", "X-A", "X-B", "X-Note"]
    assert message["X-Note"] == "größe"
