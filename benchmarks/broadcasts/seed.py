"""Seed a team's audience before the server starts: `python -m benchmarks.broadcasts.seed`.

Writes, through the audience store's own functions, the contact property the broadcast uses,
a segment "Everyone" and N contacts (contacts 0..N-1 of `content`) with their memberships
(`put_contact` keeps the email index, the member rows and the segment's count in step), with no
webhook events, in commits of a few thousand, to the spool named by the server's config while
no server runs. Seeding is not what the benchmark measures: it runs in its own process so that
neither its time nor its memory is counted. With `--second-contacts K`, the first K contacts are
also members of a second segment, "Profiled" (the profiled round's). Prints one JSON line:
{"segments": [ids], "seconds": ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import trio

from benchmarks.broadcasts.content import (
    PROPERTY_FALLBACK,
    PROPERTY_KEY,
    contact_email,
    first_name,
    is_unsubscribed,
    plan,
)
from postwire._core import WriteBatch, new_id
from postwire.config import load_config
from postwire.store.accounts import authenticate, contract_timestamp
from postwire.store.contact_properties import ContactPropertyRecord, put_property
from postwire.store.contacts import ContactRecord, put_contact
from postwire.store.segments import SegmentRecord, put_segment
from postwire.store.spool import Spool, serve_spool

CONTACTS_A_COMMIT = 2000
# Commits in flight at once: the spool's committer groups them into one transaction.
COMMITS_IN_FLIGHT = 4


def contact(team_id: str, number: int, segment_ids: list[str], now: str) -> ContactRecord:
    value = plan(number)
    return ContactRecord(
        id=new_id(),
        team_id=team_id,
        email=contact_email(number),
        first_name=first_name(number),
        last_name=f"Lee{number}",
        unsubscribed=is_unsubscribed(number),
        created_at=now,
        updated_at=now,
        properties={} if value is None else {PROPERTY_KEY: value},
        segment_ids=segment_ids,
        topics={},
    )


async def seed(spool: Spool, args: argparse.Namespace) -> None:
    key = authenticate(spool, args.token)
    if key is None:
        raise SystemExit("the token does not authenticate against this spool")
    team_id = key.team_id
    now = datetime.now(UTC)
    stamp, now_ms = contract_timestamp(now), int(now.timestamp() * 1000)
    batch = WriteBatch()
    put_property(
        batch,
        ContactPropertyRecord(new_id(), team_id, PROPERTY_KEY, "string", PROPERTY_FALLBACK, stamp),
    )
    names = ["Everyone", "Profiled"] if args.second_contacts else ["Everyone"]
    segments = [SegmentRecord(new_id(), team_id, name, stamp) for name in names]
    for segment in segments:
        put_segment(batch, segment)
    await spool.commit(batch)
    slots = trio.Semaphore(COMMITS_IN_FLIGHT)

    async def write(first: int, last: int) -> None:
        batch = WriteBatch()
        for number in range(first, last):
            joined = segments if number < args.second_contacts else segments[:1]
            record = contact(team_id, number, [s.id for s in joined], stamp)
            put_contact(batch, spool, None, record, now_ms, event=None)
        await spool.commit(batch)
        slots.release()

    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        for first in range(0, args.contacts, CONTACTS_A_COMMIT):
            await slots.acquire()
            nursery.start_soon(write, first, min(first + CONTACTS_A_COMMIT, args.contacts))
            if first and first % 100_000 == 0:
                print(f"seeded {first:,} contacts", file=sys.stderr, flush=True)
    seconds = time.monotonic() - started
    print(json.dumps({"segments": [s.id for s in segments], "seconds": seconds}))


async def main_async(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    async with trio.open_nursery() as nursery:
        spool: Spool = await nursery.start(serve_spool, config)
        await seed(spool, args)
        nursery.cancel_scope.cancel()  # serve_spool closes the spool, committed batches on disk


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.broadcasts.seed", description=__doc__
    )
    parser.add_argument("--config", type=Path, required=True, help="the server's config file")
    parser.add_argument("--token", required=True, help="an API key of the team to seed")
    parser.add_argument("--contacts", type=int, required=True)
    parser.add_argument(
        "--second-contacts", type=int, default=0, help="members of the second segment"
    )
    trio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    main()
