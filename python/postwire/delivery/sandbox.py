"""Delivery in sandbox mode (`postwire serve --sandbox`): the local inbox stands in for every
recipient's server, so the engine resolves nothing and connects nowhere.

A held message counts as delivered: the inbox accepted it, as the recipient's server would
have, and the sender sees what a real delivery shows (`email.delivered`, `last_event`
`delivered`).

Like Resend's test addresses (`delivered@resend.dev`, `bounced@resend.dev`, ...), a few
addresses at the sandbox domain fail on purpose, so that a sender can test its handling of
bounces, complaints and delays without a real mailbox. Each gives the outcome a real server
(or a mailbox provider's feedback loop) would, and that outcome goes through the same commit
as a real one: its events and webhooks, the email's status, suppressions and metrics.

    delivered@    held in the inbox: email.delivered
    bounced@      refused with 550 5.1.1 (no such mailbox): email.bounced, a Permanent bounce,
                  and the address is suppressed
    complained@   held in the inbox, then reported as spam through a feedback report applied
                  like one received by mail: email.delivered, email.complained, suppressed
    delayed@      deferred with 451 4.7.1 at every attempt, like a server that keeps saying
                  "try again later": email.delivery_delayed, retried on the usual schedule
                  and bounced (Transient) once `delivery.max_age_hours` has passed
    suppressed@   on every team's suppression list (`serve_sandbox` puts it there), so it is
                  skipped before delivery: `last_event` `suppressed`, nothing held

A label after `+` is allowed (`bounced+signup@sandbox.postwire.test`), as Resend allows one.
Any other address is held as delivered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from postwire.delivery.bounces import Outcome, classify_reply
from postwire.inbound.apply import apply_report, load_return_path_key
from postwire.inbound.reports import FeedbackReport
from postwire.sandbox import SANDBOX_DOMAIN

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.store.spool import Spool

HELD_IN_INBOX: Final = Outcome(
    "delivered", None, None, None, "sandbox; held in the local inbox, not sent"
)
# What the sandbox's own "server" answers to the addresses that fail on purpose.
BOUNCED: Final = classify_reply(
    550, (5, 1, 1), "sandbox: bounced@ is a mailbox that does not exist, on purpose"
)
DEFERRED: Final = classify_reply(
    451, (4, 7, 1), "sandbox: delayed@ is told to try again later, at every attempt"
)
# The feedback type of a sandbox complaint: a recipient marked the message as spam.
COMPLAINT_FEEDBACK_TYPE: Final = "abuse"


def sandbox_role(address: str) -> str | None:
    """`delivered`, `bounced`, `complained`, `delayed` or `suppressed` for those test
    addresses at the sandbox domain (with or without a +label); None for any other."""
    local, _, domain = address.lower().rpartition("@")
    if domain != SANDBOX_DOMAIN:
        return None
    role = local.partition("+")[0]
    return role if role in ("delivered", "bounced", "complained", "delayed", "suppressed") else None


def sandbox_outcomes(recipients: Iterable[str]) -> dict[str, Outcome]:
    """Every recipient's outcome of one attempt in the sandbox."""
    outcomes: dict[str, Outcome] = {}
    for address in recipients:
        role = sandbox_role(address)
        outcomes[address] = (
            BOUNCED if role == "bounced" else DEFERRED if role == "delayed" else HELD_IN_INBOX
        )
    return outcomes


def complainants(outcomes: dict[str, Outcome]) -> list[str]:
    """The recipients among `outcomes` that complain once the message reached them."""
    return [
        address
        for address, outcome in outcomes.items()
        if outcome.status == "delivered" and sandbox_role(address) == "complained"
    ]


async def report_complaints(
    spool: Spool, config: Config, envelope_from: str, addresses: list[str], now_ms: int
) -> None:
    """Apply the feedback report a mailbox provider would send about the message whose return
    path is `envelope_from`, for `addresses`, as the report received by mail is applied (once:
    a message delivered again after a crash does not complain twice)."""
    report = FeedbackReport(
        feedback_type=COMPLAINT_FEEDBACK_TYPE,
        user_agent="Postwire sandbox",
        original_mail_from=envelope_from,
        original_rcpt_to=tuple(addresses),
        original_return_path=envelope_from,
        original_message_id=None,
    )
    key = await load_return_path_key(spool, config)
    await apply_report(spool, key, report, envelope_from, now_ms)
