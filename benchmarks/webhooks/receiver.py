"""The receiving endpoint: nginx on a loopback port, its access log counted as POSTs land.

A private nginx (its own configuration, logs and pid file in a directory of the benchmark's, one
worker) answers every POST with 204 and writes one access-log line per request with the svix
headers and the body as received. nginx reads a body only when something needs it, and `return`
needs nothing: so the POSTs are proxied to a second server block of the same worker that
answers 204, which makes nginx read each body and log it. A reader thread follows the log and
records when each line appeared; after a round, the lines are read back to check every POST's
reply, count the events by type and verify signatures of a sample with the `svix` package.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.processes import stop_process

from benchmarks.arrivals import Arrivals
from benchmarks.cpu_time import process_group_cpu
from benchmarks.smtp.tunnel import free_port

NGINX = "/usr/sbin/nginx"
START_TIMEOUT = 10.0
POLL_SECONDS = 0.005  # how often the reader looks for new log lines: the arrival times' grain
LOG_FORMAT = "\\t".join(
    [
        "$msec",
        "$status",
        "$connection",
        "$http_svix_id",
        "$http_svix_timestamp",
        "$http_svix_signature",
        "$request_body",
    ]
)


class ReceiverError(RuntimeError):
    """nginx is missing, did not start, or stopped."""


@dataclass(frozen=True)
class ReceivedPost:
    """One access-log line: what the dispatcher sent and what nginx answered."""

    status: int
    connection: int  # nginx's serial number of the connection it came over
    headers: dict[str, str]  # svix-id, svix-timestamp, svix-signature
    body: bytes

    def payload(self) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.body)
        return decoded


def nginx_path() -> str | None:
    return NGINX if Path(NGINX).exists() else shutil.which("nginx")


def nginx_version() -> str:
    nginx = nginx_path()
    if nginx is None:
        return "nginx not installed"
    # `nginx -v` prints "nginx version: nginx/1.22.1" on stderr.
    output = subprocess.run([nginx, "-v"], capture_output=True, text=True, timeout=10).stderr
    return output.strip().removeprefix("nginx version: ") or "nginx"


class NginxReceiver(Arrivals):
    """`nginx -p DIR -c nginx.conf` in the foreground, leading its own process group. The count
    is of its log's lines, one a POST."""

    unit = "POSTs"
    peer = "nginx"
    error = ReceiverError

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory / "nginx"
        self.log_path = self.directory / "hooks.log"
        self.port = 0
        self._ends: list[int] = []  # byte offset just past line i + 1
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def worker_pid(self) -> int:
        """The one worker process, which does all the work (the master only supervises)."""
        children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
        if len(children) != 1:
            raise ReceiverError(f"nginx has {len(children)} worker processes, not one")
        return int(children[0])

    @property
    def posts(self) -> int:
        return self.count

    def start(self) -> None:
        path = nginx_path()
        if path is None:
            raise ReceiverError("nginx is not installed (Debian: apt-get install nginx-light)")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        config = self.directory / "nginx.conf"
        config.write_text(self._config(free_port()))
        self.log_path.touch()
        self.process = subprocess.Popen(
            [path, "-p", str(self.directory), "-c", str(config), "-e", "error.log"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own group: its CPU is the group's
        )
        self._reader = threading.Thread(target=self._follow_log, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ReceiverError(f"nginx exited: {self.error_log()}")
            try:
                children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text()
            except OSError:
                children = ""
            if children.strip() and _listening(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise ReceiverError(f"nginx did not listen on 127.0.0.1:{self.port}: {self.error_log()}")

    def _config(self, answer_port: int) -> str:
        user = "user root root;\n" if os.geteuid() == 0 else ""
        return f"""{user}worker_processes 1;
daemon off;
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path body;
    proxy_temp_path proxy;
    fastcgi_temp_path fastcgi;
    uwsgi_temp_path uwsgi;
    scgi_temp_path scgi;
    log_format hooks escape=json '{LOG_FORMAT}';
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    upstream answer {{
        server 127.0.0.1:{answer_port};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{self.port} backlog=1024;
        client_body_buffer_size 64k;
        client_max_body_size 1m;
        location / {{
            access_log {self.log_path} hooks;
            proxy_pass http://answer;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
    server {{
        listen 127.0.0.1:{answer_port};
        location / {{ return 204; }}
    }}
}}
"""

    def _follow_log(self) -> None:
        offset = 0
        partial = b""
        with self.log_path.open("rb") as log:
            while not self._stop.is_set():
                chunk = log.read()
                if not chunk:
                    time.sleep(POLL_SECONDS)
                    continue
                now = time.monotonic()
                data = partial + chunk
                start = offset - len(partial)
                ends: list[int] = []
                position = data.find(b"\n")
                while position != -1:
                    ends.append(start + position + 1)
                    position = data.find(b"\n", position + 1)
                last = data.rfind(b"\n") + 1
                partial = data[last:]
                offset += len(chunk)
                if ends:
                    with self._lock:
                        # Lines read in one chunk landed within one poll: they share its time.
                        self._ends.extend(ends)
                        self._times.extend([now] * len(ends))

    def received(self, first: int, end: int) -> list[ReceivedPost]:
        """POSTs number `first` to `end` - 1 (0-based, in the order they were logged)."""
        with self._lock:
            start_offset = self._ends[first - 1] if first > 0 else 0
            end_offset = self._ends[end - 1] if end > 0 else 0
        with self.log_path.open("rb") as log:
            log.seek(start_offset)
            raw = log.read(end_offset - start_offset)
        return [_parse(line) for line in raw.splitlines()]

    def cpu_seconds(self) -> float:
        """CPU used so far by the master and its worker."""
        return process_group_cpu(self.pid)

    def error_log(self) -> str:
        path = self.directory / "error.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        if self.process is not None and self.process.stderr is not None and self.process.poll():
            text += self.process.stderr.read().decode(errors="replace")
        return text[-3000:]

    def stop(self) -> None:
        if self.process is not None:
            # SIGQUIT: nginx's graceful stop, which finishes what is in flight.
            stop_process(self.process, sig=signal.SIGQUIT)
            self.process = None
        self._stop.set()
        if self._reader is not None:
            self._reader.join(timeout=5)


def _parse(line: bytes) -> ReceivedPost:
    _, status, connection, svix_id, timestamp, signature, body = line.split(b"\t", 6)

    def unescape(field: bytes) -> str:
        # `escape=json` escapes `"`, `\` and control characters as JSON strings do, and leaves
        # other bytes as they came: a JSON string literal around the field reads it back.
        text: str = json.loads(b'"' + field + b'"')
        return text

    headers = {
        "svix-id": unescape(svix_id),
        "svix-timestamp": unescape(timestamp),
        "svix-signature": unescape(signature),
    }
    return ReceivedPost(int(status), int(connection), headers, unescape(body).encode())


def _listening(port: int) -> bool:
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
            return True
    return False
