"""Secrets of the service (the key of tracking tokens, the key of VERP return paths), kept in the
spool's `meta` table: every process on the spool and every restart use the same ones.

Each is made on first use with an insert, so two processes making the same one at once agree on
the first committed.
"""

from __future__ import annotations

import base64
import contextlib
import secrets
from dataclasses import dataclass
from typing import Final

from postwire._core import WriteBatch
from postwire.errors import KeyExistsError, SpoolError
from postwire.store.spool import Spool
from postwire.store.tables import Table

SECRET_BYTES: Final = 32


@dataclass(frozen=True, slots=True)
class ServerSecret:
    key: str  # base64 of SECRET_BYTES random bytes


SERVER_SECRETS: Final = Table("meta", ServerSecret)


async def server_secret(spool: Spool, name: str) -> bytes:
    """The spool's secret called `name`, made on first use."""
    stored = SERVER_SECRETS.get(spool, name)
    if stored is None:
        batch = WriteBatch()
        fresh = base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")
        SERVER_SECRETS.insert(batch, name, ServerSecret(fresh))
        with contextlib.suppress(KeyExistsError):  # another process made it first
            await spool.commit(batch)
        stored = SERVER_SECRETS.get(spool, name)
        if stored is None:
            raise SpoolError(f"the secret {name!r} was committed but cannot be read")
    return base64.b64decode(stored.key)
