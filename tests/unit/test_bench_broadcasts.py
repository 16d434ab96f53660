"""The broadcast benchmark's own arithmetic: percentiles, the messages a segment should get,
thread names grouped, disk counters subtracted."""

from __future__ import annotations

import pytest
from benchmarks.broadcasts.content import is_unsubscribed, mailed
from benchmarks.broadcasts.disk import DiskReading
from benchmarks.broadcasts.latency import Latencies
from benchmarks.broadcasts.threads import thread_kind


@pytest.mark.parametrize(
    ("seconds", "share", "expected_ms"),
    [
        ([], 0.99, 0.0),
        ([0.010], 0.99, 10.0),
        ([0.001 * n for n in range(1, 101)], 0.99, 99.0),
        ([0.001 * n for n in range(1, 101)], 0.50, 50.0),
        ([0.001 * n for n in range(1, 201)], 0.99, 198.0),
        ([0.3, 0.1, 0.2], 0.50, 200.0),  # unordered input
    ],
)
def test_percentile_is_nearest_rank(seconds: list[float], share: float, expected_ms: float) -> None:
    assert Latencies(seconds, 0, 1.0).percentile(share) == pytest.approx(expected_ms)


@pytest.mark.parametrize("contacts", [0, 1, 99, 100, 101, 1000, 12345])
def test_mailed_counts_the_contacts_not_unsubscribed(contacts: int) -> None:
    assert mailed(contacts) == sum(1 for n in range(contacts) if not is_unsubscribed(n))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Trio thread 12", "Trio worker threads"),
        ("sign_chunk from", "Trio worker threads"),
        ("_sign_all from", "Trio worker threads"),
        ("python", "python"),
        ("postwire-spool-", "postwire-spool-"),
        ("worker 3", "worker N"),
    ],
)
def test_thread_kind(name: str, kind: str) -> None:
    assert thread_kind(name) == kind


def test_disk_reading_since_subtracts_every_counter() -> None:
    before = DiskReading("vda", 100, 4096, 3, 9)
    after = DiskReading("vda", 350, 12288, 5, 20)
    assert after.since(before) == DiskReading("vda", 250, 8192, 2, 11)
