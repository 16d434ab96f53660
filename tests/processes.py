"""Stopping the peers that tests and benchmarks start as subprocesses (Knot, Postfix, nginx,
smtp-sink, stunnel, OpenDKIM, Postwire itself)."""

from __future__ import annotations

import signal
import subprocess


def stop_process(
    process: subprocess.Popen[bytes] | subprocess.Popen[str],
    timeout: float = 10.0,
    sig: int = signal.SIGTERM,
) -> None:
    """Ask `process` to end with `sig`; kill it if it has not within `timeout` seconds. Returns
    once it has ended (at once if it already had)."""
    if process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
