"""Turning a parsed DSN or feedback report into events and suppressions of the email it is about.

Which email: a report is about the email its envelope recipient names, a VERP return path
(`postwire.inbound.verp`) whose tag only Postwire can make. A report to the complaint address
(`complaints@<return-path host>`, for feedback loops) names its email by the return path of the
message it quotes, which must be one of that same host's. The address's host names the sending
domain, so the candidates are the teams that have a domain whose return-path host is exactly
that one (a scan of the domains table, which is small: no scan of emails and no index to keep in
step with the accept path); the email is then a point look-up per candidate, and it counts only
if its envelope sender is exactly that return path. A report that quotes the return path of
another email, of this domain or any other, is applied to nobody: it is not about the email it
was sent for.

What a report may change: only addresses that were recipients of the email. A recipient the
report names but the email never had is ignored, except that a report about an email with a
single recipient is taken to mean that recipient (forwarding rewrites the final recipient).

Each report is applied once per email, recipient and status (`postwire.store.applied_reports`,
written in the same commit as the events, guarded by the email's key): the same DSN sent
twenty times raises one event. A suppression is written only if the address is not suppressed
already.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from postwire import _core
from postwire.delivery.bounces import Outcome, classify_reply, should_suppress
from postwire.domains.store import scan_all_domains
from postwire.inbound.reports import (
    DeliveryStatusReport,
    FeedbackReport,
    RecipientStatus,
    Report,
)
from postwire.inbound.verp import (
    VERP_SECRET,
    ReturnPathKey,
    legacy_return_path_alive,
    parse_verp,
    tag_matches,
)
from postwire.store.applied_reports import applied_report_key, mark_applied, was_applied
from postwire.store.deliveries import (
    SUPPRESSIONS,
    add_event,
    is_suppressed,
    new_suppression,
    suppression_key,
)
from postwire.store.emails import EMAILS, EmailRecord, email_key, record_last_event
from postwire.store.metric_counters import counted_tags
from postwire.store.server_secrets import server_secret
from postwire.store.spool import Spool

if TYPE_CHECKING:
    from postwire.config import Config

COMPLAINTS_LOCAL_PART: Final = "complaints"


class InboundAddress(enum.Enum):
    """What a recipient address is to Postwire."""

    OTHER = "other"  # not one of Postwire's own: mail to send
    REPORTS = "reports"  # a return path or complaint address of ours: takes reports
    UNKNOWN = "unknown"  # shaped like one of our return paths, but not one we made (or expired)


@dataclass(frozen=True, slots=True)
class AppliedReport:
    """What applying a report committed."""

    team_id: str
    email_id: str
    events: tuple[str, ...]  # event types, in the order added
    suppressed: tuple[str, ...]  # addresses newly put on the suppression list


async def load_return_path_key(spool: Spool, config: Config) -> ReturnPathKey:
    """The spool's return-path key, its secret made on the first start."""
    return ReturnPathKey.for_config(await server_secret(spool, VERP_SECRET), config)


def recognise_address(
    spool: Spool, key: ReturnPathKey, address: str, now_ms: int
) -> InboundAddress:
    """Whether `address` is one of Postwire's own: a valid VERP return path or the complaint
    address at the return-path host of a domain. The local part is checked first, so ordinary
    recipients cost no look-up."""
    verp = parse_verp(address)
    local, _, host = address.strip().strip("<>").lower().rpartition("@")
    if verp is None and local != COMPLAINTS_LOCAL_PART:
        return InboundAddress.OTHER
    host = host.rstrip(".")
    if not any(domain.return_path_host == host for domain in scan_all_domains(spool)):
        return InboundAddress.OTHER
    if verp is None or tag_matches(key.secret, verp):
        return InboundAddress.REPORTS
    if verp.tag is None and find_email_by_return_path(spool, key, address, now_ms) is not None:
        return InboundAddress.REPORTS
    return InboundAddress.UNKNOWN


def find_email_by_return_path(
    spool: Spool, key: ReturnPathKey, address: str, now_ms: int
) -> EmailRecord | None:
    """The email whose return path is exactly `address`, if `address` is valid: tagged with our
    MAC, or untagged but made before tags existed and still within its age."""
    verp = parse_verp(address)
    if verp is None or (verp.tag is not None and not tag_matches(key.secret, verp)):
        return None
    teams = {
        domain.team_id for domain in scan_all_domains(spool) if domain.return_path_host == verp.host
    }
    for team_id in sorted(teams):
        record = EMAILS.get(spool, email_key(team_id, verp.email_id))
        if record is None or parse_verp(record.envelope_from) != verp:
            continue
        if verp.tag is None and not legacy_return_path_alive(key, record, now_ms):
            return None
        return record
    return None


