"""A team's single sign-on policy: which provider its people use, and whether password login
is refused for them.

"Enforce SSO" refuses password login (and Google or GitHub sign-in) for the team's members;
owners keep their password as a break-glass way in, for the day the identity provider is down
or misconfigured. The login page asks `password_login_refused` for each team of the person.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime

from postwire._core import WriteBatch
from postwire.domains.store import find_verified_domain_for_sender
from postwire.errors import KeyExistsError
from postwire.store.spool import Spool
from postwire.store.sso import (
    SsoConfigRecord,
    get_sso_config,
    get_sso_config_parked,
    put_sso_config,
)

PROTOCOLS = ("oidc", "saml")
# A DNS name (letters, digits, hyphens, dots), as in email addresses' domains.
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")


class SsoSettingsError(ValueError):
    """Settings that cannot be saved; the text says why, in words for the page."""


def team_enforces_sso(spool: Spool, team_id: str) -> bool:
    """Whether the team refuses password login for its members (SSO configured and enforced)."""
    return _enforces(get_sso_config(spool, team_id))


def _enforces(config: SsoConfigRecord | None) -> bool:
    return config is not None and config.enforce and config.protocol in PROTOCOLS


def password_login_refused(spool: Spool, team_id: str, role: str) -> bool:
    """Whether a member of `role` may not use a password (or Google, GitHub) for this team:
    SSO is enforced and they are not an owner (owners keep a break-glass password login)."""
    return role != "owner" and team_enforces_sso(spool, team_id)


async def password_login_refused_parked(spool: Spool, team_id: str, role: str) -> bool:
    """`password_login_refused`, parked rather than blocking on a table store on the network
    (the dashboard's guard, on every request)."""
    if role == "owner":
        return False
    return _enforces(await get_sso_config_parked(spool, team_id))


async def sso_settings(spool: Spool, team_id: str) -> SsoConfigRecord:
    """The team's SSO settings (empty ones if it has none), read parked."""
    return await get_sso_config_parked(spool, team_id) or SsoConfigRecord(team_id=team_id)


def parse_email_domains(text: str) -> list[str]:
    """Email domains typed one a line or separated by commas or spaces, checked and lowered."""
    domains: list[str] = []
    for word in re.split(r"[\s,]+", text.strip().lower()):
        if not word:
            continue
        if not _DOMAIN.match(word):
            raise SsoSettingsError(f"“{word}” is not a domain name (like example.com).")
        if word not in domains:
            domains.append(word)
    return domains


async def save_sso_settings(
    spool: Spool, updated: SsoConfigRecord, *, now: datetime
) -> SsoConfigRecord:
    """Save the team's settings after checking they hold together; a domain another team
    answers for is refused."""
    if updated.protocol not in ("", *PROTOCOLS):
        raise SsoSettingsError("Choose OpenID Connect or SAML 2.0.")
    if updated.protocol == "oidc" and not (updated.oidc_issuer and updated.oidc_client_id):
        raise SsoSettingsError("OpenID Connect needs the issuer URL and the client id.")
    if updated.protocol == "saml" and not (updated.saml_metadata_xml or updated.saml_metadata_url):
        raise SsoSettingsError("SAML 2.0 needs the identity provider's metadata (XML or URL).")
    if updated.enforce and not updated.protocol:
        raise SsoSettingsError("SSO can be enforced once a provider is configured.")
    for domain in updated.email_domains:
        # A team's provider speaks for addresses of its own verified domains only: otherwise
        # any team could claim a mail provider's domain and receive its users' logins.
        if find_verified_domain_for_sender(spool, updated.team_id, domain) is None:
            raise SsoSettingsError(
                f"{domain} is not a verified domain of this team: add and verify it on the"
                " Domains page first."
            )
    record = replace(updated, updated_at=now.isoformat())
    async for attempt in spool.guarded(f"sso_configs/team/{record.team_id}"):
        with attempt:
            previous = get_sso_config(spool, record.team_id)
            batch = WriteBatch()
            put_sso_config(batch, record, previous)
            try:
                await spool.commit(batch)
            except KeyExistsError:
                raise SsoSettingsError(
                    "One of these email domains already signs in through another team's SSO."
                ) from None
    return record
