"""The checks of an image uploaded for a broadcast: its type from its bytes, its dimensions
from its header, its size; SVG and anything else refused with a readable reason; kept with
its record and listed for its team only."""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime

import pytest

from postwire.broadcasts.images import (
    MAX_SIDE,
    image_facts,
    image_url,
    save_image,
    uploaded_image_id,
)
from postwire.errors import ApiError
from postwire.store.images import get_team_image, image_content, team_images
from postwire.store.spool import Spool

NOW = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)


def png(width: int, height: int) -> bytes:
    """A real PNG (grey, 8 bits), as any encoder would write it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def jpeg(width: int, height: int) -> bytes:
    """SOI, an APP0 segment, a DQT segment, then the baseline frame header (SOF0)."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    dqt = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes(64)
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + dqt + sof0 + b"\xff\xd9"


def webp(kind: bytes, width: int, height: int) -> bytes:
    if kind == b"VP8X":
        payload = b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little")
        payload += (height - 1).to_bytes(3, "little")
    elif kind == b"VP8L":
        bits = (width - 1) | ((height - 1) << 14)
        payload = b"\x2f" + struct.pack("<I", bits)
    else:
        payload = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height)
    body = b"WEBP" + kind + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


@pytest.mark.parametrize(
    ("content", "mimetype", "extension"),
    [
        (png(640, 480), "image/png", "png"),
        (gif(640, 480), "image/gif", "gif"),
        (jpeg(640, 480), "image/jpeg", "jpg"),
        (webp(b"VP8 ", 640, 480), "image/webp", "webp"),
        (webp(b"VP8L", 640, 480), "image/webp", "webp"),
        (webp(b"VP8X", 640, 480), "image/webp", "webp"),
    ],
)
def test_each_accepted_type_is_read_from_its_bytes(
    content: bytes, mimetype: str, extension: str
) -> None:
    facts = image_facts(content)
    assert (facts.mimetype, facts.extension, facts.width, facts.height) == (
        mimetype,
        extension,
        640,
        480,
    )


def refusal(content: bytes) -> str:
    with pytest.raises(ApiError) as refused:
        image_facts(content)
    assert refused.value.status == 422
    return refused.value.message


def test_svg_is_refused_because_it_can_carry_script() -> None:
    svg = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><script/></svg>'
    assert "SVG images are not accepted" in refusal(svg)
    assert "SVG" in refusal(b"\xef\xbb\xbf  <svg><rect/></svg>")


def test_a_text_file_named_like_an_image_is_refused() -> None:
    message = refusal(b"just some text, saved as picture.png\n")
    assert message.startswith("This file is not a PNG, JPEG, GIF or WebP image")
    assert "empty" in refusal(b"")


def test_damaged_or_absurd_headers_are_refused() -> None:
    assert "not a PNG" in refusal(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8)  # no IHDR
    assert "no size" in refusal(png(0, 10))
    assert f"at most {MAX_SIDE} pixels" in refusal(gif(MAX_SIDE + 1, 10))
    assert "not a PNG" in refusal(b"\xff\xd8\xff\xe0\x00")  # a JPEG cut short
    assert "not a PNG" in refusal(b"RIFF\x00\x00\x00\x00WEBPXXXX" + bytes(20))


async def test_an_image_is_kept_served_by_id_and_listed_for_its_team_only(spool: Spool) -> None:
    content = png(4, 3)
    record = await save_image(spool, "team-a", content, name="logo\n.png", max_bytes=1000, now=NOW)
    assert (record.width, record.height, record.size, record.name) == (
        4,
        3,
        len(content),
        "logo.png",
    )
    assert image_content(spool, record.id) == content
    assert image_url("https://mail.example.com/", record) == (
        f"https://mail.example.com/images/{record.id}.png"
    )
    # And back: the pages show an upload through their own origin, by its id.
    url = image_url("https://mail.example.com", record)
    assert uploaded_image_id("https://mail.example.com/", url) == record.id
    shouted = url.replace(record.id, record.id.upper()).replace(".png", ".PNG")
    assert uploaded_image_id("https://mail.example.com", shouted) == record.id
    for elsewhere in (
        f"https://cdn.example.net/images/{record.id}.png",
        f"https://mail.example.com/images/{record.id}.svg",
        f"https://mail.example.com/images/{record.id}.png?x=1",
        f"https://mail.example.com/images/../{record.id}.png",
        "",
    ):
        assert uploaded_image_id("https://mail.example.com", elsewhere) is None, elsewhere
    assert [image.id for image in team_images(spool, "team-a", limit=10)] == [record.id]
    assert team_images(spool, "team-b", limit=10) == []
    assert get_team_image(spool, "team-b", record.id) is None
    assert get_team_image(spool, "team-a", record.id) == record


async def test_an_image_over_the_limit_is_refused_before_anything_is_kept(spool: Spool) -> None:
    with pytest.raises(ApiError) as refused:
        await save_image(spool, "team-a", png(40, 40), name="big.png", max_bytes=50, now=NOW)
    assert refused.value.status == 413
    assert refused.value.message == "The image is larger than 50 bytes; make it smaller."
    assert team_images(spool, "team-a", limit=10) == []
