"""`postwire backup DIR` and `postwire restore DIR`: a consistent copy of a data directory,
taken while the service runs, and its return into a stopped one.

A backup holds the spool as one compacted LMDB file written by the Rust core from a single read
transaction (`Spool.copy_to`: every table, the queue and the message bodies as of one commit,
while the service goes on writing), the other files of the data directory (the generated SMTP
certificate), the config file, and a manifest with each file's size and SHA-256. It is written
under `DIR.partial` and renamed to `DIR` once complete, so a `DIR` is always a whole backup.

A restore checks every file against the manifest, refuses a data directory that a process has
open (LMDB holds a lock on the spool's `lock.mdb` for as long as it is open) and one that holds
Postwire data already unless forced, moves each file into place with a rename, and opens the
restored spool once to prove it, deleting there the record of the service the backup was taken
from (`store.running_service`): a `serve` on the restored directory starts at once, even while
that service still runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from fcntl import F_GETLK, F_UNLCK, F_WRLCK, fcntl
from pathlib import Path
from typing import Any

import trio

import postwire
from postwire.config import Config
from postwire.errors import PostwireError
from postwire.store.running_service import forget_service_record
from postwire.store.spool import serve_spool

MANIFEST = "postwire-backup.json"
log = logging.getLogger("postwire.backup")

BACKUP_FORMAT = 1
SPOOL_DIR = "spool"
SPOOL_FILE = f"{SPOOL_DIR}/data.mdb"
# Files of a live spool that are not data: LMDB's reader table, and the lock file earlier
# versions kept beside it. They are made afresh when the spool opens.
SPOOL_RUNTIME_FILES = frozenset({"lock.mdb", "records.lock"})
CONFIG_DIR = "config"
COPY_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class BackupSummary:
    directory: Path
    files: int
    bytes: int
    emails: int
    queued: int


async def back_up(config: Config, target: Path) -> BackupSummary:
    """Write a backup of `config.data_dir` to `target` (absent or an empty directory)."""
    target = target.absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise PostwireError(f"{target} exists and is not an empty directory: choose a new one")
    staging = target.with_name(target.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)  # an earlier backup that did not finish
    (staging / SPOOL_DIR).mkdir(mode=0o700, parents=True)
    os.chmod(staging, 0o700)  # DKIM private keys and API key hashes are in it
    tables_dir = _tables_dir(config)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        await trio.to_thread.run_sync(spool.copy_to, staging / SPOOL_FILE)
        os.chmod(staging / SPOOL_FILE, 0o600)
        if tables_dir is not None:
            # The tables' own LMDB environment: a consistent copy, as the spool's.
            (staging / tables_dir).mkdir(mode=0o700, parents=True)
            copy = staging / tables_dir / "data.mdb"
            await trio.to_thread.run_sync(spool.copy_tables_to, copy)
        emails, queued = spool.count("emails"), spool.message_count()
        nursery.cancel_scope.cancel()
    if config.store.backend == "postgresql":
        log.warning(
            "the tables are in PostgreSQL, not in this backup: back them up with pg_dump "
            "(docs/storage.md, Backups)"
        )
    await trio.to_thread.run_sync(_copy_other_files, config, staging, tables_dir)
    files = await trio.to_thread.run_sync(_describe_files, staging)
    manifest = {
        "format": BACKUP_FORMAT,
        "postwire_version": postwire.__version__,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "data_dir": str(config.data_dir),
        "config_file": None if config.config_file is None else str(config.config_file),
        "emails": emails,
        "queued_messages": queued,
        "files": files,
    }
    _write_durably(staging / MANIFEST, json.dumps(manifest, indent=2).encode() + b"\n")
    if target.exists():
        target.rmdir()
    os.rename(staging, target)
    _sync_directory(target.parent)
    return BackupSummary(target, len(files), sum(f["bytes"] for f in files), emails, queued)


def _tables_dir(config: Config) -> Path | None:
    """Where the tables' own LMDB environment is, relative to the data directory (`store.path`);
    None when they share the spool's or live in PostgreSQL."""
    if config.store.backend != "lmdb" or not config.store.path:
        return None
    path = (config.data_dir / config.store.path).absolute()
    try:
        return path.relative_to(config.data_dir.absolute())
    except ValueError:
        raise PostwireError(
            f"store.path {config.store.path!r} is outside the data directory: back it up "
            "with the data directory's own tools, or move it inside"
        ) from None


def _copy_other_files(config: Config, staging: Path, tables_dir: Path | None) -> None:
    """Every file of the data directory beside the spool (and the tables' own environment,
    copied apart), and the config file."""
    source = config.data_dir
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if relative.parts[0] == SPOOL_DIR or not path.is_file():
            continue
        if tables_dir is not None and relative.is_relative_to(tables_dir):
            continue
        destination = staging / relative
        destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copy2(path, destination)
    if config.config_file is not None:
        (staging / CONFIG_DIR).mkdir(mode=0o700, exist_ok=True)
        shutil.copy2(config.config_file, staging / CONFIG_DIR / config.config_file.name)


