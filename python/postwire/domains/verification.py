"""Checking a domain's DNS records, and the service that keeps every domain's status current.

`check_records` asks DNS for each record and says what it found (`RecordCheck`); the policy that
turns that into statuses is pure (`records.next_record_status`). `serve_domain_verifier` runs the
checks: at once when asked through its handle, and again every
`domains.verify_interval_seconds` for every domain whose verification was started.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.rdtypes.ANY.MX
import dns.rdtypes.ANY.TXT
import dns.resolver
import trio

from postwire.config import split_host_port
from postwire.domains.records import CheckOutcome, DnsRecord, RecordCheck
from postwire.domains.store import (
    DomainRecord,
    domain_dns_records,
    load_domain,
    scan_all_domains,
)
from postwire.domains.verification_state import (
    drop_other_claims,
    record_check_results,
    start_verification,
)
from postwire.errors import SpoolError, StoreUnavailableError
from postwire.store.outages import Outage

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.services import ServiceDeps
    from postwire.store.spool import Spool

log = logging.getLogger("postwire.domains")

# Per query: how long one server may take, and how long all tries together may.
QUERY_TIMEOUT_SECONDS: Final = 2.0
QUERY_LIFETIME_SECONDS: Final = 5.0
# Checks of different domains running at once, and triggers waiting for one.
CONCURRENT_CHECKS: Final = 16
REQUEST_QUEUE_SIZE: Final = 1024


class DnsResolver(Protocol):
    """What the checks need of a resolver: dnspython's async `resolve`, or a test's stand-in."""

    async def resolve(self, qname: str, rdtype: str) -> dns.resolver.Answer: ...


def build_resolver(config: Config) -> dns.asyncresolver.Resolver:
    """A resolver for `dns.nameservers` ("ip:port" each), or the system's when that is empty.

    It keeps no cache: a check must see what the domain's servers say now.
    """
    if not config.dns.nameservers:
        try:
            resolver = dns.asyncresolver.Resolver(configure=True)
        except dns.resolver.NoResolverConfiguration as exc:
            # Not fatal for the whole server: every check is a temporary failure until fixed.
            log.warning("no DNS resolver for domain verification (%s); set dns.nameservers", exc)
            resolver = dns.asyncresolver.Resolver(configure=False)
    else:
        resolver = dns.asyncresolver.Resolver(configure=False)
        servers: list[str | dns.nameserver.Nameserver] = []
        for entry in config.dns.nameservers:
            host, port = split_host_port(entry)
            servers.append(dns.nameserver.Do53Nameserver(host, port))
        resolver.nameservers = servers
    resolver.cache = None
    resolver.timeout = QUERY_TIMEOUT_SECONDS
    resolver.lifetime = QUERY_LIFETIME_SECONDS
    return resolver


# --- one check ---------------------------------------------------------------------------------


async def check_records(records: Sequence[DnsRecord], resolver: DnsResolver) -> list[RecordCheck]:
    """Look every record up at once; the checks come back in the order of `records`."""
    checks: list[RecordCheck | None] = [None] * len(records)

    async def check(index: int) -> None:
        checks[index] = await check_record(records[index], resolver)

    async with trio.open_nursery() as nursery:
        for index in range(len(records)):
            nursery.start_soon(check, index)
    return [check for check in checks if check is not None]


async def check_record(record: DnsRecord, resolver: DnsResolver) -> RecordCheck:
    """What DNS says about one record: found, missing, mismatch or temporary_failure."""
    try:
        answer = await resolver.resolve(record.fqdn, record.type)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return RecordCheck(record, "missing", f"no {record.type} record at {record.fqdn}")
    except dns.exception.Timeout:
        return RecordCheck(record, "temporary_failure", f"DNS timed out asking for {record.fqdn}")
    except (dns.exception.DNSException, OSError) as exc:
        # SERVFAIL or REFUSED from every server (NoNameservers), no resolver configured, ...
        return RecordCheck(record, "temporary_failure", f"DNS failed for {record.fqdn}: {exc}")
    if record.type == "MX":
        outcome, detail = _compare_mx(record, answer)
    elif record.record == "DKIM":
        outcome, detail = _compare_dkim(record, _txt_values(answer))
    elif record.record == "SPF":
        outcome, detail = _compare_spf(record, _txt_values(answer))
    else:
        outcome, detail = _compare_dmarc(record, _txt_values(answer))
    return RecordCheck(record, outcome, detail)


def _txt_values(answer: dns.resolver.Answer) -> list[str]:
    """Each TXT record's strings joined into one value (long values are split in DNS)."""
    values = []
    for rdata in answer:
        if isinstance(rdata, dns.rdtypes.ANY.TXT.TXT):
            values.append(b"".join(rdata.strings).decode("utf-8", errors="replace"))
    return values


