"""The one accept path of outgoing mail, for the REST API and SMTP submission alike.

`prepare` checks that the team may send from the sender's domain, builds the MIME message (its
HTML with the domain's open and click tracking) and DKIM-signs it (off the Trio thread: signing
releases the GIL). `prepare_submitted` does the same for a message that arrived already built
(SMTP DATA, never tracked): it checks its From, strips Bcc and the idempotency headers, and
signs it. `commit` writes the prepared emails, their records and an optional idempotency
record in one group-committed batch; only when it returns is any email accepted.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from email import message_from_bytes
from email.message import EmailMessage
from email.parser import HeaderParser
from email.policy import SMTP as SMTP_EMAIL_POLICY
from email.policy import default as default_email_policy
from email.utils import format_datetime, formataddr, getaddresses, parseaddr
from typing import Any

import trio

from postwire import _core
from postwire.compose.addresses import ascii_domain, parse_mailbox
from postwire.compose.message import build_mime_message
from postwire.compose.request import SendRequest
from postwire.domains.store import (
    DomainRecord,
    find_verified_domain_for_sender,
    find_verified_domain_for_sender_parked,
)
from postwire.errors import ApiError, ConflictError, KeyExistsError, validation_error
from postwire.inbound.verp import VERP_SECRET, verp_address
from postwire.metrics.operator_registry import OPERATOR_METRICS
from postwire.signing import SigningQueue
from postwire.store.accounts import ApiKeyRecord, contract_timestamp
from postwire.store.deliveries import DELIVERIES, DeliveryRecord
from postwire.store.emails import EmailRecord, add_email
from postwire.store.idempotency import IdempotencyKeys, IdempotencyScope
from postwire.store.metric_counters import admit_tags
from postwire.store.server_secrets import server_secret
from postwire.store.spool import Spool
from postwire.webhooks.tracking import EmailTracking, Tracking

log = logging.getLogger("postwire.accept")

# Above this size the MIME build also leaves the Trio thread.
_BUILD_IN_THREAD_BYTES = 256 * 1024
# Signing releases the GIL: one thread per core keeps every core busy on a batch.
SIGNING_THREADS = os.cpu_count() or 2
# Emails built between two checkpoints of a large prepare_many (a few ms of the event loop).
BUILDS_BETWEEN_CHECKPOINTS = 25


@dataclass(frozen=True, slots=True)
class PreparedEmail:
    """A signed message and its record, ready to commit."""

    record: EmailRecord
    message: bytes
    due_at_ms: int
    tls: str  # the sending domain's TLS policy for delivery


@dataclass(slots=True)
class Draft:
    """A built message waiting for its signature."""

    # The record's fields but its size, known once signed (one construction, no replace()).
    fields: dict[str, Any]
    message: bytes
    due_at_ms: int
    signer: _core.DkimSigner
    tls: str
    signature: bytes = b""

    def prepared(self) -> PreparedEmail:
        signed = self.signature + self.message
        record = EmailRecord(**self.fields, size=len(signed))
        return PreparedEmail(record, signed, self.due_at_ms, self.tls)


# Headers of a submitted message that never leave: Bcc would reveal the blind recipients, the
# idempotency keys are for Postwire only (and must not be signed).
IDEMPOTENCY_HEADERS = (b"resend-idempotency-key", b"postwire-idempotency-key")
_STRIPPED_HEADERS = (b"bcc", *IDEMPOTENCY_HEADERS)

# A submitted message's fields that are not its sender's custom headers: those of RFC 5322
# (with its trace and Resent-* fields) and MIME (RFC 2045), which the API sets through its own
# body fields or writes itself, and the signatures and trace relays add. Everything else
# (X-*, List-*, Auto-Submitted, ...) counts as custom, as it would in the API's `headers`.
_STANDARD_FIELDS = frozenset(
    {
        "from", "sender", "reply-to", "to", "cc", "bcc", "message-id", "in-reply-to",
        "references", "subject", "comments", "keywords", "date", "return-path", "received",
        "mime-version", "dkim-signature", "authentication-results", "received-spf",
    }
)  # fmt: skip
_STANDARD_PREFIXES = ("resent-", "content-", "arc-")


@dataclass(frozen=True, slots=True)
class SubmittedMessage:
    """A message as a client submitted it, split into header fields (each with its folded
    continuation lines, no final CRLF) and body. Its lines end with CRLF: SMTP submission
    refuses a bare LF before parsing (`submission_policy.on_data`)."""

    fields: list[bytes]
    body: bytes

    @classmethod
    def parse(cls, message: bytes) -> SubmittedMessage:
        head, separator, body = message.partition(b"\r\n\r\n")
        if not separator:  # headers only
            head, body = message.removesuffix(b"\r\n"), b""
        fields: list[bytes] = []
        for line in head.split(b"\r\n") if head else []:
            if line[:1] in (b" ", b"\t") and fields:
                fields[-1] += b"\r\n" + line
            else:
                fields.append(line)
        return cls(fields, body)

    def values(self, name: bytes) -> list[str]:
        """The unfolded values of every field called `name` (lowercase)."""
        values = []
        for field_bytes in self.fields:
            field_name, colon, value = field_bytes.partition(b":")
            if colon and field_name.strip().lower() == name:
                values.append(_unfolded(value))
        return values

    def without(self, names: Sequence[bytes]) -> SubmittedMessage:
        kept = [f for f in self.fields if f.partition(b":")[0].strip().lower() not in names]
        return SubmittedMessage(kept, self.body)

    def with_field(self, field_bytes: bytes) -> SubmittedMessage:
        return SubmittedMessage([*self.fields, field_bytes], self.body)

    def to_bytes(self) -> bytes:
        return b"".join(f + b"\r\n" for f in self.fields) + b"\r\n" + self.body

    def custom_headers(self) -> list[dict[str, str]]:
        """The fields its sender added beyond the message format's own (`_STANDARD_FIELDS`),
        `{name, value}` in order with values decoded: what `headers` sets over the API."""
        custom = []
        for field_bytes in self.fields:
            raw_name, colon, value = field_bytes.partition(b":")
            name = raw_name.strip().decode("ascii", "replace")
            lowered = name.lower()
            if not colon or lowered in _STANDARD_FIELDS or lowered.startswith(_STANDARD_PREFIXES):
                continue
            custom.append({"name": name, "value": _decoded(_unfolded(value))})
        return custom

    def idempotency_key(self) -> str | None:
        for name in IDEMPOTENCY_HEADERS:
            values = self.values(name)
            if values:
                return values[0]
        return None


def _permitted_domain(
    domain: DomainRecord | None, key: ApiKeyRecord | None, sender_domain: str
) -> DomainRecord:
    """`domain`, found for an address at `sender_domain`, if `key` may send from it; else
    the 403."""
    if domain is None:
        raise ApiError(
            403,
            "validation_error",
            f"The `{sender_domain}` domain is not verified. Please, add and verify your domain.",
        )
    if key is not None and key.domain_id is not None and key.domain_id != domain.id:
        raise ApiError(
            403,
            "validation_error",
            f"This API key is restricted to sending from another domain, not `{sender_domain}`.",
        )
    return domain


def _sending_domains(request: SendRequest) -> list[str]:
    """The domains a request sends as, each checked like the first: its From's, then those of
    its `Sender` headers (parsed as one mailbox each by `parse_send_request`)."""
    addresses = [request.sender[1]]
    for name, value in request.headers:
        mailbox = parse_mailbox(value) if name.lower() == "sender" else None
        if mailbox is not None:
            addresses.append(mailbox[1])
    return [address.rpartition("@")[2].lower() for address in addresses]


@functools.lru_cache(maxsize=4096)
def header_addresses(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`getaddresses` of header values, kept for the next message: bulk mail repeats its From
    on every message, and the `email` package's parser was a fortieth of SMTP submission."""
    return tuple(getaddresses(values))


