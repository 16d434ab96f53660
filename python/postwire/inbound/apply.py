"""Turning a parsed DSN or feedback report into events and suppressions of the email it is about.

Finding the email: a report names only the email id, in our VERP return path
`bounces+<email_id>@<return_path>.<domain>`, while records are keyed by team. The address's
domain part names the sending domain, so the candidates are the teams that have a domain whose
return-path host is exactly that one (a scan of the domains table, which is small: no scan of
emails and no index to keep in step with the accept path). The email is then a point look-up
per candidate, and it counts only if its envelope sender is exactly the VERP address, so a
report cannot name an email of another domain or team.

What a report may change: only addresses that were recipients of the email. A recipient the
report names but the email never had is ignored, except that a report about an email with a
single recipient is taken to mean that recipient (forwarding rewrites the final recipient).

Idempotence: the suppression is written only if the address is not suppressed already, so a
report applied twice leaves one suppression; its events, though, are added again each time
(a DSN carries no id we could remember cheaply, and a repeated event is harmless to webhooks
consumers, which must already tolerate at-least-once delivery).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from postwire import _core
from postwire.delivery.bounces import Outcome, classify_reply, should_suppress
from postwire.domains.store import scan_all_domains
from postwire.inbound.reports import (
    DeliveryStatusReport,
    FeedbackReport,
    RecipientStatus,
    Report,
    verp_email_id,
)
from postwire.store.deliveries import (
    SUPPRESSIONS,
    add_event,
    is_suppressed,
    new_suppression,
    suppression_key,
)
from postwire.store.emails import EMAILS, EmailRecord, email_key, next_last_event
from postwire.store.spool import Spool

COMPLAINTS_LOCAL_PART: Final = "complaints"


@dataclass(frozen=True, slots=True)
class AppliedReport:
    """What applying a report committed."""

    team_id: str
    email_id: str
    events: tuple[str, ...]  # event types, in the order added
    suppressed: tuple[str, ...]  # addresses newly put on the suppression list


def is_inbound_address(spool: Spool, address: str) -> bool:
    """Whether `address` is one of Postwire's own: a VERP return path or the complaint address
    (`complaints@`, to register with feedback loops) at the return-path host of a domain. The
    local part is checked first, so ordinary recipients cost no look-up."""
    local, _, host = address.strip().strip("<>").lower().rpartition("@")
    if verp_email_id(address) is None and local != COMPLAINTS_LOCAL_PART:
        return False
    host = host.rstrip(".")
    return any(domain.return_path_host == host for domain in scan_all_domains(spool))


def find_email_by_return_path(spool: Spool, address: str) -> EmailRecord | None:
    """The email whose VERP envelope sender is exactly `address`, or None."""
    email_id = verp_email_id(address)
    if email_id is None:
        return None
    wanted = address.strip().strip("<>").lower()
    host = wanted.rpartition("@")[2]
    teams = {
        domain.team_id for domain in scan_all_domains(spool) if domain.return_path_host == host
    }
    for team_id in sorted(teams):
        record = EMAILS.get(spool, email_key(team_id, email_id))
        if record is not None and record.envelope_from.lower() == wanted:
            return record
    return None


async def apply_report(
    spool: Spool, report: Report, rcpt_to: str, now_ms: int
) -> AppliedReport | None:
    """Commit the events, `last_event` and suppressions `report` implies for its email, all in
    one batch. None when the report names no email of ours or nothing in it applies.

    The email is found from `rcpt_to` (the envelope recipient of the report, normally our
    VERP address) or else from the return path the report quotes.
    """
    record = None
    for return_path in (rcpt_to, *_quoted_return_paths(report)):
        record = find_email_by_return_path(spool, return_path)
        if record is not None:
            break
    if record is None:
        return None
    batch = _core.WriteBatch()
    events: list[str] = []
    suppressed: list[str] = []
    last_event: str | None = None
    team, email_id = record.team_id, record.id

    def suppress(address: str, origin: str) -> None:
        if address in suppressed or is_suppressed(spool, team, address):
            return
        entry = new_suppression(address, origin, now_ms, email_id)
        SUPPRESSIONS.put(batch, suppression_key(team, address), entry)
        suppressed.append(address)

    if isinstance(report, DeliveryStatusReport):
        for status in report.recipients:
            address = _email_recipient(record, (status.original_recipient, status.final_recipient))
            if address is None:
                continue
            if status.action == "failed":
                outcome = dsn_outcome(status)
                add_event(
                    batch, team, email_id, "email.bounced", now_ms,
                    to=address, bounce=outcome.bounce(),
                )  # fmt: skip
                events.append("email.bounced")
                last_event = "bounced"
                if should_suppress(outcome):
                    suppress(address, "bounce")
            elif status.action == "delayed":
                outcome = dsn_outcome(status)
                add_event(
                    batch, team, email_id, "email.delivery_delayed", now_ms,
                    to=address, diagnostic=outcome.diagnostic,
                )  # fmt: skip
                events.append("email.delivery_delayed")
                last_event = last_event or "delivery_delayed"
    else:
        for address in _complainants(record, report):
            add_event(
                batch, team, email_id, "email.complained", now_ms,
                to=address, feedback_type=report.feedback_type,
            )  # fmt: skip
            events.append("email.complained")
            last_event = "complained"
            suppress(address, "complaint")
    if last_event is None:
        return None
    key = email_key(team, email_id)
    async with spool.record_lock(key):
        current = EMAILS.get(spool, key) or record  # the engine may have recorded since
        updated = replace(current, last_event=next_last_event(current.last_event, last_event))
        EMAILS.put(batch, key, updated)
        await spool.commit(batch)
    return AppliedReport(team, email_id, tuple(events), tuple(suppressed))


def dsn_outcome(status: RecipientStatus) -> Outcome:
    """Classify a DSN recipient like a live reply: the Status field is the enhanced code,
    the Diagnostic-Code (kept verbatim) supplies the reply code when it is an SMTP one."""
    code = _diagnostic_reply_code(status.diagnostic_code)
    if code is None:
        # No SMTP reply quoted (a timeout, a DNS failure): the status class stands for it.
        code = {2: 250, 4: 451, 5: 550}[status.status[0]] if status.status else 550
    if status.status is None and status.action == "delayed":
        code = 451
    outcome = classify_reply(code, status.status, "")
    if status.diagnostic_code is not None:
        outcome = replace(outcome, diagnostic=status.diagnostic_code)
    return outcome


def _diagnostic_reply_code(diagnostic: str | None) -> int | None:
    if diagnostic is None:
        return None
    kind, _, rest = diagnostic.partition(";")
    words = rest.split()
    if kind.strip().lower() != "smtp" or not words:
        return None
    code = words[0][:3]
    return int(code) if code.isdigit() and code[0] in "245" else None


def _email_recipient(record: EmailRecord, named: tuple[str | None, ...]) -> str | None:
    """The email's recipient among the addresses a report names (see the module docstring)."""
    recipients = {address.lower(): address for address in record.recipients}
    for address in named:
        if address is not None and address.lower() in recipients:
            return recipients[address.lower()]
    return record.recipients[0] if len(record.recipients) == 1 else None


def _complainants(record: EmailRecord, report: FeedbackReport) -> list[str]:
    if not report.original_rcpt_to:
        single = _email_recipient(record, ())
        return [] if single is None else [single]
    found = (_email_recipient(record, (address,)) for address in report.original_rcpt_to)
    return list(dict.fromkeys(address for address in found if address is not None))


def _quoted_return_paths(report: Report) -> list[str]:
    paths = [report.original_return_path]
    if isinstance(report, FeedbackReport):
        paths.insert(0, report.original_mail_from)
    return [path for path in paths if path is not None]
