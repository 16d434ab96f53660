"""The values inside a broadcast document, checked one at a time: each refusal is a
`DocumentError` whose message names where the value is ("Block 3 (button): `url` ...")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from postwire.broadcasts.blocks.brand import MAX_URL_LENGTH
from postwire.errors import PostwireError

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class DocumentError(PostwireError, ValueError):
    """A document is refused; the message says which block and what is wrong, for a person.
    `block_id` and `field` say it to the editor, which marks that control: the innermost block
    the value is in (None: the document as a whole) and the block's key (`url`, `content`,
    `style`, `url-2` for a social link's URL; None: the block as a whole)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.block_id: str | None = None
        self.field: str | None = None


@contextmanager
def located(block_id: str | None = None, field: str | None = None) -> Iterator[None]:
    """Errors raised inside are placed at `block_id` and `field`, unless a place nearer to the
    value (a block inside a column) already set them."""
    try:
        yield
    except DocumentError as error:
        if error.block_id is None:
            error.block_id = block_id
            error.field = error.field or field
        raise


def refuse_unknown(raw: dict[str, object], known: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in known:
            raise DocumentError(f"{where} has an unknown field {shown(key)}.")


def checked_text(value: object, where: str, limit: int) -> str:
    if not isinstance(value, str):
        raise DocumentError(f"{where} must be text.")
    if len(value) > limit:
        raise DocumentError(f"{where} is longer than {limit} characters.")
    if _CONTROL.search(value):
        raise DocumentError(f"{where} holds a control character.")
    return value


def checked_url(value: object, where: str) -> str:
    """A URL as written (checked by content_checks, made safe by the renderer): text without
    blanks inside, of a sane length."""
    url = checked_text(value, where, MAX_URL_LENGTH).strip()
    if any(character.isspace() for character in url):
        raise DocumentError(f"{where} cannot hold spaces or line breaks.")
    return url


def checked_boolean(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise DocumentError(f"{where} must be true or false.")
    return value


def clamped(value: object, bounds: tuple[int, int, int], where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise DocumentError(f"{where} must be a number of pixels.")
    least, most, _ = bounds
    return int(min(max(value, least), most))


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
