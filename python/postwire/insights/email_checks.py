"""The insights of one email, from its record, its message (queued, held by the sandbox, or the
copy delivery keeps for these checks), its sending identity's DNS and its recipients' history.

What is read where:
- authentication: the identity's `AuthCheck`, looked up in DNS again when older than
  `AUTH_FRESH_MS` (every email of one identity shares it: no DNS query per email);
- content: the HTML and text the record keeps (REST emails), else the message's own parts
  (SMTP emails, while queued or held by the sandbox); a broadcast's emails are judged by the
  broadcast's content and their `List-Unsubscribe` fields, which the broadcast engine writes;
  an SMTP email whose message is no longer kept (delivered while insights were off) has
  nothing left to read (`content_not_checked`);
- rspamd scans the message as sent, so only while one of those keeps it (`rspamd_skipped`).
The HTML checks are cached by content: a batch of one newsletter parses its HTML once.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from email.utils import parseaddr
from typing import Final, Generic, TypeVar

import trio

from postwire._core import WriteBatch
from postwire.compose.addresses import ascii_domain
from postwire.compose.html_text import html_to_text
from postwire.config import Config
from postwire.domains.records import spf_value
from postwire.domains.store import DomainRecord, load_domain
from postwire.domains.verification import DnsResolver
from postwire.insights.authentication import authentication_findings
from postwire.insights.catalogue import Finding, finding
from postwire.insights.content import ContentFacts, body_findings, unsubscribe_findings
from postwire.insights.dns_facts import Identity, gather_auth_facts
from postwire.insights.message_source import body_texts, header_fields, split_message
from postwire.insights.model import Insight
from postwire.insights.reading import stored_finding
from postwire.insights.recipients import DomainCounts, domain_counts_reader, recipient_findings
from postwire.store.broadcasts import get_broadcast
from postwire.store.email_details import RawSource
from postwire.store.email_insights import (
    AuthCheck,
    StoredInsights,
    auth_key,
    get_auth_check,
    put_auth_check,
)
from postwire.store.emails import EmailRecord
from postwire.store.spool import Spool
from postwire.unsubscribe.links import list_unsubscribe_headers, unsubscribe_url

log = logging.getLogger("postwire.insights")

# An identity's DNS facts are reused for new emails this long before DNS is asked again.
AUTH_FRESH_MS: Final = 10 * 60 * 1000
# The fields the unsubscribe checks read (the rest would only spoil the cache).
UNSUBSCRIBE_FIELDS: Final = ("list-unsubscribe", "list-unsubscribe-post", "precedence", "list-id")
# Content checks, message bodies and broadcasts remembered, by content (or id): a few, as
# they hold whole bodies.
CACHE_SIZE: Final = 64
# Domain records and recipient domains' rates are read again after this long (and all of them
# once there are this many).
RECORD_CACHE_MS: Final = 60_000
RECORD_CACHE_ENTRIES: Final = 4096

Scanner = Callable[..., Awaitable[list[Insight]]]
Bodies = tuple[str | None, str | None]  # HTML and text
ContentKey = tuple[str | None, str | None, str, str, bool]
KeyT = TypeVar("KeyT")
ValueT = TypeVar("ValueT")


def rspamd_scanner() -> Scanner | None:
    """`postwire.insights.rspamd.scan_message`, where this version has it."""
    try:
        module = importlib.import_module("postwire.insights.rspamd")
    except ModuleNotFoundError:
        return None
    scanner: Scanner | None = getattr(module, "scan_message", None)
    return scanner


@functools.lru_cache(maxsize=1024)
def from_domain_of(sender: str) -> str:
    """The domain of a From field as sent (`Name <a@b>`), lower case, IDN as A-labels."""
    address = parseaddr(sender)[1]
    return ascii_domain(address).rpartition("@")[2].lower()


class EmailChecker:
    """Computes emails' insights; one per insights service, keeping its caches."""

    def __init__(
        self,
        config: Config,
        spool: Spool,
        resolver: DnsResolver,
        clock_ms: Callable[[], int],
        *,
        domain_counts: DomainCounts | None = None,
        scanner: Scanner | None = None,
    ) -> None:
        self.config = config
        self.spool = spool
        self.resolver = resolver
        self.clock_ms = clock_ms
        self.domain_counts = domain_counts or domain_counts_reader()
        self.scanner = scanner or (rspamd_scanner() if config.insights.rspamd_url else None)
        self._content: LruCache[ContentKey, list[Finding]] = LruCache()
        self._bodies: LruCache[tuple[tuple[str, ...], bytes], Bodies] = LruCache()
        self._broadcasts: LruCache[str, Bodies] = LruCache()
        # (read at ms, value) of domain records and of recipient domains' counts.
        self._domains: dict[str, tuple[int, DomainRecord | None]] = {}
        self._domain_counts: dict[tuple[str, int, int], tuple[int, dict[str, int]]] = {}
        self._auth: dict[str, AuthCheck] = {}
        # One DNS check of an identity at a time: a batch of its emails waits for the first.
        self._checking: dict[str, trio.Lock] = {}

    # --- authentication ------------------------------------------------------------------------

    def identity(self, domain: DomainRecord, from_domain: str) -> Identity:
        return Identity(
            from_domain=from_domain,
            signing_domain=domain.name,
            selector=domain.dkim_selector,
            dkim_txt=domain.dkim_dns_txt,
            return_path_host=domain.return_path_host,
            spf_expected=spf_value(self.config),
        )

    async def check_identity(
        self, batch: WriteBatch, domain: DomainRecord, from_domain: str
    ) -> AuthCheck:
        """Ask DNS about the identity now; the check goes into `batch`."""
        facts = await gather_auth_facts(self.resolver, self.identity(domain, from_domain))
        check = AuthCheck(
            team_id=domain.team_id,
            domain_id=domain.id,
            from_domain=from_domain,
            checked_at_ms=self.clock_ms(),
            findings=[stored_finding(f) for f in authentication_findings(facts)],
        )
        put_auth_check(batch, check)
        self._auth[auth_key(domain.team_id, domain.id, from_domain)] = check
        return check

    async def current_auth(
        self, batch: WriteBatch, domain: DomainRecord, from_domain: str
    ) -> AuthCheck:
        key = auth_key(domain.team_id, domain.id, from_domain)
        known = self._auth.get(key)
        if known is not None and self.clock_ms() - known.checked_at_ms <= AUTH_FRESH_MS:
            return known  # no lock, no checkpoint: nearly every email comes this way
        async with self._checking.setdefault(key, trio.Lock()):
            check = self._auth.get(key) or get_auth_check(self.spool, key)
            if check is None or self.clock_ms() - check.checked_at_ms > AUTH_FRESH_MS:
                return await self.check_identity(batch, domain, from_domain)
            self._auth[key] = check
            return check

    # --- one email -----------------------------------------------------------------------------

    def _cached_content(self, facts: ContentFacts) -> list[Finding]:
        # The content itself is the key: hashing a str is faster than any digest of it, and
        # the dictionary compares the few candidates with memcmp.
        key = (facts.html, facts.text, facts.from_domain, facts.public_url, facts.tracked)
        found = self._content.get_or_make(key, lambda: body_findings(facts))
        return found + unsubscribe_findings(facts)

    def _message_bodies(self, raw: bytes) -> tuple[str | None, str | None]:
        head, body = split_message(raw)
        content_type = [value for _, value in header_fields(head, ("content-type",))]
        return self._bodies.get_or_make((tuple(content_type), body), lambda: body_texts(raw))

    def _broadcast_content(self, team_id: str, broadcast_id: str) -> tuple[str | None, str | None]:
        def read() -> tuple[str | None, str | None]:
            broadcast = get_broadcast(self.spool, team_id, broadcast_id)
            if broadcast is None:
                return None, None
            html = broadcast.html
            return html, broadcast.text or (html_to_text(html) if html else None)

        return self._broadcasts.get_or_make(f"{team_id}/{broadcast_id}", read)

    def _domain(self, team_id: str, domain_id: str, now_ms: int) -> DomainRecord | None:
        key = f"{team_id}/{domain_id}"
        cached = self._domains.get(key)
        if cached is None or now_ms - cached[0] > RECORD_CACHE_MS:
            if len(self._domains) > RECORD_CACHE_ENTRIES:
                self._domains.clear()
            cached = self._domains[key] = (now_ms, load_domain(self.spool, team_id, domain_id))
        return cached[1]

    def _recipient_domain_counts(
        self, spool: Spool, domain: str, first_hour: int, end_hour: int
    ) -> dict[str, int]:
        if self.domain_counts is None:
            return {}
        now_ms = self.clock_ms()
        key = (domain, first_hour, end_hour)
        cached = self._domain_counts.get(key)
        if cached is None or now_ms - cached[0] > RECORD_CACHE_MS:
            if len(self._domain_counts) > RECORD_CACHE_ENTRIES:
                self._domain_counts.clear()
            counts = self.domain_counts(spool, domain, first_hour, end_hour)
            cached = self._domain_counts[key] = (now_ms, counts)
        return cached[1]

    def _content_facts(
        self, record: EmailRecord, domain: DomainRecord | None, raw: bytes | None
    ) -> ContentFacts | None:
        public_url = self.config.api.public_url
        html, text = record.html, record.text
        headers = None if raw is None else header_fields(raw, UNSUBSCRIBE_FIELDS)
        if record.broadcast_id is not None:
            html, text = self._broadcast_content(record.team_id, record.broadcast_id)
            if headers is None:  # as the broadcast engine writes them for every member
                headers = list_unsubscribe_headers(unsubscribe_url(public_url, "token"), None)
        elif html is None and text is None and raw is not None:
            html, text = self._message_bodies(raw)
        if html is None and text is None:
            return None
        tracks = domain is not None and (domain.open_tracking or domain.click_tracking)
        return ContentFacts(
            html=html,
            text=text,
            from_domain=from_domain_of(record.sender),
            public_url=public_url,
            tracked=record.broadcast_id is not None or (tracks and html is not None),
            bulk=record.broadcast_id is not None,
            headers=headers,
        )

    async def insights_of(
        self, batch: WriteBatch, record: EmailRecord, source: RawSource | None
    ) -> StoredInsights:
        """The email's insights (and any identity check made for them, in `batch`), judged by
        `source`, its message where the caller found it (`raw_source_parked`)."""
        now_ms = self.clock_ms()
        domain = self._domain(record.team_id, record.domain_id, now_ms)
        raw = None if source is None else source.content
        findings: list[Finding | Insight] = []
        check: AuthCheck | None = None
        if domain is None:
            findings.append(finding("domain_removed"))
        elif not self.config.sandbox:  # the sandbox asks no DNS: nothing leaves the machine
            check = await self.current_auth(batch, domain, from_domain_of(record.sender))
        facts = self._content_facts(record, domain, raw)
        findings += (
            [finding("content_not_checked")] if facts is None else self._cached_content(facts)
        )
        counts = None if self.domain_counts is None else self._recipient_domain_counts
        findings += await recipient_findings(
            self.spool, record.team_id, record.id, record.recipients, now_ms, counts
        )
        if self.scanner is not None:
            findings += await self._scan(record, raw)
        return StoredInsights(
            computed_at_ms=now_ms,
            findings=[stored_finding(f) for f in findings],
            auth_key=None
            if check is None
            else auth_key(check.team_id, check.domain_id, check.from_domain),
            # Not copied: the identity's check is read with the email (and rechecked).
            authentication=[],
            auth_checked_at_ms=None if check is None else check.checked_at_ms,
        )

    async def _scan(
        self, record: EmailRecord, message: bytes | None
    ) -> Sequence[Finding | Insight]:
        if message is None or self.scanner is None:
            return [finding("rspamd_skipped")]
        try:
            return await self.scanner(
                self.config, message, sender=record.envelope_from, recipients=record.recipients
            )
        except Exception:  # the scanner reports its own failures; this is a bug in it
            log.exception("rspamd scan of email %s failed", record.id)
            return []


class LruCache(Generic[KeyT, ValueT]):
    """The last `CACHE_SIZE` values made, by key."""

    def __init__(self) -> None:
        self._values: OrderedDict[KeyT, ValueT] = OrderedDict()

    def get_or_make(self, key: KeyT, make: Callable[[], ValueT]) -> ValueT:
        if key in self._values:
            self._values.move_to_end(key)
            return self._values[key]
        value = self._values[key] = make()
        if len(self._values) > CACHE_SIZE:
            self._values.popitem(last=False)
        return value