def _compare_mx(record: DnsRecord, answer: dns.resolver.Answer) -> tuple[CheckOutcome, str]:
    seen = []
    for rdata in answer:
        if isinstance(rdata, dns.rdtypes.ANY.MX.MX):
            host = rdata.exchange.to_text(omit_final_dot=True).lower()
            if host == record.value and rdata.preference == record.priority:
                return "found", f"MX {record.priority} {record.value}"
            seen.append(f"{rdata.preference} {host}")
    return "mismatch", f"MX at {record.fqdn} is {', '.join(seen) or 'empty'}, not {record.value}"


def _dkim_public_key(txt: str) -> str | None:
    """The `p=` tag of a DKIM key record, whitespace removed (RFC 6376 allows folding it)."""
    for part in txt.split(";"):
        tag, sep, value = part.partition("=")
        if sep and tag.strip() == "p":
            return re.sub(r"\s+", "", value)
    return None


def _compare_dkim(record: DnsRecord, values: list[str]) -> tuple[CheckOutcome, str]:
    expected = _dkim_public_key(record.value)
    keys = [_dkim_public_key(value) for value in values]
    if expected is not None and expected in keys:
        return "found", "the DKIM key matches"
    if not any(keys):
        return "mismatch", f"no DKIM key (p=) in the TXT records at {record.fqdn}"
    return "mismatch", f"the DKIM key at {record.fqdn} is not this domain's key"


def _normalise_spf(value: str) -> str:
    return " ".join(value.split()).lower()


def _compare_spf(record: DnsRecord, values: list[str]) -> tuple[CheckOutcome, str]:
    spf = [v for v in values if _normalise_spf(v) == "v=spf1" or v.lower().startswith("v=spf1 ")]
    if not spf:
        return "missing", f"no SPF record (v=spf1) at {record.fqdn}"
    if len(spf) > 1:  # RFC 7208 4.5: more than one is a permanent error for receivers
        return "mismatch", f"{len(spf)} SPF records at {record.fqdn}; publish exactly one"
    if _normalise_spf(spf[0]) != _normalise_spf(record.value):
        return "mismatch", f"the SPF record at {record.fqdn} is {spf[0]!r}, not {record.value!r}"
    return "found", "the SPF record matches"


def _compare_dmarc(record: DnsRecord, values: list[str]) -> tuple[CheckOutcome, str]:
    # Any DMARC policy will do: the domain's owner chooses it; ours is only a starting point.
    if any(v.replace(" ", "").upper().startswith("V=DMARC1") for v in values):
        return "found", "a DMARC policy is published"
    return "missing", f"no DMARC record (v=DMARC1) at {record.fqdn}"


async def verify_domain(
    spool: Spool, config: Config, domain: DomainRecord, resolver: DnsResolver
) -> DomainRecord | None:
    """Check the domain's records now and store the new statuses (one commit). A domain that
    has just become verified takes its name from other teams' domains (`drop_other_claims`).

    None if the domain was deleted or never started verification.
    """
    checks = await check_records(domain_dns_records(domain, config), resolver)
    updated = await record_check_results(spool, config, domain.team_id, domain.id, checks)
    if updated is not None and updated.status == "verified" and domain.status != "verified":
        await drop_other_claims(spool, config, updated)
    return updated


# --- the service -------------------------------------------------------------------------------


class DomainVerifier:
    """Handle of `serve_domain_verifier`: how the API asks for a domain to be checked."""

    def __init__(
        self, spool: Spool, config: Config, requests: trio.MemorySendChannel[tuple[str, str]]
    ) -> None:
        self._spool = spool
        self._config = config
        self._requests = requests
        # Set when a request found the queue full: the service then scans for due domains,
        # among which the dropped one is, as its verification started after its last check.
        self.scan_requested = False

    async def request_verification(self, team_id: str, domain_id: str) -> DomainRecord:
        """Start (or restart) the domain's verification and have it checked at once.

        Returns the domain as now stored (records `pending`). 404 `not_found` if the team has
        no such domain. Never waits for DNS.
        """
        domain = await start_verification(self._spool, self._config, team_id, domain_id)
        try:
            self._requests.send_nowait((team_id, domain_id))
        except trio.WouldBlock:
            self.scan_requested = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the service has stopped; the next one finds the domain due
        return domain


