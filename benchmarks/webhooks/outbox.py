"""Filling a stopped server's webhook outbox, as its services would have: events committed
through `postwire.store.deliveries.add_event` (the event and its outbox entry in one commit) on
the server's own spool, opened with the server's configuration while the server is stopped."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from postwire import _core
from postwire.config import load_config
from postwire.store.deliveries import OUTBOX, add_event
from postwire.store.spool import TABLES, Spool
from postwire.webhooks.store import WEBHOOKS

EVENTS_PER_COMMIT = 1000


def fill_outbox(
    config_path: Path, emails: Sequence[tuple[str, str]], events: int, kinds: Sequence[str]
) -> str:
    """Commit `events` events about `emails` ((id, recipient) pairs, taken in turn), their kinds
    taken in turn from `kinds`, into the outbox of the stopped server configured by
    `config_path`; return the team whose events they are (the team of its one webhook)."""
    # Overrides in the environment would point at another spool than the server's.
    config = load_config(config_path, environ={})
    core = _core.Spool(
        Path(config.data_dir) / "spool",
        tables=list(TABLES),
        map_size=config.spool.map_size,
        commit_window_us=config.spool.commit_window_us,
        max_batch=config.spool.max_batch,
    )
    try:
        spool = Spool(core)
        hooks = WEBHOOKS.scan(spool, limit=2)
        if len(hooks) != 1:
            raise RuntimeError(f"the server has {len(hooks)} webhooks, not one")
        if OUTBOX.scan(spool, limit=1):
            raise RuntimeError("the outbox is not empty: the last run left events behind")
        team_id = hooks[0][1].team_id
        pairs = itertools.cycle(emails)
        kind_of = itertools.cycle(kinds)
        written = 0
        while written < events:
            batch = _core.WriteBatch()
            for _ in range(min(EVENTS_PER_COMMIT, events - written)):
                email_id, recipient = next(pairs)
                kind = next(kind_of)
                data: dict[str, Any] = {} if kind == "email.sent" else {"to": recipient}
                add_event(batch, team_id, email_id, kind, time.time_ns() // 1_000_000, **data)
            core.commit(batch)
            written += EVENTS_PER_COMMIT
        return team_id
    finally:
        core.close()
