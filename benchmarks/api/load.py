"""The load generator: `wrk` in its own process, plus the CPU each side used while it ran.

wrk (C, one epoll thread) costs a small fraction of what a Python client would per request, so
on a 2-core machine nearly all the CPU is left to the server. What it did use is measured and
reported with every figure, as is the CPU of everything else on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cpu_time import children_cpu, machine_busy, process_cpu

LUA_SCRIPT = Path(__file__).with_name("request.lua")
# Generous: a batch call waits behind every other connection's batch for its commit.
REQUEST_TIMEOUT = "30s"
_RESULT_PREFIX = "WRK_RESULT "


@dataclass(frozen=True)
class Workload:
    """One kind of request, sent over and over on every connection."""

    name: str
    method: str
    path: str
    body_file: Path | None
    emails_per_request: int  # 0: the request sends no email


@dataclass(frozen=True)
class Sample:
    """What one wrk run measured."""

    requests: int
    seconds: float
    errors: int  # non-2xx replies, socket errors and timeouts
    p50_ms: float
    p99_ms: float
    server_cpu: float  # cores busy on average, all the server's threads
    generator_cpu: float  # the same for wrk
    other_cpu: float  # every other process on the machine

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds


def wrk_path() -> str | None:
    return shutil.which("wrk")


def wrk_version() -> str:
    wrk = wrk_path()
    if wrk is None:
        return "wrk not installed"
    # `wrk -v` prints its version, then usage, and exits non-zero.
    output = subprocess.run([wrk, "-v"], capture_output=True, text=True, timeout=10).stdout
    return output.splitlines()[0].split(" Copyright")[0] if output else "wrk"


def run_wrk(
    base_url: str,
    workload: Workload,
    *,
    seconds: int,
    connections: int,
    token: str,
    server_pid: int,
    cookie: str = "",
) -> Sample:
    wrk = wrk_path()
    if wrk is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install wrk)")
    body = str(workload.body_file) if workload.body_file is not None else "-"
    command = [wrk, "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", REQUEST_TIMEOUT]
    command += ["-s", str(LUA_SCRIPT), base_url, "--", workload.method, workload.path, body]
    env = {**os.environ, "BENCH_API_TOKEN": token, "BENCH_COOKIE": cookie}

    server_before, machine_before = process_cpu(server_pid), machine_busy()
    children_before = children_cpu()
    wall_start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=seconds + 60)
    wall = time.monotonic() - wall_start
    server = (process_cpu(server_pid) - server_before) / wall
    generator = (children_cpu() - children_before) / wall
    machine = (machine_busy() - machine_before) / wall

    if result.returncode != 0:
        raise RuntimeError(f"wrk failed ({result.returncode}): {result.stderr or result.stdout}")
    line = next(
        (x for x in result.stdout.splitlines() if x.startswith(_RESULT_PREFIX)),
        None,
    )
    if line is None:
        raise RuntimeError(f"wrk printed no result:\n{result.stdout}\n{result.stderr}")
    figures = json.loads(line.removeprefix(_RESULT_PREFIX))
    errors = sum(
        figures[key]
        for key in ("status_errors", "connect_errors", "read_errors", "write_errors", "timeouts")
    )
    return Sample(
        requests=figures["requests"],
        seconds=figures["duration_us"] / 1e6,
        errors=errors,
        p50_ms=figures["p50_us"] / 1000,
        p99_ms=figures["p99_us"] / 1000,
        server_cpu=server,
        generator_cpu=generator,
        other_cpu=max(0.0, machine - server - generator),
    )
