"""Realistic email records written straight to the store, for benchmarks and tests of the
Emails page: a million of them take a few minutes, with no message to deliver.

`seed_emails` writes records and their index entries (`put_new_email`) in large batches; ids
are UUIDv7 spread over a time span, so date ranges and paging behave as on a real service.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from postwire._core import WriteBatch
from postwire.store.accounts import contract_timestamp
from postwire.store.emails import EmailRecord, put_new_email
from postwire.store.spool import Spool

# How often each status shows as `last_event`, roughly as on a healthy sending service.
STATUS_WEIGHTS: Final = {
    "delivered": 70,
    "opened": 12,
    "clicked": 5,
    "sent": 4,
    "queued": 2,
    "delivery_delayed": 3,
    "bounced": 3,
    "complained": 1,
}
_SUBJECTS: Final = (
    "Your receipt #{n}",
    "Welcome aboard, {name}",
    "Reset your password",
    "Your order {n} has shipped",
    "Weekly digest: {n} new items",
    "Invitation to join {name}'s team",
)
_NAMES: Final = ("ada", "grace", "alan", "edsger", "barbara", "donald", "margaret", "ken")


def uuid7_at(ms: int, rng: random.Random) -> str:
    """A UUIDv7 text made at millisecond `ms` (its random bits from `rng`)."""
    rand_a = rng.getrandbits(12)
    rand_b = rng.getrandbits(62) | (0b10 << 62)  # the RFC 9562 variant
    value = (ms << 80) | (0x7 << 76) | (rand_a << 64) | rand_b
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


@dataclass(frozen=True, slots=True)
class SampleSender:
    """A domain of the team that the samples are sent from, and the API keys that send."""

    domain_id: str
    domain_name: str
    api_key_ids: Sequence[str]


def sample_emails(
    team_id: str,
    senders: Sequence[SampleSender],
    count: int,
    *,
    start_ms: int,
    end_ms: int,
    seed: int = 15,
) -> Iterator[EmailRecord]:
    """`count` records of the team, oldest first, created evenly between `start_ms` and
    `end_ms`, with varied recipients, subjects, tags and statuses."""
    rng = random.Random(seed)
    statuses = list(STATUS_WEIGHTS)
    weights = list(STATUS_WEIGHTS.values())
    step = max(1, (end_ms - start_ms) // max(1, count))
    for n in range(count):
        ms = start_ms + n * step
        sender = senders[n % len(senders)]
        name = rng.choice(_NAMES)
        to = f"{name}.{rng.randrange(100_000)}@example.{rng.choice(('com', 'org', 'net'))}"
        subject = rng.choice(_SUBJECTS).format(n=n, name=name.title())
        email_id = uuid7_at(ms, rng)
        created = contract_timestamp(datetime.fromtimestamp(ms / 1000, UTC))
        yield EmailRecord(
            id=email_id,
            team_id=team_id,
            domain_id=sender.domain_id,
            sender=f"Postwire <hello@{sender.domain_name}>",
            to=[to],
            subject=subject,
            message_id=f"<{email_id}@{sender.domain_name}>",
            created_at=created,
            last_event=rng.choices(statuses, weights)[0],
            envelope_from=f"bounce+{email_id}@rp.{sender.domain_name}",
            recipients=[to],
            text=f"Hello {name}, this is message {n}.",
            tags=[{"name": "category", "value": rng.choice(("receipt", "welcome", "digest"))}],
            size=2_000 + rng.randrange(20_000),
            api_key_id=rng.choice(sender.api_key_ids) if sender.api_key_ids else None,
        )


async def seed_emails(
    spool: Spool, records: Iterator[EmailRecord] | Sequence[EmailRecord], batch_size: int = 5_000
) -> int:
    """Write `records` with their index entries, `batch_size` to a commit; returns how many."""
    written = 0
    batch = WriteBatch()
    for record in records:
        put_new_email(batch, record)
        written += 1
        if written % batch_size == 0:
            await spool.commit(batch)
            batch = WriteBatch()
    if written % batch_size:
        await spool.commit(batch)
    return written
