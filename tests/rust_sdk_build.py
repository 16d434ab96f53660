"""The build of tests/sdk_rust, the program that drives Postwire with the official `resend-rs`
crate. It takes over a minute cold, so a session that will run it starts the build as it
collects the tests (`start`), in the background of the tests that run first, and the test waits
for it (`wait`); cargo's lock on the build directory lets a second worker's build wait on the
first and then find everything built."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "sdk_rust" / "Cargo.toml"
# Under the repository's ignored target/, beside the extension's build, never inside tests/.
TARGET_DIR = ROOT / "target" / "sdk_rust"
PROGRAM = TARGET_DIR / "debug" / "postwire-sdk-rust-check"

_started: tuple[subprocess.Popen[bytes], Path] | None = None


def start() -> None:
    """Start building in the background (once a process); nothing when cargo is missing, which
    `wait` reports."""
    global _started
    cargo = shutil.which("cargo")
    if _started is not None or cargo is None:
        return
    log = Path(tempfile.mkstemp(prefix="sdk-rust-build-", suffix=".log")[1])
    with log.open("wb") as output:
        process = subprocess.Popen(
            [cargo, "build", "--locked", "--quiet", "--manifest-path", str(MANIFEST)],
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "CARGO_TARGET_DIR": str(TARGET_DIR)},
        )
    _started = (process, log)


def wait(timeout: float = 900) -> Path:
    """The built program, once the build started by `start` (started now if it was not) ended
    well; AssertionError with cargo's output otherwise."""
    assert shutil.which("cargo"), "cargo is not installed: Postwire's build needs it"
    start()
    assert _started is not None
    process, log = _started
    status = process.wait(timeout=timeout)
    assert status == 0, f"cargo build of {MANIFEST} failed:\n{log.read_text(errors='replace')}"
    return PROGRAM


def stop() -> None:
    """End a build still running when the session ends (its test was not run)."""
    if _started is not None and _started[0].poll() is None:
        _started[0].terminate()
        _started[0].wait()
