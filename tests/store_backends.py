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


def store_table(which: str | None = None) -> str:
    """The `[store]` table of a new server's config (empty: the embedded default)."""
    which = which or store_under_test()
    if which == "lmdb-apart":
        return '\n[store]\npath = "tables"\n'
    if which == "postgresql":
        url = shared_postgres().create_database()
        return f'\n[store]\nbackend = "postgresql"\nurl = "{url}"\n'
    return ""
