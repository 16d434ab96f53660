"""Profiling the server under load with py-spy, and naming its hot spots.

py-spy samples the live server from outside (no change to it) with `--gil`: only the thread that
holds the GIL is recorded. The REST API is bound by the GIL (one Trio thread runs every request;
RSA signing and LMDB commits release it), so the GIL holder's stacks are where throughput goes.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.cpu_time import child_pids

SAMPLE_RATE = 200  # per second: enough samples in a few seconds, little slowdown
# py-spy attaches and reads the interpreter's layout before its first sample.
ATTACH_SECONDS = 1.0
_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
_THREAD = re.compile(r"^thread \(\d+\): (?P<name>.*)$")
# Where a thread starts running tasks or jobs: the frames above them wrap everything the
# server does and say nothing about where its time goes.
_DISPATCH_FRAMES = (
    "unrolled_run (trio/_core/_run.py)",
    "WorkerThread._handle_job (trio/_core/_thread_cache.py)",
)


def py_spy_path() -> str | None:
    beside_python = Path(sys.executable).with_name("py-spy")
    return str(beside_python) if beside_python.exists() else shutil.which("py-spy")


def record(pid: int, seconds: int, output: Path, fmt: str, load: Callable[[], object]) -> None:
    """Sample `pid` and its child processes (Postwire's workers) for `seconds` while `load()`
    drives them; write a py-spy `fmt` profile. A "raw" (collapsed stacks) profile holds every
    process's samples, one py-spy per process, so shares are of the whole service; other
    formats hold the first process's alone.

    `load` must keep the server busy for longer than `seconds` + ATTACH_SECONDS.
    """
    py_spy = py_spy_path()
    if py_spy is None:
        raise RuntimeError("py-spy is not installed (pip install py-spy)")
    pids = [pid, *child_pids(pid)] if fmt == "raw" else [pid]
    outputs = [output if n == 0 else output.with_suffix(f".{n}") for n in range(len(pids))]
    samplers = []
    for sampled, path in zip(pids, outputs, strict=True):
        command = [py_spy, "record", "--pid", str(sampled), "--duration", str(seconds)]
        command += ["--rate", str(SAMPLE_RATE), "--gil", "--threads", "--nolineno"]
        command += ["--format", fmt, "--output", str(path)]
        samplers.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        )
    try:
        time.sleep(ATTACH_SECONDS / 2)
        load()
    finally:
        failures = [_finish(sampler, seconds) for sampler in samplers]
    if any(failures):
        raise RuntimeError("py-spy failed: " + "; ".join(f for f in failures if f))
    with output.open("a") as merged:
        for path in outputs[1:]:
            merged.write(path.read_text())
            path.unlink()


def _finish(sampler: subprocess.Popen[bytes], seconds: int) -> str:
    """Wait for a py-spy; what went wrong, or "" if nothing did."""
    try:
        _, errors = sampler.communicate(timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        sampler.kill()
        _, errors = sampler.communicate()
    return f"exit status {sampler.returncode}: {errors.decode()}" if sampler.returncode else ""


@dataclass(frozen=True)
class HotSpots:
    samples: int
    by_thread: list[tuple[str, float]]  # thread name (numbers dropped), share of samples
    by_package: list[tuple[str, float]]  # top-level package of the leaf frame, share
    self_time: list[tuple[str, float]]  # leaf function, share
    inclusive: list[tuple[str, float]]  # function anywhere below the dispatch frames, share
    postwire: list[tuple[str, float]]  # the same, Postwire's own functions only


@dataclass(frozen=True)
class Profiled:
    """One profiled workload: where its files are (beside the report) and what they say."""

    title: str
    flamegraph: str | None  # file name, when one was drawn
    collapsed: str
    hot: HotSpots
    # Shares of named parts of the work (see `inclusive_shares`), when the benchmark names some.
    parts: list[tuple[str, float]] = field(default_factory=list)


def hot_spots(collapsed: str, top: int = 15) -> HotSpots:
    """Summarise py-spy's raw (collapsed-stack) output of a `--threads --nolineno` recording."""
    threads: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        count = int(match["count"])
        thread, *frames = match["stack"].split(";")
        if not frames:
            continue
        total += count
        name = _THREAD.match(thread)
        threads[re.sub(r"\d+", "N", name["name"]) if name else thread] += count
        leaves[frames[-1]] += count
        packages[_package(frames[-1])] += count
        for frame in set(frames[_first_below_dispatch(frames) :]):
            inclusive[frame] += count
            if _package(frame) == "postwire":
                own[frame] += count

    def shares(counter: collections.Counter[str], n: int = top) -> list[tuple[str, float]]:
        return [(key, value / total) for key, value in counter.most_common(n)] if total else []

    return HotSpots(
        samples=total,
        by_thread=shares(threads, 5),
        by_package=shares(packages, 10),
        self_time=shares(leaves),
        inclusive=shares(inclusive),
        postwire=shares(own),
    )


def inclusive_shares(collapsed: str, parts: Mapping[str, Sequence[str]]) -> list[tuple[str, float]]:
    """For each part, the share of samples with a frame that contains one of its markers
    (`"(logging/"`, `"SubmissionHandler.accept ("`): parts that cut across the call tree, such
    as a library called from everywhere. A sample may count for several parts."""
    counts = dict.fromkeys(parts, 0)
    total = 0
    for line in collapsed.splitlines():
        match = _LINE.match(line)
        if match is None or ";" not in match["stack"]:
            continue
        count = int(match["count"])
        total += count
        for part, markers in parts.items():
            if any(marker in match["stack"] for marker in markers):
                counts[part] += count
    return [(part, count / total) for part, count in counts.items()] if total else []


def _first_below_dispatch(frames: list[str]) -> int:
    for index in range(len(frames) - 1, -1, -1):
        if frames[index] in _DISPATCH_FRAMES:
            return index + 1
    return 0


def _package(frame: str) -> str:
    """The top-level package of a frame: `f (postwire/api/emails.py)` -> `postwire`."""
    location = frame[frame.rfind(" (") + 2 : -1] if frame.endswith(")") else frame
    return location.split("/", 1)[0] if "/" in location else location


def profile_section(profiled: Profiled, *, why_the_gil: str) -> list[str]:
    """The report's Markdown section about one profile; `why_the_gil` says why the thread
    holding the GIL is the one worth sampling in this benchmark."""
    hot = profiled.hot

    def table(title: str, rows: list[tuple[str, float]], *, code: bool = True) -> list[str]:
        out = ["", f"| {title} | share |", "|---|---:|"]
        quote = "`" if code else ""
        return out + [f"| {quote}{name}{quote} | {share:.1%} |" for name, share in rows]

    files = f"Collapsed stacks: `{profiled.collapsed}`."
    if profiled.flamegraph is not None:
        files = f"Flamegraph: `{profiled.flamegraph}`; collapsed stacks: `{profiled.collapsed}`."
    lines = [
        "",
        f"## Profile of {profiled.title}",
        "",
        f"py-spy, {SAMPLE_RATE} Hz, `--gil` (only the thread holding the GIL is sampled: "
        f"{why_the_gil}), {hot.samples} samples during an extra round. {files} Shares are of "
        "all GIL-holding samples.",
    ]
    lines += table("thread holding the GIL", hot.by_thread)
    lines += table("package of the running (leaf) frame", hot.by_package)
    lines += table("self time (leaf frame)", hot.self_time)
    lines += table("inclusive time (below Trio's scheduler)", hot.inclusive)
    lines += table("inclusive time, Postwire's own functions", hot.postwire)
    if profiled.parts:
        parts_title = "inclusive time of parts of the work (they may overlap)"
        lines += table(parts_title, profiled.parts, code=False)
    return lines
