"""Domains: the team's sending domains, the DNS records each must publish (with each record's
own status), "verify now", open and click tracking, each domain's health (complaint and bounce
rates against the mailbox providers' thresholds), and deletion after a confirmation page.

The same functions as the REST API's `/domains` do the work (`domains.store`, the domain
verifier); forms post, then redirect back to a page that says what happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from quart import Blueprint, g, render_template, request

from postwire.dashboard.access import requires
from postwire.dashboard.context import DashboardContext
from postwire.dashboard.pages.refusals import Redirect, done, found_or_404_parked, refused
from postwire.domains import store
from postwire.domains.records import DnsRecord
from postwire.domains.setup_warnings import SetupWarning, domain_warnings
from postwire.domains.verification_state import start_verification
from postwire.errors import ApiError
from postwire.metrics.health import MIN_VOLUME, STATE_BADGES, STATE_WORDS, health_rows
from postwire.sandbox import SANDBOX_DOMAIN
from postwire.store.domain_health import get_domain_health_parked, team_domain_health

STATUS_WORDS: Final = {
    "not_started": "Not started",
    "pending": "Pending",
    "verified": "Verified",
    "failed": "Failed",
    "temporary_failure": "Temporary failure",
    "partially_verified": "Partially verified",
    "partially_failed": "Partially failed",
}


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One DNS record as the domain's page shows it."""

    record: DnsRecord
    status: str
    detail: str  # what the last check saw, in words; empty before any check

    @property
    def host(self) -> str:
        """The full name to create the record at, as most DNS providers want it."""
        return self.record.fqdn


def record_rows(domain: store.DomainRecord, ctx: DashboardContext) -> list[RecordRow]:
    return [
        RecordRow(
            record,
            domain.record_statuses.get(record.key, "not_started") if record.required else "",
            domain.record_details.get(record.key, ""),
        )
        for record in store.domain_dns_records(domain, ctx.config)
    ]


def routes(ctx: DashboardContext) -> Blueprint:
    blueprint = Blueprint("domains", __name__)

    def team_id() -> str:
        team: str = g.viewer.team.id
        return team

    async def team_domain(domain_id: str) -> store.DomainRecord:
        return await found_or_404_parked(
            lambda: store.get_domain_parked(ctx.spool, team_id(), domain_id)
        )

    def warnings_of(domain: store.DomainRecord) -> list[SetupWarning]:
        return domain_warnings(
            ctx.config, open_tracking=domain.open_tracking, click_tracking=domain.click_tracking
        )

    @blueprint.get("/domains")
    async def list_page() -> str:
        # Every domain on one page: a team has a handful, never thousands.
        domains, _ = await store.list_domains_parked(ctx.spool, team_id())
        health = {r.domain_id: r for r in await team_domain_health(ctx.spool, team_id())}
        return await render_template(
            "domains.html", domains=domains, regions=store.REGIONS, status_words=STATUS_WORDS,
            health=health, health_words=STATE_WORDS, health_badges=STATE_BADGES,
        )  # fmt: skip

    @blueprint.post("/domains")
    async def add() -> Redirect:
        form = await request.form
        try:
            domain = await store.create_domain(
                ctx.spool,
                ctx.config,
                team_id(),
                form.get("name", "").strip(),
                region=form.get("region") or None,
            )
        except ApiError as error:
            return await refused(error, "/domains")
        return await done(
            f"{domain.name} was added: publish its DNS records, then verify it.",
            f"/domains/{domain.id}",
        )

    @blueprint.get("/domains/<domain_id>")
    async def domain_page(domain_id: str) -> str:
        domain = await team_domain(domain_id)
        health = await get_domain_health_parked(ctx.spool, team_id(), domain.id)
        return await render_template(
            "domains_detail.html",
            domain=domain,
            rows=record_rows(domain, ctx),
            warnings=warnings_of(domain),
            checked_at=None
            if domain.last_checked_at_ms is None
            else store.format_timestamp(domain.last_checked_at_ms)[:16] + " UTC",
            status_words=STATUS_WORDS,
            health=health,
            health_rows=[] if health is None else health_rows(health.checks),
            health_words=STATE_WORDS,
            health_badges=STATE_BADGES,
            min_volume=MIN_VOLUME,
            format_timestamp=store.format_timestamp,
        )

    @blueprint.post("/domains/<domain_id>/verify")
    async def verify(domain_id: str) -> Redirect:
        domain = await team_domain(domain_id)
        back = f"/domains/{domain.id}"
        if ctx.config.sandbox and domain.name == SANDBOX_DOMAIN:
            return await done("The sandbox domain is verified as it is.", back)
        try:
            if ctx.domain_verifier is not None:
                await ctx.domain_verifier.request_verification(domain.team_id, domain.id)
            else:
                await start_verification(ctx.spool, ctx.config, domain.team_id, domain.id)
        except ApiError as error:
            return await refused(error, back)
        return await done(
            "Verification started: the records are being looked up now. "
            "Reload this page in a few seconds to see what was found.",
            back,
        )

    @blueprint.post("/domains/<domain_id>/tracking")
    async def tracking(domain_id: str) -> Redirect:
        domain = await team_domain(domain_id)
        form = await request.form
        back = f"/domains/{domain.id}"
        try:
            await store.update_domain(
                ctx.spool,
                domain.team_id,
                domain.id,
                # An unticked checkbox is not sent at all: absent means off.
                open_tracking=form.get("open_tracking") == "on",
                click_tracking=form.get("click_tracking") == "on",
            )
        except ApiError as error:
            return await refused(error, back)
        return await done("Tracking settings saved.", back)

    @blueprint.get("/domains/<domain_id>/delete")
    @requires("admin")  # the confirmation of a change only admins may make
    async def confirm_delete(domain_id: str) -> str:
        domain = await team_domain(domain_id)
        return await render_template(
            "settings_confirm_delete.html",
            thing=domain.name,
            consequence=f"Its DKIM key is deleted with it: mail can no longer be sent from "
            f"{domain.name}, and adding it again means publishing new records.",
            action=f"/domains/{domain.id}/delete",
            cancel=f"/domains/{domain.id}",
        )

    @blueprint.post("/domains/<domain_id>/delete")
    async def delete(domain_id: str) -> Redirect:
        domain = await team_domain(domain_id)
        try:
            await store.delete_domain(ctx.spool, domain.team_id, domain.id)
        except ApiError as error:
            return await refused(error, f"/domains/{domain.id}")
        return await done(f"{domain.name} was deleted.", "/domains")

    return blueprint
