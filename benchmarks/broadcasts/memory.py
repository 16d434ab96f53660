"""The server's memory while it works, read from /proc/<pid>/status of it and its workers.

The spool is an LMDB map opened with WRITEMAP: every page the server writes or reads through it
is file-backed memory counted in its resident set (VmRSS, and so VmHWM) until the kernel drops
it, which it may do at any time (the pages are the spool file's, written back on commit). A
broadcast that writes gigabytes of messages therefore shows gigabytes of VmHWM that are page
cache, not memory the server holds. RssAnon (heap, stacks) is what the server itself keeps:
sampled here, with the file-backed share beside it, and VmHWM read at the end as the kernel
counts it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cpu_time import child_pids

SAMPLE_SECONDS = 0.2
_FIELDS = ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem")


def status_kib(pid: int) -> dict[str, int]:
    """The memory fields of /proc/<pid>/status, in KiB ({} when the process has ended)."""
    values = {}
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        name, _, rest = line.partition(":")
        if name in _FIELDS:
            values[name] = int(rest.split()[0])
    return values


@dataclass(frozen=True)
class MemoryPeaks:
    """MiB, summed over the server's processes."""

    vm_hwm: float  # the kernel's peak resident set (anonymous and file-backed)
    rss_anon: float  # the peak of the anonymous share, as sampled
    rss_file_at_anon_peak: float  # the file-backed share in that sample (the spool's map)
    samples: int


class MemorySampler:
    """Sample the server's processes every SAMPLE_SECONDS in a thread until `stop()`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._peak_anon = 0
        self._file_at_peak = 0
        self._samples = 0

    def start(self) -> None:
        self._thread.start()

    def _pids(self) -> list[int]:
        return [self.pid, *child_pids(self.pid)]

    def _run(self) -> None:
        while True:
            readings = [status_kib(pid) for pid in self._pids()]
            anon = sum(r.get("RssAnon", 0) for r in readings)
            if anon > self._peak_anon:
                self._peak_anon = anon
                self._file_at_peak = sum(
                    r.get("RssFile", 0) + r.get("RssShmem", 0) for r in readings
                )
            self._samples += 1
            if self._stopping.wait(SAMPLE_SECONDS):
                return

    def stop(self) -> MemoryPeaks:
        """Stop sampling (the server must still run: VmHWM is read now)."""
        self._stopping.set()
        self._thread.join()
        hwm = sum(status_kib(pid).get("VmHWM", 0) for pid in self._pids())
        return MemoryPeaks(
            hwm / 1024, self._peak_anon / 1024, self._file_at_peak / 1024, self._samples
        )
