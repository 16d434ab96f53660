"""Header fields read from a spooled message without a MIME parser, and its bodies with one."""

from __future__ import annotations

from postwire.insights.message_source import body_texts, header_fields

MESSAGE = (
    b"DKIM-Signature: v=1; a=rsa-sha256; d=example.com;\r\n"
    b"\tbh=abc; b=def\r\n"
    b"From: Shop <shop@example.com>\r\n"
    b"List-Unsubscribe: <https://example.com/u/1>,\r\n"
    b" <mailto:u@example.com>\r\n"
    b"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"
    b"Content-Type: multipart/alternative; boundary=b\r\n"
    b"\r\n"
    b"--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello\r\n"
    b"--b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hello</p>\r\n--b--\r\n"
    b"List-Id: not a header, in the body\r\n"
)


def test_header_fields_unfolded_and_only_those_asked_for() -> None:
    assert [name for name, _ in header_fields(MESSAGE)] == [
        "DKIM-Signature",
        "From",
        "List-Unsubscribe",
        "List-Unsubscribe-Post",
        "Content-Type",
    ]
    assert header_fields(MESSAGE, ("list-unsubscribe", "list-id")) == [
        ("List-Unsubscribe", "<https://example.com/u/1>, <mailto:u@example.com>")
    ]


def test_bodies() -> None:
    html, text = body_texts(MESSAGE)
    assert html is not None and html.strip() == "<p>Hello</p>"
    assert text is not None and text.strip() == "Hello"
