"""The receiving peer: Postfix's `smtp-sink` on a loopback port, and its message counter.

`smtp-sink -c` rewrites one counter line (`sess=N quit=N mesg=N`, ended by a carriage return)
every time a session ends, a QUIT is executed or a message's final "." is received; it flushes
each one, so a reader thread sees every message as it lands. One transaction is one message here
(every email has one recipient).
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

from tests.processes import stop_process

from benchmarks.arrivals import Arrivals

SMTP_SINK = "/usr/sbin/smtp-sink"
BACKLOG = 1000
START_TIMEOUT = 10.0
_COUNTERS = re.compile(rb"sess=(\d+) quit=(\d+) mesg=(\d+)")


class SinkError(RuntimeError):
    """smtp-sink is missing, did not start, or stopped."""


def sink_path() -> str | None:
    return SMTP_SINK if Path(SMTP_SINK).exists() else shutil.which("smtp-sink")


class SmtpSink(Arrivals):
    """`smtp-sink -c 127.0.0.1:PORT 1000` in a subprocess (as `nobody` when run as root). With
    `dump_dir` (writable by `nobody`) it keeps each message there in a file of its own (`-d`),
    after lines of its own: the envelope as `X-...:` headers, and a Received header."""

    unit = "messages"
    peer = "smtp-sink"
    error = SinkError

    def __init__(self, dump_dir: Path | None = None) -> None:
        super().__init__()
        self.dump_dir = dump_dir
        self.port = 0
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def messages(self) -> int:
        return self.count

    def start(self) -> None:
        path = sink_path()
        if path is None:
            raise SinkError("smtp-sink is not installed (Debian: apt-get install postfix)")
        self.port = _free_port()
        command = [path, "-c"]
        if os.geteuid() == 0:  # smtp-sink refuses to run as root without -u
            command += ["-u", "nobody"]
        if self.dump_dir is not None:
            command += ["-d", f"{self.dump_dir}/%M."]
        command += [f"127.0.0.1:{self.port}", str(BACKLOG)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._reader = threading.Thread(target=self._read_counters, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                assert self.process.stderr is not None
                raise SinkError(f"smtp-sink exited: {self.process.stderr.read().decode()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as probe:
                    probe.recv(512)  # the greeting; the probe's session only counts as `sess`
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise SinkError(f"smtp-sink did not listen on 127.0.0.1:{self.port}")

    def _read_counters(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        buffer = b""
        while chunk := os.read(self.process.stdout.fileno(), 65536):
            now = time.monotonic()
            buffer += chunk
            *lines, buffer = re.split(rb"[\r\n]", buffer)
            counts = [int(m[3]) for line in lines if (m := _COUNTERS.search(line))]
            if counts:
                with self._lock:
                    # Counts read in one chunk landed within one read: they share its time.
                    self._times.extend([now] * (max(counts) - len(self._times)))

    def count_since(self, since: float) -> int:
        """Messages that landed after monotonic time `since`."""
        with self._lock:
            return len(self._times) - bisect.bisect_right(self._times, since)

    def dumped(self) -> list[bytes]:
        """The messages kept in `dump_dir` so far, as smtp-sink wrote them."""
        assert self.dump_dir is not None
        return [path.read_bytes() for path in sorted(self.dump_dir.iterdir())]

    def connections(self) -> int:
        """Established connections to the sink right now (its side of them, /proc/net/tcp)."""
        count = 0
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == self.port and fields[3] == "01":  # 01: ESTABLISHED
                count += 1
        return count

    def stop(self) -> None:
        if self.process is None:
            return
        stop_process(self.process)
        if self._reader is not None:
            self._reader.join(timeout=5)
        self.process = None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
