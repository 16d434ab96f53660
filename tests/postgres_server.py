"""Debian's PostgreSQL 15 for tests and benchmarks: a cluster in a temporary directory on a free
loopback port, made by `initdb` and run by `pg_ctl`.

initdb and the server refuse to run as root, so when the tests run as root (CI does) they run
as the `postgres` system user that Debian's package creates, and the directory is given to it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.peers import require_peer
from tests.ports import free_port

BIN = Path("/usr/lib/postgresql/15/bin")
# Ports picked free may be taken before the server binds; a few picks settle it.
START_ATTEMPTS = 3


def postgres_binaries() -> Path | None:
    """The directory of initdb, pg_ctl and psql, if PostgreSQL 15 is installed."""
    return BIN if (BIN / "initdb").exists() and (BIN / "pg_ctl").exists() else None


class PostgresServerError(RuntimeError):
    pass


class PostgresServer:
    """One PostgreSQL cluster. `url(database)` is how Postwire reaches it; `create_database`
    gives each test a database of its own; `stop(immediate=True)` is a crash as clients see one
    (connections cut, no checkpoint), and `start` brings the same cluster back on the same port.

    `durable=False` turns fsync off, for tests that do not measure or crash the machine.
    """

    def __init__(self, *, durable: bool = False) -> None:
        if postgres_binaries() is None:
            raise PostgresServerError(
                "PostgreSQL 15 not found (Debian: apt-get install postgresql-15)"
            )
        self.directory = Path(tempfile.mkdtemp(prefix="postgres-"))
        self.data = self.directory / "data"
        self.durable = durable
        self.port = 0
        self._databases = 0
        self._as_postgres = os.getuid() == 0
        if self._as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args],
            user="postgres" if self._as_postgres else None,
            cwd=self.directory,
            capture_output=True,
            text=True,
            check=False,
        )

    def _checked(self, *args: str | Path) -> str:
        done = self._run(*args)
        if done.returncode != 0:
            raise PostgresServerError(
                f"{Path(str(args[0])).name} failed: {done.stderr or done.stdout}"
            )
        return done.stdout

    def start(self) -> None:
        """Create the cluster on first start, then run it (on the port it had, if it had one)."""
        if not (self.data / "PG_VERSION").exists():
            self._checked(
                BIN / "initdb",
                "-D",
                self.data,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            )
        error = ""
        for _ in range(START_ATTEMPTS if self.port == 0 else 1):
            port = self.port or free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories='' "
                f"-c fsync={'on' if self.durable else 'off'} -c max_connections=200"
            )
            done = self._run(
                BIN / "pg_ctl",
                "start",
                "-w",
                "-D",
                self.data,
                "-l",
                self.directory / "server.log",
                "-o",
                options,
            )
            if done.returncode == 0:
                self.port = port
                return
            error = done.stderr or done.stdout
        raise PostgresServerError(f"PostgreSQL did not start: {error}\n{self.log()}")

    def stop(self, *, immediate: bool = False) -> None:
        mode = "immediate" if immediate else "fast"
        self._run(BIN / "pg_ctl", "stop", "-w", "-D", self.data, "-m", mode)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` with psql; its unaligned, tuples-only output."""
        return self._checked(
            BIN / "psql",
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            self.url(database),
            "-c",
            sql,
        )

    def create_database(self) -> str:
        """A new empty database; its URL."""
        self._databases += 1
        name = f"test_{self._databases}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def log(self) -> str:
        path = self.directory / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A started server, destroyed at the end; a test fails (never skips) without PostgreSQL."""
    require_peer(postgres_binaries(), "PostgreSQL 15 (initdb, pg_ctl)", "postgresql-15")
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.destroy()
