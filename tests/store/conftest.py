"""Fixtures of the table store's tests: one PostgreSQL per test process, and each test's store
on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal, cast

import pytest

from postwire.store.spool import Spool
from postwire.store.table_store import open_table_store
from tests.postgres_server import PostgresServer, running_postgres

# The tables the conformance tests write (a few of Postwire's own names).
TEST_TABLES = ("emails", "counters", "meta")

Backend = Literal["lmdb", "postgresql"]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Debian's PostgreSQL 15 on a loopback port, for the whole test process."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A new, empty database of the shared server: tests do not see each other's rows."""
    return postgres_server.create_database()


@pytest.fixture(params=["lmdb", "postgresql"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return cast(Backend, request.param)


@pytest.fixture
def store_location(backend: Backend, tmp_path: Path, postgres_server: PostgresServer) -> str:
    """Where the test's store lives: an LMDB directory or a PostgreSQL URL."""
    if backend == "lmdb":
        return str(tmp_path / "spool")
    return postgres_server.create_database()


@pytest.fixture
async def tables(backend: Backend, store_location: str) -> AsyncIterator[Spool]:
    """The test's table store, on each backend in turn."""
    async with open_table_store(backend, store_location, TEST_TABLES) as store:
        yield store
