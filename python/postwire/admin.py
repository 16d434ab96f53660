"""What `postwire keys ...` and `postwire domains ...` do: administration from the shell, on the
same spool as a running `serve` (LMDB lets both processes use it at once)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import trio

from postwire.accounts.api_keys import MAX_NAME_LENGTH
from postwire.config import Config
from postwire.domains import store as domain_store
from postwire.domains.records import DnsRecord, parse_domain_name
from postwire.domains.setup_warnings import domain_warnings
from postwire.domains.store import load_domain
from postwire.domains.verification import build_resolver, verify_domain
from postwire.domains.verification_state import start_verification
from postwire.errors import ApiError, PostwireError
from postwire.store import accounts
from postwire.store.accounts import Permission
from postwire.store.spool import Spool, serve_spool

log = logging.getLogger("postwire")

DEFAULT_TEAM_NAME = "default"


async def create_key(
    config: Config,
    name: str,
    permission: Permission,
    domain_id: str | None,
    team_id: str | None,
    new_team: str | None = None,
) -> tuple[str, str]:
    """Create a key; return its id and token. With no team yet (or `new_team`), create one."""
    if not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise PostwireError(f"the key name must be 1 to {MAX_NAME_LENGTH} characters")
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = datetime.now(UTC)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        if new_team is not None:
            team_id = (await accounts.create_team(spool, new_team, now)).id
        else:
            team_id = await _team(spool, team_id, now)
        if domain_id is not None and load_domain(spool, team_id, domain_id) is None:
            raise PostwireError(f"the team has no domain {domain_id!r}")
        key, token = await accounts.create_api_key(spool, team_id, name, permission, domain_id, now)
        nursery.cancel_scope.cancel()
    return key.id, token


async def _team(spool: Spool, team_id: str | None, now: datetime) -> str:
    """The team named, or the only one; with no team at all, a new default one."""
    teams = accounts.list_teams(spool)
    if team_id is not None:
        if team_id not in {team.id for team in teams}:
            raise PostwireError(f"no team {team_id!r}")
        return team_id
    if len(teams) > 1:
        raise PostwireError("there are several teams: choose one with --team")
    if teams:
        return teams[0].id
    return (await accounts.create_team(spool, DEFAULT_TEAM_NAME, now)).id


def _record_lines(records: list[DnsRecord], statuses: dict[str, str] | None = None) -> list[str]:
    lines = []
    for record in records:
        # Zone-file syntax: an MX target is a name, absolute with its final dot.
        value = record.value if record.type != "MX" else f"{record.priority} {record.value}."
        status = "" if statuses is None else f"  [{statuses.get(record.key, 'not_started')}]"
        note = "" if record.required else "  (recommended)"
        lines.append(f"{record.fqdn}. {record.type} {value}{status}{note}")
    return lines


async def add_domain(config: Config, name: str, region: str | None, team_id: str | None) -> str:
    """Add a sending domain; return the DNS records to publish, one per line. What in the
    config keeps them from working (`domain_warnings`) goes to the log."""
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        team = await _team(spool, team_id, datetime.now(UTC))
        try:
            domain = await domain_store.create_domain(spool, config, team, name, region=region)
        except ApiError as refusal:
            raise PostwireError(refusal.message) from None
        nursery.cancel_scope.cancel()
    records = domain_store.domain_dns_records(domain, config)
    for warning in domain_warnings(
        config, open_tracking=domain.open_tracking, click_tracking=domain.click_tracking
    ):
        log.warning("%s", warning.message)
    header = f"Domain {domain.name} added (id {domain.id}). Publish these records:"
    return "\n".join([header, *_record_lines(records)])


async def verify_domain_now(config: Config, name: str, team_id: str | None) -> tuple[str, bool]:
    """Check the domain's DNS records now; return a report and whether it is verified."""
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        team = await _team(spool, team_id, datetime.now(UTC))
        try:
            canonical = parse_domain_name(name)
        except ApiError as refusal:
            raise PostwireError(refusal.message) from None
        found = next(
            (
                d
                for d in domain_store.scan_all_domains(spool)
                if d.team_id == team and d.name == canonical
            ),
            None,
        )
        if found is None:
            raise PostwireError(f"no domain {canonical!r}: add it with `postwire domains add`")
        started = await start_verification(spool, config, team, found.id)
        checked = await verify_domain(spool, config, started, build_resolver(config)) or started
        nursery.cancel_scope.cancel()
    records = domain_store.domain_dns_records(checked, config)
    lines = [f"{checked.name}: {checked.status}", *_record_lines(records, checked.record_statuses)]
    return "\n".join(lines), checked.status == "verified"


async def unlock_user(config: Config, email: str) -> int:
    """Lift the sign-in throttles of the account `email` (`login_limits.unlock`), on the same
    spool as a running `serve`; returns how many counts were cleared."""
    from postwire.accounts.login_limits import unlock

    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        cleared = await unlock(spool, email)
        nursery.cancel_scope.cancel()
    return cleared