def _describe_files(root: Path) -> list[dict[str, Any]]:
    described = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            _fsync_file(path)
            described.append(
                {
                    "path": path.relative_to(root).as_posix(),
                    "bytes": path.stat().st_size,
                    "sha256": _sha256(path),
                }
            )
    return described


@dataclass(frozen=True, slots=True)
class RestoreSummary:
    data_dir: Path
    backup_version: str
    created_at: str
    emails: int
    queued: int
    config_file: str | None


async def restore(config: Config, source: Path, *, force: bool) -> RestoreSummary:
    """Put the backup in `source` into `config.data_dir`, which no process may have open."""
    source = source.absolute()
    manifest = _read_manifest(source)
    data_dir = config.data_dir
    holder = spool_holder(data_dir)
    if holder is not None:
        raise PostwireError(
            f"process {holder} has the spool in {data_dir} open: stop Postwire (and every "
            "`postwire` command on that data directory) before restoring into it"
        )
    if (data_dir / SPOOL_FILE).exists() and not force:
        raise PostwireError(
            f"{data_dir} holds Postwire data already: restore into an empty data directory, "
            "or pass --force to replace its data with the backup's"
        )
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # private, as `serve` makes it
    staging = data_dir / ".restoring"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(mode=0o700)
    entries = [e for e in manifest["files"] if not e["path"].startswith(f"{CONFIG_DIR}/")]
    await trio.to_thread.run_sync(_stage_verified, source, staging, entries)
    for entry in entries:
        destination = data_dir / entry["path"]
        destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.replace(staging / entry["path"], destination)
        _sync_directory(destination.parent)
    shutil.rmtree(staging)
    # The replaced spool's reader table described another file; the next opener makes a new one.
    (data_dir / SPOOL_DIR / "lock.mdb").unlink(missing_ok=True)
    tables_dir = _tables_dir(config)
    if tables_dir is not None:
        (data_dir / tables_dir / "lock.mdb").unlink(missing_ok=True)
    async with trio.open_nursery() as nursery:  # opens, so proves, the restored spool
        spool = await nursery.start(serve_spool, config)
        # The copy's record of the service it was taken from names a process that does not
        # run on this directory (none may: checked above), so a start here does not wait.
        await forget_service_record(spool)
        emails, queued = spool.count("emails"), spool.message_count()
        nursery.cancel_scope.cancel()
    return RestoreSummary(
        data_dir,
        str(manifest["postwire_version"]),
        str(manifest["created_at"]),
        emails,
        queued,
        manifest.get("config_file"),
    )


def _read_manifest(source: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((source / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise PostwireError(
            f"{source} is not a Postwire backup (no {MANIFEST}; an interrupted backup is left "
            "as DIR.partial)"
        ) from None
    except (OSError, ValueError) as exc:
        raise PostwireError(f"cannot read {source / MANIFEST}: {exc}") from None
    if manifest.get("format") != BACKUP_FORMAT:
        raise PostwireError(
            f"{source} is a backup of format {manifest.get('format')!r}; this Postwire "
            f"({postwire.__version__}) reads format {BACKUP_FORMAT}"
        )
    if not any(entry["path"] == SPOOL_FILE for entry in manifest["files"]):
        raise PostwireError(f"{source} holds no spool ({SPOOL_FILE})")
    return dict(manifest)


def _stage_verified(source: Path, staging: Path, entries: list[dict[str, Any]]) -> None:
    """Copy each file of the backup under `staging`, checking its size and SHA-256 as it goes."""
    for entry in entries:
        relative = Path(entry["path"])
        if relative.is_absolute() or ".." in relative.parts:
            raise PostwireError(f"the backup names a file outside it: {entry['path']!r}")
        destination = staging / relative
        destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        digest = hashlib.sha256()
        size = 0
        with (source / relative).open("rb") as reader, destination.open("wb") as writer:
            while chunk := reader.read(COPY_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                writer.write(chunk)
            writer.flush()
            os.fsync(writer.fileno())
        shutil.copymode(source / relative, destination)
        if size != entry["bytes"] or digest.hexdigest() != entry["sha256"]:
            raise PostwireError(
                f"{source / relative} does not match the backup's manifest (damaged or "
                "changed since): nothing was restored"
            )


def spool_holder(data_dir: Path) -> int | None:
    """The pid of a process that has the spool under `data_dir` open, if any.

    Every process with an LMDB environment open holds POSIX record locks on its `lock.mdb`
    (a shared lock on its first byte, and one on the byte at its pid), so asking whether an
    exclusive lock of the whole file would conflict finds one of them, or none.
    """
    lock_path = data_dir / SPOOL_DIR / "lock.mdb"
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        # struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t.
        request = struct.pack("hhqqi", F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl(fd, F_GETLK, request + bytes(8))
        l_type, _, _, _, pid = struct.unpack("hhqqi", answer[: struct.calcsize("hhqqi")])
    finally:
        os.close(fd)
    return None if l_type == F_UNLCK else pid


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as reader:
        while chunk := reader.read(COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _write_durably(path: Path, content: bytes) -> None:
    with path.open("wb") as writer:
        writer.write(content)
        writer.flush()
        os.fsync(writer.fileno())


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_directory(path: Path) -> None:
    """Make the renames in `path` durable."""
    _fsync_file(path)
