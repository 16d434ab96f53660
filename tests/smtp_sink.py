"""Postfix's `smtp-sink` on a loopback port: a real SMTP peer that accepts everything and,
when given a directory, dumps each message it receives there."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.ports import free_port

SMTP_SINK_SEARCH_PATH = "/usr/sbin:/usr/bin:/sbin"
# What `smtp-sink -d` writes before each message: the envelope and its own Received header.
_DUMP_FIELDS = ("X-Client-Addr", "X-Client-Proto", "X-Helo-Args", "X-Mail-Args", "X-Rcpt-Args")


def smtp_sink_binary() -> str | None:
    return shutil.which("smtp-sink", path=SMTP_SINK_SEARCH_PATH)


@dataclass(frozen=True)
class SunkMessage:
    mail_from: str
    rcpt_tos: list[str]
    content: bytes  # the message as received, CRLF line ends, smtp-sink's own lines removed


@contextmanager
def dump_directory() -> Iterator[Path]:
    """A directory for `smtp-sink -d`, removed afterwards. Outside pytest's temporary
    directories, which `nobody` (whom smtp-sink runs as under root) cannot enter."""
    directory = Path(tempfile.mkdtemp(prefix="postwire-sink-"))
    directory.chmod(0o777)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def running_smtp_sink(dump_dir: Path | None = None) -> Iterator[tuple[str, int]]:
    """`smtp-sink` listening on a free loopback port until the block ends. With `dump_dir`
    (writable by `nobody`: smtp-sink drops to it when run as root) every message is kept."""
    binary = smtp_sink_binary()
    if binary is None:
        raise RuntimeError("Postfix's smtp-sink is not installed: apt-get install -y postfix")
    port = free_port()
    # As root, smtp-sink insists on dropping privileges to a named user.
    as_user = ["-u", "nobody"] if os.geteuid() == 0 else []
    dump = ["-d", f"{dump_dir}/%M."] if dump_dir is not None else []
    process = subprocess.Popen(
        [binary, *as_user, *dump, "-c", f"127.0.0.1:{port}", "100"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    stderr = process.stderr.read() if process.poll() is not None else b""
                    raise RuntimeError(f"smtp-sink did not start: {stderr!r}") from None
                time.sleep(0.05)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def sunk_messages(dump_dir: Path) -> list[SunkMessage]:
    """The messages `smtp-sink -d` wrote to `dump_dir` so far. A file is written as its
    transaction goes: one still without its recipients is left out, and one whose data is
    still arriving is read as far as it goes (smtp-sink finishes a file before it answers the
    end of its data, so a message its sender saw accepted is whole)."""
    messages = []
    for path in sorted(dump_dir.iterdir()):
        lines = path.read_bytes().split(b"\n")
        envelope: dict[str, list[str]] = {}
        while lines and lines[0].split(b":", 1)[0].decode() in _DUMP_FIELDS:
            name, _, value = lines.pop(0).decode().partition(":")
            envelope.setdefault(name, []).append(value.strip().strip("<>"))
        if "X-Rcpt-Args" not in envelope or not lines:
            continue
        # Then smtp-sink's Received header, folded over its continuation lines.
        if lines and lines[0].startswith(b"Received: ") and b"smtp-sink" in b"".join(lines[:3]):
            lines.pop(0)
            while lines and lines[0][:1] in (b" ", b"\t"):
                lines.pop(0)
        messages.append(
            SunkMessage(
                mail_from=envelope["X-Mail-Args"][0].split()[0].strip("<>"),
                rcpt_tos=[args.split()[0].strip("<>") for args in envelope["X-Rcpt-Args"]],
                content=b"\r\n".join(lines),
            )
        )
    return messages
