"""`read_data`, the DATA reader of SMTP submission, on a real asyncio StreamReader fed by the
test (no sockets): terminator, dot-unstuffing, limits, chunk boundaries, pipelined commands."""

from __future__ import annotations

import asyncio
import random

import pytest

from postwire.smtp import submission_policy as policy
from postwire.smtp.submission import _READ_LIMIT, MAX_DATA_LINE, read_data


def read(wire: bytes, *, max_size: int | None = None, pieces: int = 1, eof: bool = True):
    """Feed `wire` in `pieces` and read one DATA; what is left unread comes second."""

    async def run() -> tuple[bytes | tuple[int, str, str] | None, bytes]:
        reader = asyncio.StreamReader(limit=_READ_LIMIT)
        step = max(1, len(wire) // pieces)
        for start in range(0, len(wire), step):
            reader.feed_data(wire[start : start + step])
        if eof:
            reader.feed_eof()
        result = await read_data(reader, max_size)
        return result, await reader.read() if eof else b""

    return asyncio.run(run())


def stuffed(content: bytes) -> bytes:
    """What a client sends for `content` (CRLF lines): dots doubled, then the final dot."""
    return (b"\r\n" + content).replace(b"\r\n.", b"\r\n..")[2:] + b".\r\n"


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        (b".\r\n", b""),
        (b"a\r\n.\r\n", b"a\r\n"),
        (b"..\r\n.\r\n", b".\r\n"),
        (b"...x\r\n.\r\n", b"..x\r\n"),
        (b"Thanks.\r\n.\r\n", b"Thanks.\r\n"),
        (b"a\r\n.b\r\n..c\r\n.\r\n", b"a\r\nb\r\n.c\r\n"),
        # A bare LF ends no line: ".\r\n" after it does not end the data (refused later).
        (b"a\n.\r\nb\r\n.\r\n", b"a\n.\r\nb\r\n"),
    ],
)
def test_terminator_and_dot_unstuffing(wire: bytes, expected: bytes) -> None:
    assert read(wire) == (expected, b"")


def test_pipelined_commands_after_the_data_stay_unread() -> None:
    assert read(b"Hi.\r\n.\r\nMAIL FROM:<a@b.test>\r\nRCPT TO:<c@d.test>\r\n") == (
        b"Hi.\r\n",
        b"MAIL FROM:<a@b.test>\r\nRCPT TO:<c@d.test>\r\n",
    )


@pytest.mark.parametrize("pieces", [1, 3, 7, 64])
@pytest.mark.parametrize("seed", range(8))
def test_random_messages_come_back_exactly(seed: int, pieces: int) -> None:
    rng = random.Random(seed)
    lines = []
    for _ in range(rng.randrange(1, 3000)):
        kind = rng.random()
        if kind < 0.1:
            line = b"." * rng.randrange(1, 4)
        elif kind < 0.2:
            line = b""
        else:
            line = bytes(rng.choice(b"ab. \t\x80\xff") for _ in range(rng.randrange(0, 998)))
        lines.append(line.replace(b"\r", b"").replace(b"\n", b""))
    content = b"".join(line + b"\r\n" for line in lines)
    assert read(stuffed(content) + b"QUIT\r\n", pieces=pieces) == (content, b"QUIT\r\n")


@pytest.mark.parametrize("before", range(_READ_LIMIT - 6, _READ_LIMIT + 6))
def test_the_end_is_found_across_the_reader_limit(before: int) -> None:
    # Lines of 998 octets, then one that ends `before` octets into the data.
    body = (b"x" * 996 + b"\r\n") * (before // 998)
    body += b"y" * max(0, before - len(body) - 2) + b"\r\n"
    assert read(stuffed(body), pieces=5) == (body, b"")


def test_line_limit_counts_the_crlf() -> None:
    longest = b"z" * (MAX_DATA_LINE - 2) + b"\r\n"
    assert read(stuffed(longest)) == (longest, b"")
    assert read(stuffed(b"z" + longest)) == (policy.LINE_TOO_LONG, b"")
    # The limit is on the line as sent: a doubled dot counts.
    assert read(stuffed(b"." + longest[1:]))[0] == policy.LINE_TOO_LONG


def test_too_much_data_is_refused_after_reading_to_the_end() -> None:
    content = b"w" * 500 + b"\r\n"
    assert read(stuffed(content * 9), max_size=5000) == (content * 9, b"")
    result, rest = read(stuffed(content * 10) + b"QUIT\r\n", max_size=5000)
    assert (result, rest) == (policy.MESSAGE_TOO_BIG, b"QUIT\r\n")


@pytest.mark.parametrize("wire", [b"", b"half a message\r\n", b"x" * 100_000, b"a\r\n."])
def test_a_client_gone_mid_data_gives_nothing(wire: bytes) -> None:
    assert read(wire) == (None, b"")
