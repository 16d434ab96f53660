"""The webhook client's response reader (sans-IO) and request bytes."""

from __future__ import annotations

import httpx
import pytest

from postwire.webhooks.http_post import (
    MAX_BODY_BYTES,
    HttpPostError,
    ResponseReader,
    _request_bytes,
)


def read(*pieces: bytes) -> ResponseReader:
    reader = ResponseReader()
    for piece in pieces:
        if reader.done:
            break
        reader.feed(piece)
    return reader


@pytest.mark.parametrize(
    ("pieces", "status", "keep_alive"),
    [
        ((b"HTTP/1.1 204 No Content\r\n\r\n",), 204, True),
        ((b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",), 200, True),
        ((b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",), 200, True),
        ((b"HTTP/1.1 500 Oops\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx",), 500, False),
        ((b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",), 200, False),
        ((b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",), 200, True),
        # Pieces split anywhere, even inside the status line and the blank line.
        ((b"HTT", b"P/1.1 202 Accepted\r\nContent-Le", b"ngth: 3\r\n\r", b"\nab", b"c"), 202, True),
        # Until the connection closes: no length, no chunks.
        ((b"HTTP/1.0 200 OK\r\n\r\nsome body", b""), 200, False),
        # An interim answer, then the real one.
        ((b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",), 204, True),
        # Chunked, with an extension, then trailers; and without trailers, split.
        (
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"3;x=y\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n",),
            200,
            True,
        ),
        (
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhe",
             b"llo\r\n0\r", b"\n\r\n"),
            200,
            True,
        ),
    ],
)  # fmt: skip
def test_answers_are_read_to_their_end(
    pieces: tuple[bytes, ...], status: int, keep_alive: bool
) -> None:
    reader = read(*pieces)
    assert (reader.done, reader.status, reader.keep_alive) == (True, status, keep_alive)


def test_an_answer_not_yet_complete_is_not_done() -> None:
    reader = read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    assert reader.status == 200 and not reader.done


@pytest.mark.parametrize(
    "pieces",
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n",),
        (b"HTTP/1.1 abc\r\n\r\n",),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", b""),  # closed early
        (b"HTTP/1.1 200 O", b""),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20_000,),
        (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1)
         + b"x" * (MAX_BODY_BYTES + 1),),
    ],
)  # fmt: skip
def test_malformed_or_cut_answers_fail(pieces: tuple[bytes, ...]) -> None:
    with pytest.raises(HttpPostError):
        read(*pieces)


def test_request_bytes() -> None:
    url = httpx.URL("https://hooks.example.com:8443/in/coming?team=1")
    request = _request_bytes(url, {"svix-id": "msg_1", "Content-Type": "application/json"}, b"{}")
    assert request == (
        b"POST /in/coming?team=1 HTTP/1.1\r\nHost: hooks.example.com:8443\r\n"
        b"svix-id: msg_1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert _request_bytes(httpx.URL("http://h.example"), {}, b"").startswith(b"POST / HTTP/1.1\r\n")
