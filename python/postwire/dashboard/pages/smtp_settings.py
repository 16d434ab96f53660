"""SMTP settings: what an application needs to send through Postwire's SMTP submission, read
from the running configuration: the host and each port with its kind of TLS, the username
(`postwire`), which API key is the password, and the size limit.

    GET /smtp
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from quart import Blueprint, g, render_template

from postwire.config import Config
from postwire.dashboard.context import DashboardContext
from postwire.domains import store as domain_store
from postwire.smtp.submission_policy import AUTH_USERNAME
from postwire.store.accounts import list_api_keys_parked

# Listening on every address: clients reach the server by its public name.
WILDCARD_HOSTS: Final = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True, slots=True)
class SmtpEndpoint:
    host: str
    port: int
    implicit_tls: bool  # TLS from the first byte; otherwise STARTTLS before AUTH

    @property
    def security(self) -> str:
        return "TLS (implicit, from the first byte)" if self.implicit_tls else "STARTTLS"


def smtp_endpoints(config: Config) -> list[SmtpEndpoint]:
    """Every submission listener, as a client addresses it."""
    endpoints = []
    listeners = [(value, False) for value in config.smtp.starttls_listen]
    listeners += [(value, True) for value in config.smtp.tls_listen]
    for listen, implicit_tls in listeners:
        host, _, port = listen.rpartition(":")
        host = host.strip("[]")
        if host in WILDCARD_HOSTS:
            host = config.delivery.helo_name
        endpoints.append(SmtpEndpoint(host, int(port), implicit_tls))
    return endpoints


def routes(ctx: DashboardContext) -> Blueprint:
    bp = Blueprint("smtp_settings", __name__)

    @bp.get("/smtp")
    async def smtp_page() -> str:
        team_id: str = g.viewer.team.id
        domains, _ = await domain_store.list_domains_parked(ctx.spool, team_id)
        return await render_template(
            "smtp_settings.html",
            endpoints=smtp_endpoints(ctx.config),
            username=AUTH_USERNAME,
            keys=await list_api_keys_parked(ctx.spool, team_id),
            domain_names={domain.id: domain.name for domain in domains},
            verified=[domain.name for domain in domains if domain.status == "verified"],
            self_signed=ctx.config.smtp.tls_cert is None,
            max_size_mib=ctx.config.smtp.max_message_size / (1024 * 1024),
        )

    return bp
