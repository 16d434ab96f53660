"""Which table store the tests' servers run on: `PW_TEST_STORE` in the test run's environment.

- `lmdb` (the default): the tables in the spool's LMDB environment, as `make serve` runs;
- `lmdb-apart`: the tables in an LMDB environment of their own, so every batch that spans a
  message and its records crosses the two-store protocol (`store/two_stores.py`);
- `postgresql`: the tables in PostgreSQL, one database per server, on one PostgreSQL cluster per
  test process, started on first use and destroyed when the process exits.
"""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path

import lmdb

from postwire.store.two_stores import LOCAL_TABLES
from tests.postgres_server import PostgresServer

STORE_ENV = "PW_TEST_STORE"
STORES = ("lmdb", "lmdb-apart", "postgresql")

_postgres: PostgresServer | None = None
_postgres_lock = threading.Lock()


def store_under_test() -> str:
    which = os.environ.get(STORE_ENV, "lmdb")
    if which not in STORES:
        raise ValueError(f"{STORE_ENV} must be one of {', '.join(STORES)}, not {which!r}")
    return which


def shared_postgres() -> PostgresServer:
    """This test process's PostgreSQL cluster, started on first use."""
    global _postgres
    with _postgres_lock:
        if _postgres is None:
            server = PostgresServer()
            server.start()
            atexit.register(server.destroy)
            _postgres = server
        return _postgres


def store_table(data_dir: Path, which: str | None = None) -> str:
    """The `[store]` table of the config of a new server on `data_dir` (empty: the embedded
    default); `table_rows` then reads that server's tables."""
    which = which or store_under_test()
    if which == "lmdb-apart":
        remember_store(data_dir, which, "tables")
        return '\n[store]\npath = "tables"\n'
    if which == "postgresql":
        url = shared_postgres().create_database()
        remember_store(data_dir, which, url)
        return f'\n[store]\nbackend = "postgresql"\nurl = "{url}"\n'
    return ""


_stores: dict[Path, tuple[str, str]] = {}


def remember_store(data_dir: Path, which: str, location: str) -> None:
    _stores[data_dir.absolute()] = (which, location)


def table_rows(data_dir: Path, table: str, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
    """The rows of `table` whose key starts with `prefix`, in key order, of the server whose
    data directory is `data_dir` (stopped), read without Postwire's code: with the `lmdb`
    package from the environment that holds the table, or with `psql` from PostgreSQL."""
    which, location = _stores.get(data_dir.absolute(), ("lmdb", ""))
    if which == "postgresql" and table not in LOCAL_TABLES:
        database = location.rsplit("/", 1)[-1]
        lines = shared_postgres().psql(
            f"SELECT encode(k, 'hex') || ' ' || encode(v, 'hex') FROM postwire.{table} "
            f"WHERE substring(k from 1 for {len(prefix)}) = '\\x{prefix.hex()}'::bytea ORDER BY k",
            database,
        )
        pairs = (line.split(" ") for line in lines.splitlines() if line)
        return [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in pairs]
    apart = which == "lmdb-apart" and table not in LOCAL_TABLES
    env = lmdb.open(
        str(data_dir / ("tables" if apart else "spool")), readonly=True, lock=False, max_dbs=128
    )
    try:
        db = env.open_db(table.encode(), create=False)
        with env.begin() as txn:
            rows = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)]
    finally:
        env.close()
    return [(k, v) for k, v in rows if k.startswith(prefix)]
