"""Mail Postwire sends about accounts (invitations, password resets, address checks), from
`auth.mail_from`.

System mail belongs to no team. The sender must be under a domain some team has verified, whose
DKIM key signs it, but it is spooled as a system message (`store.deliveries.spool_system_message`):
no email record, so it is on no team's Emails page or API, and its delivery raises no team's
events, webhooks, counts, insights or suppressions. Its links are secrets for the recipient's
mailbox alone: once the message can be sent, they are never logged (the operator's log says
what was sent to whom, and how its delivery went, without them).

When `auth.mail_from` is empty, not an address, or under no verified domain, the link is written
to the log at WARNING instead, so an operator can pass it on by hand (a first setup has no
verified domain yet).
"""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field
from datetime import datetime

from postwire.accept import Acceptor
from postwire.compose.addresses import parse_mailbox
from postwire.compose.request import SendRequest
from postwire.config import Config
from postwire.domains.store import DomainRecord, find_verified_domain_for_sender
from postwire.errors import ApiError, SpoolError
from postwire.metrics.operator_registry import OPERATOR_METRICS
from postwire.services import Wakeable
from postwire.store.accounts import list_teams
from postwire.store.deliveries import spool_system_message
from postwire.store.spool import Spool

log = logging.getLogger("postwire.accounts.mail")


@dataclass(frozen=True, slots=True)
class SystemMail:
    """One message to one person, built around one link."""

    to: str
    subject: str
    lines: tuple[str, ...]  # paragraphs before the link
    link: str
    what: str  # what the link is, for the log: "invitation link", "password reset link"
    closing: str = "If you did not expect this message, you can ignore it."

    def text(self) -> str:
        return "\n\n".join((*self.lines, self.link, self.closing)) + "\n"

    def html(self) -> str:
        paragraphs = "".join(f"<p>{html.escape(line)}</p>" for line in self.lines)
        href = html.escape(self.link, quote=True)
        closing = html.escape(self.closing)
        return (
            f"<!doctype html><html><body>{paragraphs}"
            f'<p><a href="{href}">{href}</a></p><p>{closing}</p></body></html>'
        )


# A team's name as the invitation's body quotes it at most: it is the inviting tenant's text.
INVITATION_TEAM_NAME_CHARS = 60


def invitation_mail(to: str, team_name: str, inviter: str, role: str, link: str) -> SystemMail:
    """The subject is ours alone: a team named like a lure ("Your mailbox is suspended...")
    would otherwise put the lure in the subject of mail signed by the operator's domain."""
    name = " ".join(team_name.split())
    if len(name) > INVITATION_TEAM_NAME_CHARS:
        name = name[: INVITATION_TEAM_NAME_CHARS - 1].rstrip() + "…"
    return SystemMail(
        to=to,
        subject="Invitation to a team on Postwire",
        lines=(
            f"{inviter} invited you to join a team on Postwire, named “{name}”, as {role}.",
            "Open this link within 7 days to accept:",
        ),
        link=link,
        what="invitation link",
    )


def password_reset_mail(to: str, link: str) -> SystemMail:
    return SystemMail(
        to=to,
        subject="Reset your Postwire password",
        lines=(
            "Someone asked to reset the password of your Postwire account.",
            "Open this link within an hour to choose a new password:",
        ),
        link=link,
        what="password reset link",
        closing="If it was not you, ignore this message: your password stays as it is.",
    )


def verification_mail(to: str, link: str) -> SystemMail:
    return SystemMail(
        to=to,
        subject="Confirm your address for Postwire",
        lines=("Open this link within 2 days to confirm that this address is yours:",),
        link=link,
        what="address verification link",
    )


def set_password_mail(to: str, link: str) -> SystemMail:
    return SystemMail(
        to=to,
        subject="Choose your Postwire password",
        lines=("An account was made for you on Postwire. Open this link to choose a password:",),
        link=link,
        what="set password link",
    )


@dataclass(slots=True)
class SystemMailer:
    """Sends `SystemMail` signed with the key of the domain `auth.mail_from` is under."""

    config: Config
    spool: Spool
    delivery: Wakeable | None = None
    # An acceptor of its own, without tracking: a tracked link would pass a single-use token
    # through the click redirect and keep it in the tracking records.
    acceptor: Acceptor = field(init=False)

    def __post_init__(self) -> None:
        self.acceptor = Acceptor(self.spool, path="system")

    def sender(self) -> tuple[str, DomainRecord] | None:
        """`auth.mail_from` and the verified domain it is under, or None."""
        mail_from = self.config.auth.mail_from.strip()
        mailbox = parse_mailbox(mail_from) if mail_from else None
        if mailbox is None:
            return None
        sender_domain = mailbox[1].rpartition("@")[2]
        for team in list_teams(self.spool):
            domain = find_verified_domain_for_sender(self.spool, team.id, sender_domain)
            if domain is not None:
                return mail_from, domain
        return None

    async def send(self, mail: SystemMail, now: datetime) -> bool:
        """Send `mail`, or log its link when there is no sender; True once the message is
        accepted (on disk)."""
        sender = self.sender()
        if sender is None:
            log.warning(
                "%s for %s: %s (auth.mail_from is empty or not under a verified domain, so "
                "no mail was sent)",
                mail.what,
                mail.to,
                mail.link,
            )
            return False
        mail_from, domain = sender
        try:
            message_id = await self._accept(mail, mail_from, domain, now)
        except (ApiError, SpoolError) as error:
            # Not the link: whoever reads the log must not be able to use it.
            log.error("%s for %s could not be sent: %s", mail.what, mail.to, error)
            return False
        log.info("system mail %s accepted: %s to %s", message_id, mail.what, mail.to)
        if self.delivery is not None:
            self.delivery.wake()
        return True

    async def _accept(
        self, mail: SystemMail, mail_from: str, domain: DomainRecord, now: datetime
    ) -> str:
        mailbox = parse_mailbox(mail_from)
        recipient = parse_mailbox(mail.to)
        if mailbox is None or recipient is None:
            raise ApiError(422, "validation_error", "not an address")
        request = SendRequest(
            sender=mailbox,
            to=(recipient,),
            cc=(),
            bcc=(),
            reply_to=(),
            from_as_sent=mail_from,
            to_as_sent=(mail.to,),
            cc_as_sent=(),
            bcc_as_sent=(),
            reply_to_as_sent=(),
            subject=mail.subject,
            html=mail.html(),
            text=mail.text(),
            headers=(("Auto-Submitted", "auto-generated"),),
            tags=(),
            attachments=(),
            scheduled_at=None,
            size=0,
        )
        # Built and signed as the domain's team would send it; spooled as nobody's.
        prepared = await self.acceptor.prepare(domain.team_id, None, request, now)
        await spool_system_message(
            self.spool,
            prepared.record.id,
            prepared.message,
            envelope_from=prepared.record.envelope_from,
            recipients=prepared.record.recipients,
            tls=prepared.tls,
            now_ms=int(now.timestamp() * 1000),
        )
        OPERATOR_METRICS.count_accepted(self.acceptor.path, 1)
        return prepared.record.id