async def serve_domain_verifier(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[DomainVerifier] = trio.TASK_STATUS_IGNORED,
    resolver: DnsResolver | None = None,
) -> None:
    """Keep the verification status of every team's domains current.

    Owns the DNS checks: a domain asked for through the reported `DomainVerifier` is checked at
    once; every domain whose verification was started is checked again
    `domains.verify_interval_seconds` after its last check (and at start, if that is overdue).
    Each check's results are one commit. At most `CONCURRENT_CHECKS` run at once.

    When `deps.stopping` is set it takes no more work, lets the checks in flight finish and
    returns; cancelled, it abandons them (a check's commit may still land). It holds nothing
    that needs cleaning up.
    """
    resolver = resolver or build_resolver(config)
    send, receive = trio.open_memory_channel[tuple[str, str]](REQUEST_QUEUE_SIZE)
    verifier = DomainVerifier(deps.spool, config, send)
    scheduler = _CheckScheduler(deps.spool, config, resolver)
    with receive:
        async with trio.open_nursery() as checks:
            scheduler.nursery = checks
            with trio.CancelScope() as intake:
                checks.start_soon(_cancel_when_set, deps.stopping, intake)
                task_status.started(verifier)
                await scheduler.run(receive, verifier)
            # Stopping: the checks nursery waits for the checks in flight.


async def _cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


class _CheckScheduler:
    """Starts checks from requests and from the periodic scan, one at a time per domain."""

    def __init__(self, spool: Spool, config: Config, resolver: DnsResolver) -> None:
        self.spool = spool
        self.config = config
        self.resolver = resolver
        self.nursery: trio.Nursery | None = None
        self.limiter = trio.CapacityLimiter(CONCURRENT_CHECKS)
        self.interval_ms = config.domains.verify_interval_seconds * 1000
        # Domains being checked, and those asked for again meanwhile (checked once more after:
        # the first check may have asked DNS before the change that prompted the request).
        self.in_flight: set[tuple[str, str]] = set()
        self.again: set[tuple[str, str]] = set()
        self.outage = Outage("domain verification")

    async def run(
        self, requests: trio.MemoryReceiveChannel[tuple[str, str]], verifier: DomainVerifier
    ) -> None:
        next_scan = trio.current_time()
        while True:
            key: tuple[str, str] | None = None
            with trio.move_on_at(next_scan):
                key = await requests.receive()
            if key is None:
                try:
                    next_scan = trio.current_time() + await self.scan()
                except StoreUnavailableError as error:  # the domains wait for the database
                    next_scan = trio.current_time() + self.outage.failed(error)
                else:
                    self.outage.succeeded()
                continue
            await self.start_check(key)
            if verifier.scan_requested:
                verifier.scan_requested = False
                next_scan = trio.current_time()

    async def scan(self) -> float:
        """Start the checks that are due; return the seconds until the next one is."""
        now_ms = self.spool.clock_ms()
        next_due_ms = now_ms + self.interval_ms
        for domain in scan_all_domains(self.spool):
            due_ms = self.due_at_ms(domain)
            if due_ms is None:
                continue
            if due_ms <= now_ms:
                await self.start_check((domain.team_id, domain.id))
            else:
                next_due_ms = min(next_due_ms, due_ms)
        return max(0.0, (next_due_ms - self.spool.clock_ms()) / 1000)

    def due_at_ms(self, domain: DomainRecord) -> int | None:
        """When the domain's next check is due (wall-clock ms); None if it is never."""
        started, checked = domain.verification_started_at_ms, domain.last_checked_at_ms
        if started is None:
            return None  # verification not asked for yet
        if checked is None or checked < started:
            return started  # asked for and not checked since
        return checked + self.interval_ms

    async def start_check(self, key: tuple[str, str]) -> None:
        if key in self.in_flight:
            self.again.add(key)
            return
        assert self.nursery is not None
        await self.limiter.acquire_on_behalf_of(key)
        self.in_flight.add(key)
        self.nursery.start_soon(self.check, key)

    async def check(self, key: tuple[str, str]) -> None:
        try:
            while True:
                self.again.discard(key)
                await self.check_once(*key)
                if key not in self.again:
                    break
        except StoreUnavailableError as error:  # still due: the next scan checks it again
            self.outage.failed(error)
        finally:
            self.in_flight.discard(key)
            self.limiter.release_on_behalf_of(key)

    async def check_once(self, team_id: str, domain_id: str) -> None:
        domain = load_domain(self.spool, team_id, domain_id)
        if domain is None:
            return
        try:
            updated = await verify_domain(self.spool, self.config, domain, self.resolver)
        except SpoolError as exc:  # e.g. full: the domain stays due and is tried next scan
            log.warning("domain %s: cannot store its verification: %s", domain.name, exc)
            return
        if updated is not None and updated.status != domain.status:
            log.info("domain %s: %s -> %s", updated.name, domain.status, updated.status)