def _domain_of_one_address(values: list[str], refusal: str) -> str:
    """The lower-case domain of the one address `values` (header values) hold; 422 `refusal`
    when they hold none or several."""
    addresses = header_addresses(tuple(values))
    if len(addresses) != 1 or "@" not in addresses[0][1]:
        raise validation_error(refusal)
    return addresses[0][1].rpartition("@")[2].lower()


def _unfolded(value: bytes) -> str:
    """A field's raw value as one line of text, without its surrounding spaces."""
    return value.decode("utf-8", "replace").replace("\r\n", "").strip()


def _addresses(values: list[str]) -> list[str]:
    """`Name <a@b>` texts of the addresses in header values, as a mail client shows them."""
    return [formataddr(pair) for pair in header_addresses(tuple(values)) if pair[1]]


def _decoded(value: str) -> str:
    """A header value as text: RFC 2047 encoded words decoded. Plain ASCII values, nearly
    all of them, are already that: the `email` parser took 7% of SMTP submission under load."""
    if value.isascii() and "=?" not in value and "\r" not in value and "\n" not in value:
        return value
    header = HeaderParser(policy=default_email_policy).parsestr(f"Subject: {value}\n\n")
    return str(header["Subject"] or "")


def tracked_submission(tracking: EmailTracking, message: bytes) -> bytes:
    """A submitted message with its HTML parts tracked, before it is signed. The message is
    parsed and written again (its other parts keep their content, not always their exact
    octets); one the parser cannot take back whole is sent untracked."""
    try:
        parsed = message_from_bytes(message, policy=SMTP_EMAIL_POLICY)
        changed = False
        for part in parsed.walk():
            if part.get_content_type() != "text/html" or part.is_attachment():
                continue
            assert isinstance(part, EmailMessage)
            html = part.get_content()
            part.set_content(tracking.apply(html), subtype="html", charset="utf-8")
            changed = True
        return parsed.as_bytes(policy=SMTP_EMAIL_POLICY) if changed else message
    except Exception:  # a malformed part: the parser is lenient, but not total
        log.warning("an HTML part could not be tracked; the message goes untracked")
        return message


