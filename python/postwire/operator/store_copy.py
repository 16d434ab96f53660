"""`postwire store copy --to URL`: a node's tables moved from LMDB into PostgreSQL, counted and
checked.

The service must be stopped: the command refuses while a live `postwire serve` holds the data
directory, and holds the directory's claim itself for the length of the copy (the claim `serve`
takes, `store.running_service`), so that a `serve` started meanwhile refuses to run on tables
half copied. Every table of the table store (`spool.shared_tables()`: not the node's own,
`two_stores.LOCAL_TABLES`, which stay in its spool) is copied row by row in key order, a few
thousand rows a commit, into a database whose tables hold no rows (or, with `replace`, once
they were emptied). Then each table is read again on both sides: the row counts and a SHA-256
of every key and value in key order must be equal, or the copy failed. The LMDB copy is only
read: it is left as it was.
"""

from __future__ import annotations

import trio

from postwire.config import Config, env_var_name
from postwire.errors import PostwireError
from postwire.operator.output import table
from postwire.operator.store_access import opened_spool
from postwire.store.running_service import (
    AlreadyRunningError,
    RunningService,
    ServiceProcess,
    claim_data_dir,
    forget_service_record,
    is_alive,
    read_service_record,
)
from postwire.store.spool import Spool
from postwire.store.table_copy import CopyReport, copy_shared_tables

# What the claim of the data directory says while the copy holds it, should a `serve` start.
CLAIM_ADDRESSES = ["no address: `postwire store copy` is moving the tables to PostgreSQL"]


class StoreCopyRefused(PostwireError):
    """The copy cannot start: the service runs, or the config's tables are not in LMDB."""


async def copy_tables(config: Config, url: str, *, replace: bool = False) -> CopyReport:
    """Copy the tables of the stopped service of `config` into the PostgreSQL database at
    `url`, then check every table on both sides (see the module docstring)."""
    if config.store.backend != "lmdb":
        raise StoreCopyRefused(
            f"the tables are in {config.store.backend} already (store.backend): this copies "
            'them out of LMDB, for a config with store.backend = "lmdb"'
        )
    if not (config.data_dir / "spool").is_dir():
        raise StoreCopyRefused(f"no Postwire data in {config.data_dir}: nothing to copy")
    async with opened_spool(config) as spool:
        await _hold_data_dir(spool, config)
        try:
            return await copy_shared_tables(spool, url, replace=replace)
        finally:
            with trio.CancelScope(shield=True):
                await forget_service_record(spool)


async def _hold_data_dir(spool: Spool, config: Config) -> None:
    """Refuse while a service runs on the data directory; else claim it, as `serve` does."""
    _refuse_if_running(spool, config)
    try:
        await claim_data_dir(spool, config, addresses=CLAIM_ADDRESSES)
    except AlreadyRunningError:  # a serve claimed it since the check above
        _refuse_if_running(spool, config)
        raise


def _refuse_if_running(spool: Spool, config: Config) -> None:
    record = read_service_record(spool)
    now_ms = spool.clock_ms()
    live: list[RunningService | ServiceProcess] = [
        row
        for row in [record.claim, *record.processes]
        if row is not None and is_alive(row, now_ms)
    ]
    if live:
        raise StoreCopyRefused(
            f"Postwire runs on the data directory {config.data_dir}: pid {live[0].pid} on host "
            f"{live[0].host}. Stop it first (kill {live[0].pid}, or Ctrl-C where it runs): the "
            "tables are copied from a stopped service, so that none changes during the copy"
        )


def describe_copy(report: CopyReport, config: Config) -> str:
    """The table of counts, and what to do next (or what went wrong)."""
    rows = [
        {
            "table": check.table,
            "lmdb": check.lmdb_rows,
            "postgresql": check.postgresql_rows,
            "sha256": check.postgresql_sha256[:16],
            "check": "ok" if check.matches else "MISMATCH",
        }
        for check in report.tables
    ]
    columns = [("table", "TABLE"), ("lmdb", "LMDB ROWS"), ("postgresql", "POSTGRESQL ROWS"),
               ("sha256", "SHA-256"), ("check", "CHECK")]  # fmt: skip
    total = sum(check.postgresql_rows for check in report.tables)
    lines = [table(rows, columns), ""]
    if report.removed_rows:
        lines.append(f"{report.removed_rows} rows that the database held were deleted first.")
    if report.mismatched:
        lines.append(
            f"The copy in {report.url} does NOT match the LMDB tables in: "
            f'{", ".join(report.mismatched)}. Keep store.backend = "lmdb"; run the copy again '
            "with --replace once nothing else writes to that database."
        )
        return "\n".join(lines)
    source = config.store.path or "the spool"
    lines += [
        f"{len(report.tables)} tables, {total} rows copied into {report.url}; every table's "
        "rows and SHA-256 match.",
        f"The LMDB tables (in {source} under {config.data_dir}) are left as they were.",
        "Next, in the config file, then start `postwire serve`:",
        "",
        "    [store]",
        '    backend = "postgresql"',
        f'    url = "{report.url}"',
        "",
        *(["(with the password in place of ***)", ""] if "***@" in report.url else []),
        f"or set {env_var_name('store.backend')}=postgresql and "
        f"{env_var_name('store.url')}=<the URL given to --to>.",
    ]
    return "\n".join(lines)
