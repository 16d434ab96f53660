"""Idempotency records: replay, body mismatch, in-flight guard, expiry and its sweep."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.errors import ApiError
from postwire.store.idempotency import (
    RETENTION_MS,
    IdempotencyKeys,
    IdempotencyScope,
    body_fingerprint,
    delete_expired,
    validate_key,
)
from postwire.store.spool import TABLES, Spool

SCOPE = IdempotencyScope("team", "POST /emails", "order-1")


async def test_replay_mismatch_in_flight_and_expiry(tmp_path: Path) -> None:
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    keys = IdempotencyKeys(spool)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        fingerprint = body_fingerprint({"to": "a@b.c", "subject": "s"})
        assert fingerprint == body_fingerprint({"subject": "s", "to": "a@b.c"})
        assert keys.replay(SCOPE, fingerprint, now_ms=1_000) is None

        with keys.in_flight(SCOPE):
            with pytest.raises(ApiError) as concurrent, keys.in_flight(SCOPE):
                pass
            assert concurrent.value.name == "concurrent_idempotent_requests"
            assert concurrent.value.status == 409
            batch = _core.WriteBatch()
            keys.record(batch, SCOPE, fingerprint, 200, {"id": "e1"}, now_ms=1_000)
            await spool.commit(batch)
        with keys.in_flight(SCOPE):  # released after the request
            pass

        stored = keys.replay(SCOPE, fingerprint, now_ms=2_000)
        assert stored is not None and stored.response == {"id": "e1"}
        with pytest.raises(ApiError) as mismatch:
            keys.replay(SCOPE, body_fingerprint({"other": 1}), now_ms=2_000)
        assert (mismatch.value.status, mismatch.value.name) == (409, "invalid_idempotent_request")
        other_team = IdempotencyScope("team2", "POST /emails", "order-1")
        assert keys.replay(other_team, fingerprint, now_ms=2_000) is None

        expired_at = 1_000 + RETENTION_MS
        assert keys.replay(SCOPE, fingerprint, now_ms=expired_at) is None
        assert await delete_expired(spool, now_ms=expired_at - 1) == 0
        assert await delete_expired(spool, now_ms=expired_at) == 1
        nursery.cancel_scope.cancel()
    await spool.close()


@pytest.mark.parametrize("key", ["", "k" * 257])
def test_key_length_is_checked(key: str) -> None:
    with pytest.raises(ApiError) as refused:
        validate_key(key)
    assert (refused.value.status, refused.value.name) == (400, "invalid_idempotency_key")
    assert validate_key("k" * 256) == "k" * 256


def test_the_fingerprint_ignores_key_order_and_spacing_but_not_content() -> None:
    body = {"from": "a@b.test", "to": "c@d.test", "subject": "Hi", "tags": [{"name": "a"}]}
    reordered = dict(reversed(list(body.items())))
    assert body_fingerprint(body) == body_fingerprint(reordered)
    assert body_fingerprint(body) != body_fingerprint({**body, "subject": "Hello!"})
    # Unknown fields count: the body is compared as a whole.
    assert body_fingerprint(body) != body_fingerprint({**body, "x": 1})
    # Lone surrogates (valid JSON escapes) do not break it.
    assert len(body_fingerprint({"subject": "\ud800"})) == 64
