"""Images uploaded for broadcasts: what is accepted, and keeping it.

An upload is accepted when its bytes are a PNG, JPEG, GIF or WebP image (read from the bytes
themselves, never from the file's name or the browser's content type), no larger than
`broadcasts.max_image_bytes` and at most `MAX_SIDE` pixels on a side. SVG is refused: it is a
document that can carry script, and most mail clients do not show it anyway. The dimensions
come from the image's own header; nothing is decoded or re-encoded, so the bytes served are
the bytes uploaded.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from postwire import _core
from postwire._core import WriteBatch
from postwire.errors import ApiError
from postwire.store.accounts import contract_timestamp
from postwire.store.images import ImageRecord, image_content, put_image
from postwire.store.spool import Spool

# Wider or taller than this is no email image (and a decompression bomb for the reader's device).
MAX_SIDE: Final = 8000
ACCEPTED_WORDS: Final = "PNG, JPEG, GIF or WebP"
MAX_NAME: Final = 200


@dataclass(frozen=True, slots=True)
class ImageFacts:
    mimetype: str
    extension: str
    width: int
    height: int


def refused(message: str, status: int = 422) -> ApiError:
    return ApiError(status, "validation_error", message)


def too_large(max_bytes: int) -> ApiError:
    return refused(f"The image is larger than {_size_words(max_bytes)}; make it smaller.", 413)


def image_facts(content: bytes) -> ImageFacts:
    """What the bytes are, or the refusal that says why they are not an image we accept."""
    if not content:
        raise refused("The file is empty.")
    facts = _png(content) or _gif(content) or _webp(content) or _jpeg(content)
    if facts is None:
        if _looks_like_svg(content):
            raise refused(
                "SVG images are not accepted: they can carry scripts. Upload a "
                f"{ACCEPTED_WORDS} image instead."
            )
        raise refused(
            f"This file is not a {ACCEPTED_WORDS} image (its contents say so, whatever its name)."
        )
    if facts.width < 1 or facts.height < 1:
        raise refused("The image's header gives it no size; it may be damaged.")
    if facts.width > MAX_SIDE or facts.height > MAX_SIDE:
        raise refused(
            f"The image is {facts.width} by {facts.height} pixels; at most {MAX_SIDE} pixels "
            "on a side are accepted."
        )
    return facts


async def save_image(
    spool: Spool,
    team_id: str,
    content: bytes,
    *,
    name: str,
    max_bytes: int,
    now: datetime,
) -> ImageRecord:
    """Check the upload and keep it; the record, once on disk."""
    if len(content) > max_bytes:
        raise too_large(max_bytes)
    facts = image_facts(content)
    record = ImageRecord(
        id=_core.new_id(),
        team_id=team_id,
        mimetype=facts.mimetype,
        extension=facts.extension,
        width=facts.width,
        height=facts.height,
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        created_at=contract_timestamp(now),
        name=_printable(name)[:MAX_NAME],
    )
    batch = WriteBatch()
    put_image(batch, record, content)
    await spool.commit(batch)
    return record


def uploads_url(public_url: str) -> str:
    """Where uploads are served to mail clients: `<api.public_url>/images/`."""
    return f"{public_url.rstrip('/')}/images/"


def image_url(public_url: str, record: ImageRecord) -> str:
    return f"{uploads_url(public_url)}{record.id}.{record.extension}"


_UPLOADED_NAME: Final = re.compile(
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.(?:png|jpg|gif|webp)",
    re.IGNORECASE,
)


def uploaded_image_id(public_url: str, url: str) -> str | None:
    """The id of the upload that `url` serves (`image_url`'s form), or None for any other
    address. Whose upload it is, is for the caller to check."""
    prefix = uploads_url(public_url)
    if not url.startswith(prefix):
        return None
    named = _UPLOADED_NAME.fullmatch(url[len(prefix) :])
    return None if named is None else named.group(1).lower()


@dataclass(frozen=True, slots=True)
class ImageAnswer:
    """What a GET of an image answers (the public route, the editor's canvas)."""

    status: int  # 200, or 304: the asker's copy, named by If-None-Match, is current
    content: bytes  # empty for a 304
    mimetype: str
    etag: str  # the bytes never change: their digest names them


def image_answer(spool: Spool, record: ImageRecord, if_none_match: str) -> ImageAnswer | None:
    """The answer to a GET of `record`'s image; None when its bytes are gone."""
    etag = f'"{record.sha256}"'
    if etag in if_none_match:
        return ImageAnswer(304, b"", record.mimetype, etag)
    content = image_content(spool, record.id)
    if content is None:
        return None
    return ImageAnswer(200, content, record.mimetype, etag)


def _png(data: bytes) -> ImageFacts | None:
    # The signature, then the IHDR chunk first: length 13, type, width and height.
    if not data.startswith(b"\x89PNG\r\n\x1a\n") or data[12:16] != b"IHDR" or len(data) < 24:
        return None
    width, height = struct.unpack(">II", data[16:24])
    return ImageFacts("image/png", "png", width, height)


def _gif(data: bytes) -> ImageFacts | None:
    if data[:6] not in (b"GIF87a", b"GIF89a") or len(data) < 10:
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return ImageFacts("image/gif", "gif", width, height)


def _webp(data: bytes) -> ImageFacts | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    # Lossy: a key frame's start code, then 14 bits each.
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return ImageFacts("image/webp", "webp", width & 0x3FFF, height & 0x3FFF)
    # Lossless: a signature byte, then 14 bits each, minus one.
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        (bits,) = struct.unpack("<I", data[21:25])
        return ImageFacts("image/webp", "webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(data) >= 30:  # extended: the canvas, 24 bits each, minus one
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return ImageFacts("image/webp", "webp", width, height)
    return None


# Start-of-frame markers carry the dimensions; C4 (Huffman tables), C8 and CC are not frames.
_JPEG_FRAMES: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers without a length: TEM and the restart markers (D0-D7); SOI and EOI.
_JPEG_BARE: Final = frozenset({0x01, *range(0xD0, 0xDA)})


def _jpeg(data: bytes) -> ImageFacts | None:
    if not data.startswith(b"\xff\xd8\xff"):
        return None
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return None  # not a marker where one must be: damaged
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _JPEG_BARE:
            position += 2
            continue
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if marker in _JPEG_FRAMES:
            if position + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return ImageFacts("image/jpeg", "jpg", width, height)
        if length < 2:
            return None
        position += 2 + length
    return None


def _looks_like_svg(data: bytes) -> bool:
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return head.startswith((b"<svg", b"<?xml", b"<!doctype svg")) or b"<svg" in head


def _printable(name: str) -> str:
    return "".join(char for char in name if char.isprintable())


def _size_words(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):g} MB"
    if size >= 1024:
        return f"{size / 1024:g} KB"
    return f"{size} bytes"
