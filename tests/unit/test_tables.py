"""Typed records encode and decode across versions (no spool: the codec alone)."""

from __future__ import annotations

import orjson

from postwire.store.deliveries import SUPPRESSIONS, SuppressionRecord


def test_a_record_round_trips() -> None:
    record = SuppressionRecord("s1", "ann@example.org", "bounce", 1_800_000_000_000, "e1")
    assert SUPPRESSIONS.decode(SUPPRESSIONS.encode(record)) == record


def test_fields_of_a_newer_version_are_dropped_and_missing_ones_defaulted() -> None:
    newer = {"id": "s1", "email": "ann@example.org", "origin": "manual", "created_at_ms": 1,
             "reason": "a field this version does not know"}  # fmt: skip
    assert SUPPRESSIONS.decode(orjson.dumps(newer)) == SuppressionRecord(
        "s1", "ann@example.org", "manual", 1, source_id=None
    )
