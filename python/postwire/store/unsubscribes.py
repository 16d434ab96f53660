"""What the unsubscribe page reads beside contacts: whether a contact's unsubscribe through a
broadcast was counted already, and the team's public topics."""

from __future__ import annotations

from typing import Final

from postwire.store.broadcasts import RECIPIENT_ROWS, recipients_prefix
from postwire.store.spool import Spool
from postwire.store.team_records import team_prefix
from postwire.store.topics import TOPICS, TopicRecord

# A team's topics read at most, for its preference page.
MAX_TOPICS_SCANNED: Final = 1_000


def unsubscribe_counted(spool: Spool, team_id: str, broadcast_id: str, contact_id: str) -> bool:
    """Whether the broadcast lists the contact among its unsubscribed recipients (its row
    commits with the count, `store.broadcasts.count_unsubscribe`): a contact that unsubscribes,
    subscribes again and unsubscribes once more through one broadcast counts once."""
    key = recipients_prefix(team_id, broadcast_id, "unsubscribed") + contact_id
    return RECIPIENT_ROWS.get(spool, key) is not None


def public_topics(spool: Spool, team_id: str, limit: int) -> list[TopicRecord]:
    """The team's public topics, oldest first, at most `limit` of them."""
    rows = TOPICS.scan(spool, prefix=team_prefix(team_id), limit=MAX_TOPICS_SCANNED)
    return [topic for _, topic in rows if topic.visibility == "public"][:limit]