def reported_email(
    spool: Spool, key: ReturnPathKey, report: Report, rcpt_to: str, now_ms: int
) -> EmailRecord | None:
    """The email `report`, sent to `rcpt_to`, is about (see the module docstring), or None."""
    quoted = [verp for path in _quoted_return_paths(report) if (verp := parse_verp(path))]
    sent_to = parse_verp(rcpt_to)
    if sent_to is None:
        local, _, host = rcpt_to.strip().strip("<>").lower().rpartition("@")
        if local != COMPLAINTS_LOCAL_PART or not quoted or quoted[0].host != host.rstrip("."):
            return None
        sent_to = quoted[0]
    if any(verp != sent_to for verp in quoted):
        return None
    return find_email_by_return_path(spool, key, sent_to.address, now_ms)


async def apply_report(
    spool: Spool, key: ReturnPathKey, report: Report, rcpt_to: str, now_ms: int
) -> AppliedReport | None:
    """Commit the events, `last_event` and suppressions `report` implies for its email, all in
    one batch with the marks that it was applied. None when the report, sent to `rcpt_to` (one
    of Postwire's own addresses), names no email of ours, or nothing in it applies, or all of it
    was applied already."""
    record = reported_email(spool, key, report, rcpt_to, now_ms)
    if record is None:
        return None
    record_key = email_key(record.team_id, record.id)
    # Under the record's lock, so that two copies of one report (in this process or another)
    # cannot both find themselves not yet applied.
    async for attempt in spool.guarded(record_key):
        with attempt:
            applied = _report_changes(spool, record, report, now_ms)
            if applied is None:
                return None
            batch, last_event, result = applied
            current = EMAILS.get(spool, record_key) or record  # the engine may have recorded since
            record_last_event(batch, current, last_event)
            await spool.commit(batch)
    return result


def _report_changes(
    spool: Spool, record: EmailRecord, report: Report, now_ms: int
) -> tuple[_core.WriteBatch, str, AppliedReport] | None:
    """The batch of what `report` changes that was not applied before, the email's new
    `last_event` and the summary; None if nothing is left to apply."""
    batch = _core.WriteBatch()
    events: list[str] = []
    suppressed: list[str] = []
    last_event: str | None = None
    team, email_id = record.team_id, record.id
    tags = counted_tags(spool, team, record.tags)  # the metrics' labels of its tags
    marked: set[str] = set()  # this batch's marks

    def first_time(address: str, status: str) -> bool:
        key = applied_report_key(team, email_id, address, status)
        if was_applied(spool, key) or key in marked:
            return False
        mark_applied(batch, key, now_ms)
        marked.add(key)
        return True

    def suppress(address: str, origin: str) -> None:
        if address in suppressed or is_suppressed(spool, team, address):
            return
        entry = new_suppression(address, origin, now_ms, email_id)
        SUPPRESSIONS.put(batch, suppression_key(team, address), entry)
        suppressed.append(address)

    if isinstance(report, DeliveryStatusReport):
        for status in report.recipients:
            address = _email_recipient(record, (status.original_recipient, status.final_recipient))
            if address is None or status.action not in ("failed", "delayed"):
                continue
            code = "none" if status.status is None else ".".join(map(str, status.status))
            if status.action == "failed" and first_time(address, f"bounced:{code}"):
                outcome = dsn_outcome(status)
                add_event(
                    batch, team, email_id, "email.bounced", now_ms,
                    broadcast_id=record.broadcast_id, domain_id=record.domain_id, counted_tags=tags,
                    to=address, bounce=outcome.bounce(),
                )  # fmt: skip
                events.append("email.bounced")
                last_event = "bounced"
                if should_suppress(outcome):
                    suppress(address, "bounce")
            elif status.action == "delayed" and first_time(address, f"delivery_delayed:{code}"):
                outcome = dsn_outcome(status)
                add_event(
                    batch, team, email_id, "email.delivery_delayed", now_ms,
                    broadcast_id=record.broadcast_id, domain_id=record.domain_id, counted_tags=tags,
                    to=address, diagnostic=outcome.diagnostic,
                )  # fmt: skip
                events.append("email.delivery_delayed")
                last_event = last_event or "delivery_delayed"
    else:
        for address in _complainants(record, report):
            if not first_time(address, f"complained:{report.feedback_type}"):
                continue
            add_event(
                batch, team, email_id, "email.complained", now_ms,
                broadcast_id=record.broadcast_id, domain_id=record.domain_id, counted_tags=tags,
                to=address, feedback_type=report.feedback_type,
            )  # fmt: skip
            events.append("email.complained")
            last_event = "complained"
            suppress(address, "complaint")
    if last_event is None:
        return None
    return batch, last_event, AppliedReport(team, email_id, tuple(events), tuple(suppressed))


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
