"""What only the PostgreSQL backend of the table store has: a server that goes away and comes
back, a schema version to check, and the refusal of spool operations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from postwire import _core
from postwire._core import WriteBatch
from postwire.errors import ConflictError, SpoolError, StoreUnavailableError
from postwire.store.spool import Spool
from postwire.store.table_store import open_table_store
from tests.ports import free_port
from tests.postgres_server import PostgresServer, running_postgres
from tests.store.conftest import TEST_TABLES


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A server of this test's own: it is stopped and started again."""
    with running_postgres() as server:
        yield server


def one_put(key: bytes, value: bytes) -> WriteBatch:
    batch = WriteBatch()
    batch.put("emails", key, value)
    return batch


async def test_a_stopped_server_is_unavailable_and_the_same_store_works_when_it_returns(
    own_postgres: PostgresServer,
) -> None:
    async with open_table_store("postgresql", own_postgres.url(), TEST_TABLES) as tables:
        await tables.commit(one_put(b"before", b"1"))
        own_postgres.stop(immediate=True)
        with pytest.raises(StoreUnavailableError, match="unreachable"):
            await tables.aget("emails", b"before")
        with pytest.raises(StoreUnavailableError, match="unreachable"):
            await tables.commit(one_put(b"during", b"2"))
        with pytest.raises(StoreUnavailableError):
            await tables.ascan("emails")

        own_postgres.start()
        assert await tables.aget("emails", b"before") == b"1"
        await tables.commit(one_put(b"after", b"3"))
        assert [k for k, _ in await tables.ascan("emails")] == [b"after", b"before"]
        assert await tables.acount("emails") == 2


def test_a_batch_with_a_spool_operation_is_refused_whole(postgres_url: str) -> None:
    # The core itself: through the service's door, a message goes to the node's spool.
    tables = _core.PgTables(postgres_url, tables=list(TEST_TABLES))
    batch = one_put(b"k", b"v")
    batch.enqueue("message-1", b"body", 0, 0)
    with pytest.raises(SpoolError, match="table operations only"):
        tables.commit(batch)
    assert tables.get("emails", b"k") is None
    tables.close()


async def test_an_unknown_table_is_refused(postgres_url: str) -> None:
    async with open_table_store("postgresql", postgres_url, TEST_TABLES) as tables:
        batch = WriteBatch()
        batch.put("nope", b"k", b"v")
        with pytest.raises(SpoolError, match="unknown spool table 'nope'"):
            await tables.commit(batch)
        with pytest.raises(SpoolError, match="unknown spool table 'nope'"):
            await tables.aget("nope", b"k")


def test_the_schema_is_versioned_and_a_newer_one_is_refused(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    database = postgres_url.rsplit("/", 1)[1]
    _core.PgTables(postgres_url, tables=list(TEST_TABLES)).close()
    version = postgres_server.psql("SELECT version FROM postwire._schema_version", database)
    assert version.strip() == str(_core.TABLE_SCHEMA_VERSION)
    tables = postgres_server.psql(
        "SELECT table_name || ' ' || string_agg(column_name || ':' || data_type, ',' "
        "ORDER BY ordinal_position) FROM information_schema.columns "
        "WHERE table_schema = 'postwire' GROUP BY table_name ORDER BY table_name",
        database,
    )
    assert tables.split("\n")[:3] == [
        "_schema_version version:integer",
        "counters k:bytea,v:bytea",
        "emails k:bytea,v:bytea",
    ]
    # Opening again (another process, a restart) leaves one version row.
    _core.PgTables(postgres_url, tables=list(TEST_TABLES)).close()
    count = postgres_server.psql("SELECT count(*) FROM postwire._schema_version", database)
    assert count.strip() == "1"

    newer = _core.TABLE_SCHEMA_VERSION + 1
    postgres_server.psql(f"UPDATE postwire._schema_version SET version = {newer}", database)
    with pytest.raises(SpoolError, match=f"version {newer}, newer than this Postwire knows"):
        _core.PgTables(postgres_url, tables=list(TEST_TABLES))


def test_an_unreachable_server_fails_the_open_with_store_unavailable() -> None:
    with pytest.raises(StoreUnavailableError, match="unreachable"):
        _core.PgTables(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres", tables=["emails"])


async def test_two_stores_asserting_a_key_absent_never_both_write_it(postgres_url: str) -> None:
    """Two stores (as two nodes: separate connections and transactions) race to create the same
    keys under an assertion of absence: for each key exactly one wins."""
    wins = {"first": 0, "second": 0}

    async def claim(tables: Spool, name: str, key: bytes) -> None:
        batch = WriteBatch()
        batch.assert_value("meta", key, None)
        batch.put("meta", key, name.encode())
        batch.add_counter("counters", b"claims", 1)
        try:
            await tables.commit(batch)
            wins[name] += 1
        except ConflictError:
            pass

    async with (
        open_table_store("postgresql", postgres_url, TEST_TABLES) as first,
        open_table_store("postgresql", postgres_url, TEST_TABLES) as second,
        trio.open_nursery() as nursery,
    ):
        for i in range(60):
            key = f"owner/{i:02d}".encode()
            nursery.start_soon(claim, first, "first", key)
            nursery.start_soon(claim, second, "second", key)
    async with open_table_store("postgresql", postgres_url, TEST_TABLES) as tables:
        rows = await tables.ascan("meta", prefix=b"owner/", limit=100)
        assert len(rows) == 60
        assert sum(wins.values()) == 60
        assert await tables.acounter("counters", b"claims") == 60
        assert sorted(v.decode() for _, v in rows).count("first") == wins["first"]
