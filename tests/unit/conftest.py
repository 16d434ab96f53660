"""What the unit tests share: a fresh spool with every table, its completions dispatched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from postwire import _core
from postwire.store.spool import TABLES, Spool


@pytest.fixture
async def spool(tmp_path: Path) -> AsyncIterator[Spool]:
    opened = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(opened.dispatch_completions)
        yield opened
        nursery.cancel_scope.cancel()
    await opened.close()
