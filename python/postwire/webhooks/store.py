"""Webhook endpoints of a team, kept in the spool's `webhooks` table under `{team_id}/{id}`.

The signing secret is kept as it is, not hashed: every POST is signed with it, and the
contract returns it on `GET /webhooks/{id}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from postwire.store.spool import Spool
from postwire.store.tables import Table

# The kinds an endpoint may subscribe to: what Postwire reports. (There is no inbound mail
# and no dropped mail, so no kinds for them; `contact.topics.updated` is left out because the
# Rust SDK cannot parse it: topic changes are `contact.updated`.)
EVENT_KINDS: Final = (
    "email.sent",
    "email.delivered",
    "email.delivery_delayed",
    "email.bounced",
    "email.complained",
    "email.opened",
    "email.clicked",
    "contact.created",
    "contact.updated",
    "contact.deleted",
    # A domain's verification status changed (or another team verified its name first).
    "domain.updated",
    # A sending domain's complaint or bounce rate crossed a threshold (`metrics.domain_health`).
    "domain.health_warning",
)


@dataclass(frozen=True, slots=True)
class WebhookRecord:
    id: str
    team_id: str
    endpoint: str  # an http(s) URL
    events: list[str]  # of EVENT_KINDS
    status: str  # "enabled" | "disabled"
    created_at: str  # contract timestamp
    signing_secret: str  # whsec_...
    # Set when the dispatcher disabled the endpoint after failing for days, so the API can
    # tell that from a team's own choice.
    disabled_reason: str | None = None
    # Wall-clock ms of the first failure since the last success; None while it succeeds.
    failing_since_ms: int | None = None


WEBHOOKS = Table("webhooks", WebhookRecord)


def webhook_key(team_id: str, webhook_id: str) -> str:
    return f"{team_id}/{webhook_id}"


def team_webhooks(spool: Spool, team_id: str) -> list[WebhookRecord]:
    """The team's endpoints, oldest first (ids are time-ordered)."""
    return [record for _, record in WEBHOOKS.scan(spool, prefix=f"{team_id}/", limit=1_000_000)]


async def team_webhooks_parked(spool: Spool, team_id: str) -> list[WebhookRecord]:
    """`team_webhooks`, parked rather than blocking on a table store on the network."""
    rows = await WEBHOOKS.ascan(spool, prefix=f"{team_id}/", limit=1_000_000)
    return [record for _, record in rows]


def subscribers(spool: Spool, team_id: str, kind: str) -> list[WebhookRecord]:
    """The team's enabled endpoints that take events of `kind`."""
    return [w for w in team_webhooks(spool, team_id) if w.status == "enabled" and kind in w.events]
