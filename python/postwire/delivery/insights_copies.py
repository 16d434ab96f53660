"""Copies of delivered messages kept for the insights service's rspamd scan.

The ack that finishes a message drops its body. When rspamd is configured and the insights
service has not read the message yet, the delivery's final commit keeps a copy, which the
service drops in the commit that stores the email's insights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from postwire import _core
from postwire.store.deliveries import DeliveryRecord
from postwire.store.email_insights import has_insights, keep_body, kept_bytes
from postwire.store.spool import Spool

if TYPE_CHECKING:
    from postwire.config import Config

# Copies (read within a tenth of a second unless the service is stalled) take at most this
# share of the spool's map, and are kept only while the spool's live data stays under
# `KEEP_WHILE_USED_BELOW` of it: well short of where intake stops (at least half of the map), so
# the copies never cost an accepted message.
KEPT_BYTES_SHARE = 1 / 64
KEEP_WHILE_USED_BELOW = 3 / 8
# How often the spool's use is read again for that (reading it walks LMDB's free list).
USAGE_CHECK_SECONDS = 1.0


class InsightsCopies:
    """Decides, message by message, whether its final commit keeps a copy."""

    def __init__(self, config: Config, spool: Spool) -> None:
        self.config = config
        self.spool = spool
        self._usage_checked_at = float("-inf")
        self._copies_fit = False
        self._in_flight = 0  # bytes of copies in batches being committed

    def keep(
        self, batch: _core.WriteBatch, delivery: DeliveryRecord, message_id: str, body: bytes
    ) -> int:
        """Add a copy of `body` to `batch` if it is wanted and fits. Returns the bytes kept,
        counted as in flight until the caller reports the batch's commit over (`settled`).
        The sandbox inbox keeps its own copy."""
        config = self.config
        if delivery.is_system:  # no team's insights: its body holds the recipient's secret link
            return 0
        if not config.insights.enabled or config.sandbox or not self._room_for_copies():
            return 0
        if not config.insights.rspamd_url:
            # Only rspamd needs the message as sent. Copying every delivered message cost the
            # SMTP relay about a tenth of its rate (release gate); without rspamd an SMTP
            # email delivered first is judged without its content (`content_not_checked`).
            return 0
        team = delivery.team_id
        if has_insights(self.spool, team, message_id):
            return 0
        # Copies in batches not yet committed count too: a group commit holds many acks.
        kept = kept_bytes(self.spool) + self._in_flight
        if kept + len(body) > config.spool.map_size * KEPT_BYTES_SHARE:
            return 0
        keep_body(batch, team, message_id, body)
        self._in_flight += len(body)
        return len(body)

    def settled(self, kept: int) -> None:
        """The batch that kept `kept` bytes is committed (or refused)."""
        self._in_flight -= kept

    def _room_for_copies(self) -> bool:
        now = trio.current_time()
        if now >= self._usage_checked_at + USAGE_CHECK_SECONDS:
            in_use, map_size = self.spool.usage()
            self._copies_fit = in_use <= map_size * KEEP_WHILE_USED_BELOW
            self._usage_checked_at = now
        return self._copies_fit
