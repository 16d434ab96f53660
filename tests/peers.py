"""What a test does when a real peer it runs against is missing: it fails, naming the package.

`make test` installs every peer the tests use before running them (the Makefile's TEST_NEEDS),
so a missing one is a broken set-up: a test that skipped instead would let a run that tested
less pass.
"""

from __future__ import annotations

from typing import TypeVar

import pytest

FoundT = TypeVar("FoundT")


def require_peer(found: FoundT | None, what: str, package: str) -> FoundT:
    """`found` (a peer's path or paths); without it, fail the test saying how to install it."""
    if found is None:
        pytest.fail(
            f"{what} is not installed: `make test` installs it (apt-get install -y {package})",
            pytrace=False,
        )
    return found
