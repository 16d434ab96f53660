"""Pool sizing: connections grow with the queue, at least one when anything waits, capped."""

from pathlib import Path

import pytest

from postwire.config import Config, DeliveryConfig
from postwire.delivery.pool_sizing import connections_to_open, ideal_connection_count
from postwire.delivery.site_pool import connections_per_process


@pytest.mark.parametrize(
    ("depth", "max_connections", "per_connection", "expected"),
    [
        (0, 10, 50, 0),  # nothing queued: no connection
        (1, 10, 50, 1),  # anything queued: at least one
        (49, 10, 50, 1),
        (50, 10, 50, 1),
        (51, 10, 50, 2),
        (250, 10, 50, 5),
        (499, 10, 50, 10),
        (500, 10, 50, 10),
        (100_000, 10, 50, 10),  # capped
        (5, 1, 50, 1),
        (3, 10, 1, 3),  # never more connections than messages
        (30, 10, 1, 10),
        (7, 10, 2, 4),
    ],
)
def test_ideal_connection_count(
    depth: int, max_connections: int, per_connection: int, expected: int
) -> None:
    assert (
        ideal_connection_count(
            depth, max_connections=max_connections, messages_per_connection=per_connection
        )
        == expected
    )


def test_default_is_fifty_messages_per_connection() -> None:
    assert ideal_connection_count(101, max_connections=10) == 3


def test_grows_monotonically_with_the_queue() -> None:
    counts = [ideal_connection_count(depth, max_connections=10) for depth in range(0, 1000)]
    assert counts == sorted(counts)


@pytest.mark.parametrize(
    ("depth", "max_connections", "per_connection"),
    [(-1, 10, 50), (10, 0, 50), (10, 10, 0)],
)
def test_invalid_arguments(depth: int, max_connections: int, per_connection: int) -> None:
    with pytest.raises(ValueError):
        ideal_connection_count(
            depth, max_connections=max_connections, messages_per_connection=per_connection
        )


@pytest.mark.parametrize(
    ("depth", "open_connections", "expected"),
    [(0, 0, 0), (0, 3, 0), (120, 0, 3), (120, 1, 2), (120, 3, 0), (120, 5, 0), (10_000, 4, 6)],
)
def test_connections_to_open(depth: int, open_connections: int, expected: int) -> None:
    assert connections_to_open(depth, open_connections, max_connections=10) == expected


@pytest.mark.parametrize(
    ("limit", "processes", "share"), [(10, 1, 10), (10, 2, 5), (10, 3, 3), (1, 4, 1), (50, 2, 25)]
)
def test_each_process_takes_its_share_of_the_site_limit(
    tmp_path: Path, limit: int, processes: int, share: int
) -> None:
    config = Config(
        data_dir=tmp_path,
        processes=processes,
        delivery=DeliveryConfig(helo_name="mx.test", max_connections_per_site=limit),
    )
    assert connections_per_process(config) == share
