"""Signed links (attachment downloads, shared emails) open until they expire and never for
another kind; `expires_in` reads the contract's durations, up to 48 hours."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.api.email_shares import MAX_SHARE_SECONDS, parse_expires_in
from postwire.errors import ApiError
from postwire.public_links import open_link, sign_link
from postwire.store.spool import TABLES, Spool

NOW_MS = 1_800_000_000_000


async def test_a_link_opens_until_it_expires_and_only_for_its_kind(tmp_path: Path) -> None:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        token = await sign_link(spool, "share", ["a", "b"], NOW_MS + 1000)
        assert await open_link(spool, "share", token, NOW_MS) == ["a", "b"]
        assert await open_link(spool, "share", token, NOW_MS + 999) == ["a", "b"]
        assert await open_link(spool, "share", token, NOW_MS + 1000) is None  # expired
        assert await open_link(spool, "attachment", token, NOW_MS) is None  # another kind
        payload, tag = token.split(".")
        # The tag's first character changed: its last one also holds bits that decoding drops,
        # so changing it can leave the tag as it was.
        altered_tag = ("B" if tag[0] == "A" else "A") + tag[1:]
        for forged in (payload + "x." + tag, payload + "." + altered_tag, "x", "", "a.b.c"):
            assert await open_link(spool, "share", forged, NOW_MS) is None
        nursery.cancel_scope.cancel()
    await spool.close()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(None, MAX_SHARE_SECONDS), ("10m", 600), ("2 hours", 7200), ("1 day", 86400),
     ("48h", MAX_SHARE_SECONDS), ("90 Seconds", 90)],
)  # fmt: skip
def test_expires_in_reads_durations(text: str | None, seconds: int) -> None:
    assert parse_expires_in(text) == seconds


@pytest.mark.parametrize("text", ["49h", "3 days", "0m", "soon", "10", "", 5, "-1h", "1 fortnight"])
def test_expires_in_refuses_the_rest(text: object) -> None:
    with pytest.raises(ApiError) as refused:
        parse_expires_in(text)
    assert (refused.value.status, refused.value.name) == (422, "validation_error")
