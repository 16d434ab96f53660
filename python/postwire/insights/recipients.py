"""Recipient findings: the team's history with each address (its suppressions, made by
earlier hard bounces and complaints), role addresses, and how the recipient's domain has been
answering Postwire's deliveries lately (from the per-recipient-domain counters)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Final

from postwire.insights.catalogue import Finding, finding
from postwire.store.deliveries import SUPPRESSIONS, suppression_key
from postwire.store.email_index import emails_sent_to_parked, with_status_parked
from postwire.store.spool import Spool

# Local parts that name a function rather than a person (RFC 2142 and common practice).
ROLE_LOCAL_PARTS: Final = frozenset(
    {
        "abuse", "admin", "administrator", "billing", "contact", "help", "hostmaster", "info",
        "marketing", "no-reply", "noc", "noreply", "do-not-reply", "donotreply", "office",
        "postmaster", "root", "sales", "security", "support", "team", "webmaster", "hr",
        "jobs", "careers", "enquiries", "inquiries", "mail", "newsletter", "list", "all",
    }
)  # fmt: skip
# The recipient domain's recent window, and the least deliveries that make a rate worth showing.
DOMAIN_WINDOW_HOURS: Final = 24
MIN_DOMAIN_DELIVERIES: Final = 20
BOUNCE_RATE_PERCENT: Final = 5.0  # above: the domain's addresses on the list are poor
DEFERRAL_RATE_PERCENT: Final = 20.0  # above: the domain is throttling
# A recipient's earlier emails from the team looked at for bounces.
HISTORY_EMAILS: Final = 5
# Recipients of one email checked at most (a message to a thousand Bcc addresses).
MAX_RECIPIENTS: Final = 50

DomainCounts = Callable[[Spool, str, int, int], dict[str, int]]


def domain_counts_reader() -> DomainCounts | None:
    """`metric_counters.read_recipient_domain_counts(spool, domain, first_hour, end_hour)`
    (every team's deliveries to that domain), where the store keeps such counts."""
    module = importlib.import_module("postwire.store.metric_counters")
    reader: DomainCounts | None = getattr(module, "read_recipient_domain_counts", None)
    return reader


def role_of(address: str) -> str | None:
    local = address.rpartition("@")[0].lower().split("+", 1)[0]
    return local if local in ROLE_LOCAL_PARTS else None


def _accepted_ms(email_id: str) -> int:
    """When the email was accepted: its id is a UUIDv7, whose first 48 bits are that time in
    ms (an id of any other shape counts as accepted now)."""
    try:
        return int(email_id[:8] + email_id[9:13], 16)
    except ValueError:
        return 2**63


async def _history(spool: Spool, team_id: str, email_id: str, address: str) -> Finding | None:
    """The address's suppression, or else the earlier of the team's emails to it that
    bounced without suppressing it (a full mailbox, a refused content, a deferral that ran
    out of time): read from the email index, no email record decoded. Reads are parked: on a
    table store on the network each is a round trip the process's other tasks must not wait
    for."""
    suppression = await SUPPRESSIONS.aget(spool, suppression_key(team_id, address))
    # A suppression made after this email was accepted (by its own bounce, say, when it was
    # delivered before its insights were computed) did not stop it, and is not its history.
    if suppression is not None and suppression.created_at_ms <= _accepted_ms(email_id):
        code = {
            "bounce": "recipient_bounced_before",
            "complaint": "recipient_complained_before",
        }.get(suppression.origin, "recipient_suppressed")
        return finding(code, address=address)
    sent = await emails_sent_to_parked(spool, team_id, address, HISTORY_EMAILS + 1)
    earlier = [other for other in sent if other < email_id][:HISTORY_EMAILS]
    bounced = len(await with_status_parked(spool, team_id, "bounced", earlier))
    if not bounced:
        return None
    return finding("recipient_bounced_recently", address=address, count=bounced, total=len(earlier))


def _domain_rates(counts: dict[str, int], domain: str) -> list[Finding]:
    delivered = counts.get("delivered", 0)
    bounced = counts.get("bounced", 0)
    delayed = counts.get("delivery_delayed", 0)
    total = delivered + bounced
    if total < MIN_DOMAIN_DELIVERIES:
        return []
    found = []
    # (code, how many, of how many, the threshold in percent) of each rate.
    rates = (
        ("recipient_domain_bounces", "bounced", bounced, total, BOUNCE_RATE_PERCENT),
        ("recipient_domain_deferrals", "delayed", delayed, total + delayed, DEFERRAL_RATE_PERCENT),
    )
    for code, name, part, whole, threshold in rates:
        percent = 100 * part / whole
        if percent > threshold:
            values = {name: part, "total": whole, "percent": round(percent, 1)}
            found.append(finding(code, domain=domain, hours=DOMAIN_WINDOW_HOURS, **values))
    return found


async def recipient_findings(
    spool: Spool,
    team_id: str,
    email_id: str,
    recipients: Sequence[str],
    now_ms: int,
    domain_counts: DomainCounts | None,
) -> list[Finding]:
    """Findings about each recipient of one email (each recipient domain's rates once)."""
    found: list[Finding] = []
    addresses = list(dict.fromkeys(address.lower() for address in recipients))[:MAX_RECIPIENTS]
    for address in addresses:
        history = await _history(spool, team_id, email_id, address)
        if history is not None:
            found.append(history)
        role = role_of(address)
        if role is not None:
            found.append(finding("role_address", address=address, role=role))
    if domain_counts is not None:
        end_hour = now_ms // 3_600_000 + 1
        first_hour = end_hour - DOMAIN_WINDOW_HOURS
        for domain in dict.fromkeys(address.rpartition("@")[2] for address in addresses):
            counts = domain_counts(spool, domain, first_hour, end_hour)
            found += _domain_rates(counts, domain)
    return found
