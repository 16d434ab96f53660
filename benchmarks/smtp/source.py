"""The load generator: Postfix's `smtp-source`, run to completion in its own process.

With `-d` each of its `-s` sessions keeps one connection for message after message, as a bulk
relay does; it stops at the first reply that is not a success (it has no `-A` here), so a run
that exits 0 had every message accepted. Its messages carry `From:`, `To:`, `Date:`,
`Message-Id:` and `Subject:` headers made from its options, then `-l` bytes of body in lines of
80 bytes (CRLF included).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SMTP_SOURCE = "/usr/sbin/smtp-source"


class SourceError(RuntimeError):
    """smtp-source is missing, failed, or had a message refused."""


def source_path() -> str | None:
    return SMTP_SOURCE if Path(SMTP_SOURCE).exists() else shutil.which("smtp-source")


@dataclass(frozen=True)
class Load:
    """What one smtp-source run sends."""

    messages: int
    sessions: int
    body_bytes: int
    sender: str
    recipient: str
    subject: str
    helo: str = "bench.localhost"


def send(load: Load, port: int, *, timeout: float) -> None:
    """Send `load` to 127.0.0.1:`port` and return once every message was accepted."""
    path = source_path()
    if path is None:
        raise SourceError("smtp-source is not installed (Debian: apt-get install postfix)")
    command = [path, "-d", "-s", str(load.sessions), "-m", str(load.messages)]
    command += ["-l", str(load.body_bytes), "-f", load.sender, "-t", load.recipient]
    command += ["-S", load.subject, "-M", load.helo, f"127.0.0.1:{port}"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SourceError(f"smtp-source did not finish within {timeout:g} s") from None
    if result.returncode != 0:
        raise SourceError(
            f"smtp-source failed ({result.returncode}): {(result.stderr or result.stdout)[-2000:]}"
        )
