"""The dashboard's list of a team's contacts: search, filters and cursor paging, always
bounded.

One source is walked per request: the address index when the search box holds text (it
matches the start of an address), else the segment's member rows when a segment is chosen,
else the team's contacts, newest first. Every other condition (name, topic, unsubscribed, a
property's value, a segment beside a search) is checked on the contacts the walk reads, and
the walk reads at most `budget` of them: a request that runs out before its page is full
returns what it found with a cursor to continue from, so no request is ever unbounded however
rare its matches. Pages continue from a cursor (the last position read), never an offset.
Its reads are parked, never blocking the process on a table store on the network, and the
contacts an index chunk names are read together.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final

from postwire.audiences.csv_rows import parse_number
from postwire.concurrency import in_order
from postwire.store.contacts import CONTACT_EMAILS, CONTACTS, ContactRecord, get_contact_parked
from postwire.store.segments import SEGMENT_MEMBERS, members_prefix
from postwire.store.spool import Spool
from postwire.store.team_records import team_prefix

# Contacts a request may read before it answers with what it found.
SCAN_BUDGET: Final = 2000
_CHUNK: Final = 200
# Contacts of an index chunk waiting at once: on a table store on the network, gets that wait
# together leave as one statement.
_CONTACTS_AT_ONCE: Final = 64


@dataclass(frozen=True, slots=True)
class ContactFilter:
    """What the Contacts page asks for; empty fields do not filter."""

    address: str = ""  # the start of the address, any case (the address index)
    name: str = ""  # the start of the first name, the last name or both, any case
    segment_id: str | None = None
    topic_id: str | None = None
    topic_default: str = "opt_in"  # the topic's default_subscription
    subscription: str | None = None  # with topic_id: "opt_in" | "opt_out"
    unsubscribed: bool | None = None
    property_key: str | None = None
    property_value: str = ""  # compared as a number when the value is one

    @property
    def indexed(self) -> bool:
        """Whether every condition is answered by the walked source itself."""
        return not (
            self.name
            or self.topic_id
            or self.unsubscribed is not None
            or self.property_key
            or (self.address and self.segment_id)
        )

    def matches(self, contact: ContactRecord) -> bool:
        if self.address and not contact.email.lower().startswith(self.address.lower()):
            return False
        if self.segment_id is not None and self.segment_id not in contact.segment_ids:
            return False
        if self.unsubscribed is not None and contact.unsubscribed != self.unsubscribed:
            return False
        if self.topic_id is not None and self.subscription is not None:
            chosen = contact.topics.get(self.topic_id, self.topic_default)
            if chosen != self.subscription:
                return False
        if self.name and not _name_starts_with(contact, self.name):
            return False
        if self.property_key:
            return _value_equals(contact.properties.get(self.property_key), self.property_value)
        return True


def _name_starts_with(contact: ContactRecord, text: str) -> bool:
    wanted = text.casefold()
    first, last = (contact.first_name or "").casefold(), (contact.last_name or "").casefold()
    return any(n.startswith(wanted) for n in (first, last, f"{first} {last}".strip()))


def _value_equals(value: object, wanted: str) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return value.casefold() == wanted.strip().casefold()
    number = parse_number(wanted.strip())
    return number is not None and value == number


@dataclass(frozen=True, slots=True)
class ContactPage:
    """A page of contacts and where the next one starts: `after` is the cursor of the last
    position read (None when the source is exhausted). `partial` says the budget ran out
    before the page was full, so `after` continues the search rather than the list."""

    contacts: list[ContactRecord]
    after: str | None
    partial: bool
    examined: int
    source: str  # "address" | "segment" | "contacts"


async def find_contacts(
    spool: Spool,
    team_id: str,
    wanted: ContactFilter,
    *,
    limit: int,
    after: str | None = None,
    budget: int = SCAN_BUDGET,
) -> ContactPage:
    """Up to `limit` of the team's contacts that match `wanted`, beyond `after`, reading at
    most `budget` contacts."""
    source, positions = _source(spool, team_id, wanted, after)
    found: list[ContactRecord] = []
    last = after
    examined = 0
    async with aclosing(positions):
        async for position, contact in positions:
            if examined == budget:
                return ContactPage(found, last, True, examined, source)
            examined += 1
            if contact is not None and wanted.matches(contact):
                if len(found) == limit:
                    return ContactPage(found, last, False, examined, source)
                found.append(contact)
            last = position
    return ContactPage(found, None, False, examined, source)


Positions = AsyncGenerator[tuple[str, ContactRecord | None], None]


def _source(
    spool: Spool, team_id: str, wanted: ContactFilter, after: str | None
) -> tuple[str, Positions]:
    if wanted.address:
        return "address", _by_address(spool, team_id, wanted.address.lower(), after)
    if wanted.segment_id is not None:
        return "segment", _members(spool, team_id, wanted.segment_id, after)
    return "contacts", _newest_first(spool, team_id, after)


async def _with_contacts(
    spool: Spool, team_id: str, positions: list[tuple[str, str]]
) -> list[tuple[str, ContactRecord | None]]:
    """(position, contact id) pairs of a chunk with their contacts, read together."""

    async def contact_of(position: tuple[str, str]) -> ContactRecord | None:
        return await get_contact_parked(spool, team_id, position[1])

    contacts = await in_order(contact_of, positions, at_once=_CONTACTS_AT_ONCE)
    return [(at, contact) for (at, _), contact in zip(positions, contacts, strict=True)]


async def _by_address(spool: Spool, team_id: str, start: str, after: str | None) -> Positions:
    """Contacts whose address starts with `start`, in address order; positions are lower-case
    addresses."""
    team = team_prefix(team_id)
    cursor = None if after is None else team + after
    while True:
        rows = await CONTACT_EMAILS.ascan(spool, prefix=team + start, cursor=cursor, limit=_CHUNK)
        chunk = [(key[len(team) :], entry.contact_id) for key, entry in rows]
        for pair in await _with_contacts(spool, team_id, chunk):
            yield pair
        if len(rows) < _CHUNK:
            return
        cursor = rows[-1][0]


async def _members(spool: Spool, team_id: str, segment_id: str, after: str | None) -> Positions:
    """The segment's members, newest contact first; positions are contact ids."""
    prefix = members_prefix(team_id, segment_id)
    cursor = None if after is None else prefix + after
    while True:
        rows = await SEGMENT_MEMBERS.ascan(
            spool, prefix=prefix, cursor=cursor, reverse=True, limit=_CHUNK
        )
        chunk = [(key[len(prefix) :], key[len(prefix) :]) for key, _ in rows]
        for pair in await _with_contacts(spool, team_id, chunk):
            yield pair
        if len(rows) < _CHUNK:
            return
        cursor = rows[-1][0]


async def _newest_first(spool: Spool, team_id: str, after: str | None) -> Positions:
    prefix = team_prefix(team_id)
    cursor = None if after is None else prefix + after
    while True:
        rows = await CONTACTS.ascan(spool, prefix=prefix, cursor=cursor, reverse=True, limit=_CHUNK)
        for key, contact in rows:
            yield key[len(prefix) :], contact
        if len(rows) < _CHUNK:
            return
        cursor = rows[-1][0]
