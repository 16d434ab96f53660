"""The sandbox inbox: the messages `postwire serve --sandbox` held instead of delivering them.

Keys, all in table "sandbox_inbox":

    msg/<team_id>/<email_id>   HeldMessage   what the inbox lists; email ids are time-ordered, so
                                             a reverse scan of a team's prefix is newest first
    src/<team_id>/<email_id>   raw bytes     the message exactly as it would have gone out

The delivery engine holds a message in the same commit that records its delivery and removes
it from the queue, so its bytes move from the queue to the inbox (one copy at rest), and a
message handed out again after a crash overwrites its own entry rather than adding one.
"""

from __future__ import annotations

from dataclasses import dataclass

from postwire._core import WriteBatch
from postwire.store.emails import EMAILS, email_key
from postwire.store.spool import Spool
from postwire.store.tables import Table


@dataclass(frozen=True, slots=True)
class HeldMessage:
    id: str  # the email's id
    team_id: str
    sender: str  # the email's `from`, display name included
    to: list[str]
    subject: str
    message_id: str
    envelope_from: str
    recipients: list[str]  # the envelope recipients the inbox took (not suppressed ones)
    held_at_ms: int
    size: int


INBOX = Table("sandbox_inbox", HeldMessage)


def _message_key(team_id: str, email_id: str) -> str:
    return f"msg/{team_id}/{email_id}"


def _source_key(team_id: str, email_id: str) -> bytes:
    return f"src/{team_id}/{email_id}".encode()


def hold_message(
    batch: WriteBatch,
    spool: Spool,
    team_id: str,
    email_id: str,
    envelope_from: str,
    recipients: list[str],
    now_ms: int,
) -> None:
    """Add the spooled message `email_id` to the team's inbox in `batch`, for `recipients`
    (and whoever it was held for before). Nothing if the queue no longer has it."""
    source = spool.message_body(email_id)
    if source is None:
        return
    key = _message_key(team_id, email_id)
    earlier = INBOX.get(spool, key)
    held = list(dict.fromkeys([*(earlier.recipients if earlier else ()), *recipients]))
    email = EMAILS.get(spool, email_key(team_id, email_id))
    record = HeldMessage(
        id=email_id,
        team_id=team_id,
        sender=email.sender if email else "",
        to=list(email.to) if email else [],
        subject=email.subject if email else "",
        message_id=email.message_id if email else "",
        envelope_from=envelope_from,
        recipients=held,
        held_at_ms=now_ms,
        size=len(source),
    )
    INBOX.put(batch, key, record)
    batch.put(INBOX.name, _source_key(team_id, email_id), source)


def get_held(spool: Spool, team_id: str, email_id: str) -> HeldMessage | None:
    """The team's held message with this id, or None."""
    if not email_id or "/" in email_id:
        return None
    return INBOX.get(spool, _message_key(team_id, email_id))


def held_source(spool: Spool, team_id: str, email_id: str) -> bytes | None:
    """The raw source of the team's held message, byte for byte as it would have been sent."""
    return spool.get(INBOX.name, _source_key(team_id, email_id))


async def held_source_parked(spool: Spool, team_id: str, email_id: str) -> bytes | None:
    """`held_source`, parked rather than blocking on a table store on the network."""
    return await spool.aget(INBOX.name, _source_key(team_id, email_id))


def list_held(
    spool: Spool, team_id: str, *, limit: int, after: str | None = None, before: str | None = None
) -> tuple[list[HeldMessage], bool]:
    """A page of the team's held messages, newest first, and whether more lie beyond it;
    `after` walks to older ones, `before` to newer ones, the cursor itself excluded."""
    prefix = _message_key(team_id, "")
    if before is not None:
        newer = INBOX.scan(spool, prefix=prefix, cursor=prefix + before, limit=limit + 1)
        page = [record for _, record in newer[:limit]]
        return page[::-1], len(newer) > limit
    cursor = None if after is None else prefix + after
    older = INBOX.scan(spool, prefix=prefix, cursor=cursor, reverse=True, limit=limit + 1)
    return [record for _, record in older[:limit]], len(older) > limit
