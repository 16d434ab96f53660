"""The Rust DATA helpers answer as the plain Python byte operations they replaced, on random
content made of the octets that matter (dots, CR, LF, NUL)."""

from __future__ import annotations

import random

from postwire import _core


def unstuff_reference(raw: bytes) -> tuple[bytes, int]:
    longest = max(map(len, raw.split(b"\r\n")))
    return (b"\r\n" + raw).replace(b"\r\n.", b"\r\n")[2:], longest


def stuff_reference(body: bytes) -> bytes:
    if not body:
        return b".\r\n"
    stuffed = body.replace(b"\r\n.", b"\r\n..")
    if stuffed.startswith(b"."):
        stuffed = b"." + stuffed
    if not stuffed.endswith(b"\r\n"):
        stuffed += b"\r\n"
    return stuffed + b".\r\n"


def faults_reference(message: bytes) -> tuple[bool, bool, bool]:
    crlf = message.count(b"\r\n")
    return b"\x00" in message, message.count(b"\n") != crlf, message.count(b"\r") != crlf


def test_random_content_answers_as_the_reference() -> None:
    generator = random.Random(4552)
    octets = [b".", b"\r", b"\n", b"\r\n", b"a", b"\x00", b"..", b"\r\n."]
    for _ in range(20_000):
        raw = b"".join(generator.choice(octets) for _ in range(generator.randint(0, 12)))
        assert _core.unstuff_data(raw) == unstuff_reference(raw), raw
        assert _core.data_faults(raw) == faults_reference(raw), raw
        assert _core.stuff_data(raw) == stuff_reference(raw), raw
