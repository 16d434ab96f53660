"""How the person at the shell ran `postwire`, so the commands the log suggests paste as they
are (kept apart from `cli`, which imports the service)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def command_as_run(argv0: str | None = None) -> str:
    """`postwire` as a person runs it again in this shell, for the commands the log suggests:
    `postwire` when that is the one on PATH, else the path it was run as (`.venv/bin/postwire`
    from `make serve`), or `python -m postwire` with this interpreter."""
    script = Path(sys.argv[0] if argv0 is None else argv0)
    if script.name == "__main__.py":
        python = os.path.relpath(sys.executable) if _under_cwd(sys.executable) else sys.executable
        return f"{shlex.quote(python)} -m postwire"
    found = shutil.which(script.name)
    if found is not None and Path(found).resolve() == script.resolve():
        return script.name
    return shlex.quote(str(script))


def _under_cwd(path: str) -> bool:
    return Path(path).absolute().is_relative_to(Path.cwd())
