"""The dashboard's list of a team's emails: filters, search and cursor paging, always bounded.

One source is walked per request, newest first (or oldest first when paging to newer emails):
the status, API-key or domain index when the filter names one (`store/email_index.py`), else
the team's email records. A date range is a key range of that source, since email ids are
UUIDv7. Every other condition (from, to, subject, tag, the search box, a second indexed
filter) is checked on the records the walk reads, and the walk reads at most `budget` of them:
a request that runs out of budget before its page is full returns what it found with a cursor
to continue from, so no request is ever unbounded, however rare its matches. Its reads are
parked, never blocking the process on a table store on the network, and the records an index
chunk names are read together (their round trips overlap).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final

import orjson

from postwire.concurrency import in_order
from postwire.store.email_index import (
    API_KEY,
    DOMAIN,
    STATUS,
    index_id_chunks,
    index_prefix,
)
from postwire.store.emails import EMAILS, EmailRecord, email_key
from postwire.store.spool import Spool

# Records a request may read before it answers with what it found (a partial page). Reading a
# record costs a few microseconds: this bounds a request to some tens of milliseconds.
SCAN_BUDGET: Final = 2000
# Keys or records read from the spool at a time.
_CHUNK: Final = 200
# Records of an index chunk waiting at once: on a table store on the network, gets that wait
# together leave as one statement.
_RECORDS_AT_ONCE: Final = 64


@dataclass(frozen=True, slots=True)
class EmailFilter:
    """What the Emails page asks for; empty fields do not filter. Text fields match
    case-insensitively anywhere in their field; `tag` is `name` or `name=value`."""

    status: str | None = None
    domain_id: str | None = None
    api_key_id: str | None = None
    since_ms: int | None = None  # created at or after (ms since the epoch)
    until_ms: int | None = None  # created before
    sender: str = ""
    to: str = ""
    subject: str = ""
    tag: str = ""
    search: str = ""  # any of to, from and subject

    def matches(self, record: EmailRecord) -> bool:
        if self.status is not None and record.last_event != self.status:
            return False
        if self.domain_id is not None and record.domain_id != self.domain_id:
            return False
        if self.api_key_id is not None and record.api_key_id != self.api_key_id:
            return False
        sender = record.sender.lower()
        to = " ".join(record.to).lower()
        subject = record.subject.lower()
        if self.sender and self.sender.lower() not in sender:
            return False
        if self.to and self.to.lower() not in to:
            return False
        if self.subject and self.subject.lower() not in subject:
            return False
        if self.search:
            term = self.search.lower()
            if term not in sender and term not in to and term not in subject:
                return False
        return not self.tag or _has_tag(record, self.tag)

    def raw_terms(self) -> RawTerms:
        """What every matching record's stored JSON contains, to skip decoding those that
        cannot match: indexed values and tags as orjson writes them, and the ASCII text terms
        that JSON stores as they are (compared lower-cased)."""
        exact = [
            b'"%s":%s' % (name.encode(), orjson.dumps(value))
            for name, value in (
                ("last_event", self.status),
                ("domain_id", self.domain_id),
                ("api_key_id", self.api_key_id),
            )
            if value is not None
        ]
        if self.tag:
            name, has_value, value = self.tag.partition("=")
            tag = b'{"name":' + orjson.dumps(name) + b","
            exact.append(tag + b'"value":' + orjson.dumps(value) + b"}" if has_value else tag)
        texts = [self.sender, self.to, self.subject, self.search]
        folded = [
            text.lower().encode()
            for text in texts
            if text and text.isascii() and text.isprintable() and not {'"', "\\"} & set(text)
        ]
        return RawTerms(tuple(exact), tuple(folded))


@dataclass(frozen=True, slots=True)
class RawTerms:
    exact: tuple[bytes, ...]  # byte for byte
    folded: tuple[bytes, ...]  # in the record's bytes lower-cased

    def admit(self, raw: bytes) -> bool:
        if not all(term in raw for term in self.exact):
            return False
        if not self.folded:
            return True
        lowered = raw.lower()
        return all(term in lowered for term in self.folded)


def _has_tag(record: EmailRecord, wanted: str) -> bool:
    name, has_value, value = wanted.partition("=")
    return any(
        tag.get("name") == name and (not has_value or tag.get("value") == value)
        for tag in record.tags
    )


@dataclass(frozen=True, slots=True)
class EmailPage:
    """A page of emails, newest first, and where to go from it.

    `older` and `newer` are cursors (email ids or id bounds, opaque to the page) for the next
    request's `after` and `before`; None when nothing lies that way. `partial` says the budget
    ran out before the page was full: the cursor that way continues the search.
    """

    emails: list[EmailRecord]
    older: str | None
    newer: str | None
    partial: bool = False
    examined: int = 0


def id_floor(ms: int) -> str:
    """The lowest UUIDv7 text of millisecond `ms`: every id made at `ms` or later sorts after
    it, every id made earlier before it (it is itself no id)."""
    digits = f"{ms:012x}"
    return f"{digits[:8]}-{digits[8:]}"


async def find_emails(
    spool: Spool,
    team_id: str,
    wanted: EmailFilter,
    *,
    limit: int,
    after: str | None = None,
    before: str | None = None,
    budget: int = SCAN_BUDGET,
) -> EmailPage:
    """A page of the team's emails that match `wanted`, newest first: older than `after`, or
    else newer than `before`, or else the newest. Reads at most `budget` records."""
    lower = None if wanted.since_ms is None else id_floor(wanted.since_ms)
    upper = None if wanted.until_ms is None else id_floor(wanted.until_ms)
    start: str | None
    older: str | None
    newer: str | None
    if before is not None:
        start = before if lower is None else max(before, lower)
        walk = await _walk(spool, team_id, wanted, start, upper, False, limit, budget)
        page = walk.found[:limit][::-1]
        newer = walk.resume or (page[0].id if walk.more else None)
        older = page[-1].id if page else before
    else:
        start = after if upper is None or (after is not None and after < upper) else upper
        walk = await _walk(spool, team_id, wanted, start, lower, True, limit, budget)
        page = walk.found[:limit]
        older = walk.resume or (page[-1].id if walk.more else None)
        newer = None if after is None else (page[0].id if page else after)
    return EmailPage(page, older, newer, walk.resume is not None, walk.read)


@dataclass(slots=True)
class _Walk:
    found: list[EmailRecord]
    more: bool = False  # more than the page's limit matched
    resume: str | None = None  # the budget ran out: the last id read
    read: int = 0


async def _walk(
    spool: Spool,
    team_id: str,
    wanted: EmailFilter,
    start: str | None,
    stop: str | None,
    reverse: bool,
    limit: int,
    budget: int,
) -> _Walk:
    """Up to `limit` + 1 matches strictly beyond `start`, walking the best source newest first
    (`reverse`) or oldest first, up to `stop`, reading at most `budget` records."""
    walk = _Walk([])
    last_read = start
    terms = wanted.raw_terms()
    async with aclosing(_source(spool, team_id, wanted, start, reverse)) as source:
        async for email_id, raw in source:
            if stop is not None and (email_id < stop if reverse else email_id >= stop):
                break
            if walk.read == budget:
                walk.resume = last_read
                break
            walk.read += 1
            last_read = email_id
            if raw is None or not terms.admit(raw):
                continue
            record = EMAILS.decode(raw)
            if wanted.matches(record):
                walk.found.append(record)
                if len(walk.found) > limit:
                    walk.more = True
                    break
    return walk


async def _source(
    spool: Spool, team_id: str, wanted: EmailFilter, start: str | None, reverse: bool
) -> AsyncGenerator[tuple[str, bytes | None], None]:
    """(id, stored record) pairs from the best source; None for an index entry whose record
    is gone."""

    async def record_of(email_id: str) -> bytes | None:
        return await spool.aget(EMAILS.name, email_key(team_id, email_id).encode())

    indexed = (
        (STATUS, wanted.status),
        (API_KEY, wanted.api_key_id),
        (DOMAIN, wanted.domain_id),
    )
    for kind, value in indexed:
        if value is not None:
            prefix = index_prefix(kind, team_id, value)
            chunks = index_id_chunks(spool, prefix, start, reverse=reverse, chunk=_CHUNK)
            async with aclosing(chunks):
                async for email_ids in chunks:
                    raws = await in_order(record_of, email_ids, at_once=_RECORDS_AT_ONCE)
                    for pair in zip(email_ids, raws, strict=True):
                        yield pair
            return
    records = f"{team_id}/".encode()
    cursor = None if start is None else records + start.encode()
    while True:
        rows = await spool.ascan(
            EMAILS.name, prefix=records, cursor=cursor, reverse=reverse, limit=_CHUNK
        )
        for key, raw in rows:
            yield key[len(records) :].decode(), raw
        if len(rows) < _CHUNK:
            return
        cursor = rows[-1][0]