@dataclass(frozen=True, slots=True)
class IdempotentRequest:
    """A request made under an idempotency key: the key's scope and the request's fingerprint."""

    scope: IdempotencyScope
    fingerprint: str


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def verp_return_path(email_id: str, domain: DomainRecord, secret: bytes) -> str:
    """The envelope sender: unique per email, under the domain's return-path subdomain, so a
    bounce that reaches it names the email it is about; tagged with a MAC under `secret` (the
    spool's VERP secret), so nobody else can name an email in one."""
    return verp_address(secret, email_id, domain.return_path_host)


class Acceptor:
    """Turns validated send requests into durable, signed emails."""

    def __init__(
        self, spool: Spool, *, tracking: Tracking | None = None, path: str | None = None
    ) -> None:
        self.spool = spool
        self.path = path  # where its mail comes from, for the operator metrics (None: uncounted)
        self.tracking = tracking  # None: no tracking
        self.idempotency = IdempotencyKeys(spool)
        self.signing = SigningQueue()
        self._return_path_secret: bytes | None = None
        # Parsing a PEM key costs more than a signature: keep one signer per domain key.
        self._signers: dict[tuple[str, str], _core.DkimSigner] = {}

    async def return_path_secret(self) -> bytes:
        """The spool's VERP secret (made on the first start), read once."""
        if self._return_path_secret is None:
            self._return_path_secret = await server_secret(self.spool, VERP_SECRET)
        return self._return_path_secret

    def signer_for(self, domain: DomainRecord) -> _core.DkimSigner:
        cache_key = (domain.id, domain.dkim_dns_txt)
        signer = self._signers.get(cache_key)
        if signer is None:
            signer = _core.DkimSigner(
                domain.dkim_private_key_pem, domain.name, domain.dkim_selector
            )
            self._signers[cache_key] = signer
        return signer

    def sending_domain(
        self, team_id: str, key: ApiKeyRecord | None, sender_domain: str
    ) -> DomainRecord:
        """The verified domain an address at `sender_domain` may send from, or the 403."""
        found = find_verified_domain_for_sender(self.spool, team_id, sender_domain)
        return _permitted_domain(found, key, sender_domain)

    async def sending_domain_parked(
        self, team_id: str, key: ApiKeyRecord | None, sender_domain: str
    ) -> DomainRecord:
        """`sending_domain`, its reads parked rather than blocking on a table store on the
        network (intake asks it for every message)."""
        found = await find_verified_domain_for_sender_parked(self.spool, team_id, sender_domain)
        return _permitted_domain(found, key, sender_domain)

    async def prepare(
        self, team_id: str, key: ApiKeyRecord | None, request: SendRequest, now: datetime
    ) -> PreparedEmail:
        """Check, build and sign one email; raises the contract's error if it cannot send."""
        (outcome,) = await self.prepare_many(team_id, key, [request], now)
        if isinstance(outcome, ApiError):
            raise outcome
        return outcome

    async def prepare_many(
        self,
        team_id: str,
        key: ApiKeyRecord | None,
        requests: Sequence[SendRequest],
        now: datetime,
    ) -> list[PreparedEmail | ApiError]:
        """Check and build every email, then sign them all across the cores (signing releases
        the GIL, and it is most of the cost). An email that may not be sent is its ApiError."""
        return await self.sign_built(await self.build_many(team_id, key, requests, now))

    async def build_many(
        self,
        team_id: str,
        key: ApiKeyRecord | None,
        requests: Sequence[SendRequest],
        now: datetime,
    ) -> list[Draft | ApiError]:
        """`prepare_many`'s first half, on the event loop's thread: check and build every
        email, each a draft to sign or the ApiError that refuses it."""
        drafts: list[Draft | ApiError] = []
        domains: dict[str, DomainRecord | ApiError] = {}  # a batch mostly shares one sender
        created_at = contract_timestamp(now)  # once: a broadcast prepares thousands a second

        async def checked(sender_domain: str) -> DomainRecord | ApiError:
            if sender_domain not in domains:
                try:
                    domains[sender_domain] = await self.sending_domain_parked(
                        team_id, key, sender_domain
                    )
                except ApiError as refusal:
                    domains[sender_domain] = refusal
            return domains[sender_domain]

        for index, request in enumerate(requests):
            if index % BUILDS_BETWEEN_CHECKPOINTS == BUILDS_BETWEEN_CHECKPOINTS - 1:
                await trio.lowlevel.checkpoint()  # a broadcast's page: let requests run
            domain, *agents = [await checked(name) for name in _sending_domains(request)]
            refusal = next((d for d in (domain, *agents) if isinstance(d, ApiError)), None)
            if refusal is not None:
                drafts.append(refusal)
            elif isinstance(domain, DomainRecord):
                drafts.append(await self._draft(team_id, key, domain, request, now, created_at))
        return drafts

    async def sign_built(self, drafts: list[Draft | ApiError]) -> list[PreparedEmail | ApiError]:
        """`prepare_many`'s second half: sign `build_many`'s drafts in worker threads."""
        await self._sign([draft for draft in drafts if isinstance(draft, Draft)])
        return [draft if isinstance(draft, ApiError) else draft.prepared() for draft in drafts]

    async def prepare_submitted(
        self,
        team_id: str,
        key: ApiKeyRecord | None,
        recipients: Sequence[str],
        message: SubmittedMessage,
        now: datetime,
        *,
        received: Callable[[str], bytes] | None = None,
    ) -> PreparedEmail:
        """Check and sign a message submitted already built (SMTP DATA) for `recipients` (the
        envelope). `received` makes the `Received:` field put on top, given the email's id.
        Raises 403 if its From (or Sender) is not under a verified domain the key may send
        from, 422 if it has no single From address (or a Sender of more or less than one)."""
        sender_domain = _domain_of_one_address(
            message.values(b"from"), "The message must have a From header with one address."
        )
        domain = await self.sending_domain_parked(team_id, key, sender_domain)
        for value in message.values(b"sender"):  # who sent it on the author's behalf: as From
            agent_domain = _domain_of_one_address(
                [value], "The Sender header must have one address."
            )
            await self.sending_domain_parked(team_id, key, agent_domain)
        email_id = _core.new_id()
        message = message.without(_STRIPPED_HEADERS)
        custom_headers = message.custom_headers()  # before Postwire adds any
        if received is not None:  # trace fields go on top (RFC 5321 4.4)
            message = SubmittedMessage([received(email_id), *message.fields], message.body)
        message_ids = message.values(b"message-id")
        if message_ids:
            message_id = message_ids[0]
        else:
            message_id = f"<{email_id}@{domain.name}>"
            message = message.with_field(f"Message-ID: {message_id}".encode())
        if not message.values(b"date"):
            date = format_datetime(now)
            message = message.with_field(f"Date: {date}".encode())
        to = _addresses(message.values(b"to"))
        cc = _addresses(message.values(b"cc"))
        visible = {parseaddr(a)[1].lower() for a in (*to, *cc)}
        subjects = message.values(b"subject")
        fields: dict[str, Any] = dict(
            id=email_id,
            team_id=team_id,
            domain_id=domain.id,
            sender=_decoded(message.values(b"from")[0]),
            to=to,
            subject=_decoded(subjects[0]) if subjects else "",
            message_id=message_id,
            created_at=contract_timestamp(now),
            last_event="queued",
            envelope_from=verp_return_path(email_id, domain, await self.return_path_secret()),
            recipients=[ascii_domain(address) for address in recipients],
            cc=cc,
            bcc=[r for r in recipients if r.lower() not in visible],
            reply_to=_addresses(message.values(b"reply-to")),
            api_key_id=None if key is None else key.id,
            headers=custom_headers,
        )
        body = message.to_bytes()  # signed below, with the other drafts' signer
        if self.tracking is not None:
            tracking = await self.tracking.for_email(
                team_id, email_id, opens=domain.open_tracking, clicks=domain.click_tracking
            )
            if tracking is not None:
                if len(body) > _BUILD_IN_THREAD_BYTES:
                    body = await trio.to_thread.run_sync(tracked_submission, tracking, body)
                else:
                    body = tracked_submission(tracking, body)
        draft = Draft(fields, body, _millis(now), self.signer_for(domain), domain.tls)
        await self._sign([draft])
        return draft.prepared()

    async def _draft(
        self,
        team_id: str,
        key: ApiKeyRecord | None,
        domain: DomainRecord,
        request: SendRequest,
        now: datetime,
        created_at: str,
    ) -> Draft:
        email_id = _core.new_id()
        message_id = f"<{email_id}@{domain.name}>"
        tracking = None
        tracks = domain.open_tracking or domain.click_tracking
        if self.tracking is not None and request.html is not None and tracks:
            tracking = await self.tracking.for_email(
                team_id, email_id, opens=domain.open_tracking, clicks=domain.click_tracking
            )

        def build() -> bytes:
            # Before signing, so the signature covers the tracked HTML; the record keeps the
            # HTML as sent.
            sent = request
            if tracking is not None and request.html is not None:
                sent = dataclasses.replace(request, html=tracking.apply(request.html))
            return build_mime_message(sent, message_id=message_id)

        if request.size > _BUILD_IN_THREAD_BYTES:
            message = await trio.to_thread.run_sync(build)
        else:
            message = build()
        scheduled = request.scheduled_at
        fields: dict[str, Any] = dict(
            id=email_id,
            team_id=team_id,
            domain_id=domain.id,
            sender=request.from_as_sent,
            to=list(request.to_as_sent),
            subject=request.subject,
            message_id=message_id,
            created_at=created_at,
            last_event="scheduled" if scheduled is not None else "queued",
            envelope_from=verp_return_path(email_id, domain, await self.return_path_secret()),
            # The envelope, as DNS, RCPT TO and bounce reports name it: IDN domains as A-labels.
            recipients=[
                ascii_domain(address) for _, address in (*request.to, *request.cc, *request.bcc)
            ],
            cc=list(request.cc_as_sent),
            bcc=list(request.bcc_as_sent),
            reply_to=list(request.reply_to_as_sent),
            # A broadcast's million messages do not each keep their HTML: the broadcast does.
            html=request.html if request.broadcast_id is None else None,
            text=request.text if request.broadcast_id is None else None,
            tags=[{"name": tag.name, "value": tag.value} for tag in request.tags],
            scheduled_at=None if scheduled is None else contract_timestamp(scheduled),
            template_id=request.template_id,
            broadcast_id=request.broadcast_id,
            api_key_id=None if key is None else key.id,
            # A broadcast's headers are Postwire's (unsubscribe links), none of its sender's.
            headers=[]
            if request.broadcast_id is not None
            else [{"name": name, "value": value} for name, value in request.headers],
        )
        due = scheduled if scheduled is not None else now
        return Draft(fields, message, _millis(due), self.signer_for(domain), domain.tls)

    async def _sign(self, drafts: list[Draft]) -> None:
        """Sign in as many worker threads as there are cores, one chunk of drafts each."""
        if not drafts:
            return
        chunks = [drafts[i::SIGNING_THREADS] for i in range(min(SIGNING_THREADS, len(drafts)))]

        def sign_chunk(chunk: list[Draft]) -> None:
            # One GIL release per signer and chunk: retaking the GIL after every signature
            # waited on the event loop's thread, which builds the next page meanwhile.
            by_signer: dict[int, list[Draft]] = {}
            for draft in chunk:
                by_signer.setdefault(id(draft.signer), []).append(draft)
            for same in by_signer.values():
                signatures = same[0].signer.sign_many([draft.message for draft in same])
                for draft, signature in zip(same, signatures, strict=True):
                    draft.signature = signature

        started = time.perf_counter()
        if len(drafts) == 1:  # one email, SMTP's case: batched with other callers' emails
            drafts[0].signature = await self.signing.sign(drafts[0].signer, drafts[0].message)
        else:
            async with trio.open_nursery() as nursery:
                for chunk in chunks:
                    nursery.start_soon(trio.to_thread.run_sync, sign_chunk, chunk)
        OPERATOR_METRICS.signed(len(drafts), time.perf_counter() - started)

    async def accept(
        self,
        prepare: Callable[[], Awaitable[tuple[list[PreparedEmail], dict[str, Any]]]],
        *,
        idempotent: IdempotentRequest | None,
        status: int,
        now: datetime,
    ) -> dict[str, Any]:
        """Prepare emails and commit them, with the idempotency record when there is a key;
        return the response, which stands only once the commit is on disk.

        Under a key: a request still running with it is 409, one already answered is answered
        again from its record (409 if its content differs), and `prepare` is not called.
        """
        if idempotent is None:
            prepared, response = await prepare()
            return await self._commit(prepared, response, None, status, now)
        with self.idempotency.in_flight(idempotent.scope):
            stored = self.idempotency.replay(idempotent.scope, idempotent.fingerprint, _millis(now))
            if stored is not None:
                return stored.response
            prepared, response = await prepare()
            return await self._commit(prepared, response, idempotent, status, now)

    async def _commit(
        self,
        prepared: list[PreparedEmail],
        response: dict[str, Any],
        idempotent: IdempotentRequest | None,
        status: int,
        now: datetime,
    ) -> dict[str, Any]:
        batch = _core.WriteBatch()
        self.add_to_batch(batch, prepared, now)
        if idempotent is not None:
            self.idempotency.record(
                batch, idempotent.scope, idempotent.fingerprint, status, response, _millis(now)
            )
        try:
            await self.spool.commit(batch)
        except (KeyExistsError, ConflictError) as refusal:
            # Another process or node committed the same idempotency key first (or replaced
            # its expired record first): answer as it did.
            if idempotent is None or refusal.table != "idempotency":
                raise
            stored = self.idempotency.replay(idempotent.scope, idempotent.fingerprint, _millis(now))
            if stored is None:
                raise
            return stored.response
        OPERATOR_METRICS.count_accepted(self.path, len(prepared))
        return response

    def add_to_batch(
        self, batch: _core.WriteBatch, emails: Sequence[PreparedEmail], now: datetime
    ) -> None:
        for email in emails:
            add_email(batch, email.record, email.message, email.due_at_ms, _millis(now))
            delivery = DeliveryRecord(
                team_id=email.record.team_id,
                envelope_from=email.record.envelope_from,
                recipients=email.record.recipients,
                tls=email.tls,
                broadcast_id=email.record.broadcast_id,
                domain_id=email.record.domain_id,
                tags=list(admit_tags(batch, self.spool, email.record.team_id, email.record.tags)),
            )
            DELIVERIES.put(batch, email.record.id, delivery)
