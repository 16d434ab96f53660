"""The stub `postwire/_core.pyi` is the documentation of the Rust API: it must match the module."""

import subprocess
import sys


def test_stub_matches_extension() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "postwire._core"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
