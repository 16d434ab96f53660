"""The commands `postwire serve` suggests in its log can be pasted as they are: they name the
`postwire` it was run as (the one on PATH, or the path typed, as `make serve` types
`.venv/bin/postwire`), and run in the directory the log names, they work."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_serve import EPHEMERAL_LISTENERS, READY, ServeProcess, clean_env

SCRIPT = Path(sys.executable).parent / "postwire"  # the console script pyproject declares
SUGGESTED = re.compile(r"to get an API key, run(?: \(in (?P<dir>[^)]+)\))?: (?P<command>.+)$")


def path_without(directory: Path) -> str:
    return os.pathsep.join(
        entry for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and Path(entry).resolve() != directory.resolve()
    )  # fmt: skip


@pytest.mark.parametrize("on_path", [False, True], ids=["typed-path", "on-PATH"])
def test_the_suggested_key_command_pastes(tmp_path: Path, on_path: bool) -> None:
    # Run as `make serve` runs it, a path relative to the directory (the venv's bin linked
    # here), or as `postwire` found on PATH.
    (tmp_path / "bin").symlink_to(SCRIPT.parent, target_is_directory=True)
    path = path_without(SCRIPT.parent)
    if on_path:
        path = f"{SCRIPT.parent}{os.pathsep}{path}"
    env = clean_env(PATH=path, **EPHEMERAL_LISTENERS)
    typed = "postwire" if on_path else "bin/postwire"
    assert on_path == (shutil.which("postwire", path=path) is not None)
    serve = ServeProcess(["serve"], tmp_path, env, command=[typed])
    try:
        serve.wait_for(READY)
        serve.wait_for("to get an API key")
        (line,) = [line for line in serve.lines if "to get an API key" in line]
        match = SUGGESTED.search(line.rstrip("\n"))
        assert match is not None, line
        assert match["dir"] == str(tmp_path)
        assert match["command"] == f"{typed} keys create --name my-key"
        pasted = subprocess.run(
            match["command"], shell=True, cwd=match["dir"], env=env, capture_output=True,
            text=True, timeout=60,
        )  # fmt: skip
        assert pasted.returncode == 0, pasted.stderr
        assert pasted.stdout.startswith("re_")
        serve.wait_for(f"to make its first user, run (in {tmp_path}): {typed} users create")
    finally:
        serve.stop(signal.SIGTERM)
