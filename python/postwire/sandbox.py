"""Sandbox mode (`postwire serve --sandbox`): a first send on one machine, with no public DNS.

Three parts: the delivery engine holds every message in the local inbox instead of sending it
(`delivery/sandbox.py`, `store/sandbox_inbox.py`); `serve_sandbox` gives every team a verified
sending domain, `sandbox.postwire.test`; the API (`api/sandbox.py`) and `postwire sandbox`
(below) read the inbox. `config.check_sandbox_allowed` keeps it off anything but loopback.

The domain is under `.test`, which RFC 2606 and RFC 6761 reserve for testing: it is never
delegated, so nobody owns it, and no real mail can come from it or go to it.
"""

from __future__ import annotations

import dataclasses
import email
import email.policy
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Final

import trio

from postwire.config import Config
from postwire.domains import store as domain_store
from postwire.domains.records import parse_return_path
from postwire.domains.store import DomainRecord, find_domain_by_name, format_timestamp
from postwire.errors import PostwireError, SpoolError
from postwire.services import ServiceDeps
from postwire.store import accounts
from postwire.store.sandbox_inbox import HeldMessage, get_held, held_source, list_held
from postwire.store.spool import Spool, serve_spool
from postwire.suppressions import add_suppression

log = logging.getLogger("postwire.sandbox")

SANDBOX_DOMAIN: Final = "sandbox.postwire.test"
# The test address that is on every team's suppression list (`delivery/sandbox.py` lists the
# others that fail on purpose).
SUPPRESSED_ADDRESS: Final = f"suppressed@{SANDBOX_DOMAIN}"
# With no team yet, the sandbox makes one, so that `postwire keys create` joins it.
FIRST_TEAM_NAME: Final = "default"
# How soon a team created while the sandbox runs gets its domain.
TEAM_POLL_SECONDS: Final = 1.0

BANNER: Final = f"""\
==============================================================================
  SANDBOX: no email leaves this machine.
  Every message is DKIM-signed as usual, then held in the local inbox: no DNS
  lookup and no SMTP connection is made for any recipient.
  Send from any address at {SANDBOX_DOMAIN} (verified for every team).
  Read what was sent:  postwire sandbox list  |  GET /sandbox/messages
  To test failures, send to delivered@, bounced@, complained@, delayed@ or
  suppressed@{SANDBOX_DOMAIN}.
==============================================================================
"""


async def serve_sandbox(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Keep the sandbox domain ready for every team while the sandbox is on.

    On start it says loudly that nothing leaves the machine, creates the first team if there
    is none, and gives every team the verified domain and `SUPPRESSED_ADDRESS` on its
    suppression list; then it gives both to new teams (and makes the domain verified again if
    it was changed) until `deps.stopping`. A team that removes the address from its list has
    it back at the next start. With the sandbox off it
    only sets domains left by an earlier sandbox run back to `not_started`, so mail from them
    is refused rather than sent for real, and returns. Holds nothing that needs cleaning up.
    """
    if not config.sandbox:
        await retire_sandbox_domains(deps.spool)
        task_status.started()
        return
    log.warning(
        "sandbox: no email leaves this machine; every message is held in the local inbox "
        "(postwire sandbox list, GET /sandbox/messages)"
    )
    print(BANNER, flush=True)
    if not accounts.list_teams(deps.spool):
        await accounts.create_team(deps.spool, FIRST_TEAM_NAME, datetime.now(UTC))
    await provide_sandbox_domains(deps.spool, config)
    await suppress_test_address(deps.spool, [team.id for team in accounts.list_teams(deps.spool)])
    task_status.started()
    while True:
        with trio.move_on_after(TEAM_POLL_SECONDS):
            await deps.stopping.wait()
        if deps.stopping.is_set():
            return
        try:
            new_teams = await provide_sandbox_domains(deps.spool, config)
            await suppress_test_address(deps.spool, new_teams)
        except SpoolError as exc:  # full, say: the next round tries again
            log.warning("sandbox: cannot store the sandbox domain: %s", exc)


async def provide_sandbox_domains(spool: Spool, config: Config) -> list[str]:
    """Give every team the sandbox domain, verified, with a DKIM key of its own; the ids of
    the teams that had none."""
    new_teams: list[str] = []
    for team in accounts.list_teams(spool):
        domain = find_domain_by_name(spool, team.id, SANDBOX_DOMAIN)
        if domain is None:
            domain = await _new_domain(spool, config, team.id)
            new_teams.append(team.id)
            log.info("sandbox: %s is ready for team %s", SANDBOX_DOMAIN, team.name)
        ready = _verified(domain, config)
        if ready != domain:
            await domain_store.save_domain(spool, ready)
    return new_teams


async def suppress_test_address(spool: Spool, team_ids: list[str]) -> None:
    """Put `SUPPRESSED_ADDRESS` on these teams' suppression lists, as a person would (origin
    `manual`), so that mail to it is skipped the way mail to any suppressed address is."""
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    for team_id in team_ids:
        await add_suppression(spool, team_id, SUPPRESSED_ADDRESS, now_ms)


async def _new_domain(spool: Spool, config: Config, team_id: str) -> DomainRecord:
    """The team's sandbox domain, with a DKIM key of its own. Not through `create_domain`: every
    team has this name (it is published nowhere, so no team's key can overwrite another's)."""
    return await domain_store.new_domain_record(
        spool,
        config,
        team_id,
        SANDBOX_DOMAIN,
        region=domain_store.REGIONS[0],
        custom_return_path=parse_return_path(None),
        open_tracking=False,
        click_tracking=False,
        tls="opportunistic",
        capabilities={"sending": "enabled", "receiving": "disabled"},
        tracking_subdomain=None,
    )


def _verified(domain: DomainRecord, config: Config) -> DomainRecord:
    """The domain verified without DNS: every record verified, and no verification started,
    so the verifier never looks it up."""
    records = domain_store.domain_dns_records(domain, config)
    return dataclasses.replace(
        domain,
        status="verified",
        record_statuses={record.key: "verified" for record in records},
        verification_started_at_ms=None,
        last_checked_at_ms=None,
    )


async def retire_sandbox_domains(spool: Spool) -> None:
    """Set the sandbox domains an earlier sandbox run verified back to `not_started`."""
    for team in accounts.list_teams(spool):
        domain = find_domain_by_name(spool, team.id, SANDBOX_DOMAIN)
        if domain is not None and domain.status != "not_started":
            retired = dataclasses.replace(domain, status="not_started", record_statuses={})
            await domain_store.save_domain(spool, retired)
            log.info("sandbox is off: %s no longer sends for team %s", SANDBOX_DOMAIN, team.name)


# --- `postwire sandbox list` and `postwire sandbox show` ---------------------------------------


async def inbox_listing(config: Config, limit: int) -> str:
    """The newest `limit` held messages of every team, one per line."""
    async with _open_spool(config) as spool:
        held: list[HeldMessage] = []
        for team in accounts.list_teams(spool):
            held += list_held(spool, team.id, limit=limit)[0]
    held = sorted(held, key=lambda message: message.id, reverse=True)[:limit]
    if not held:
        return "The sandbox inbox is empty."
    lines = ["ID                                    HELD AT (UTC)        FROM -> TO: SUBJECT"]
    for message in held:
        held_at = format_timestamp(message.held_at_ms)[:19]
        lines.append(
            f"{message.id}  {held_at}  {message.sender} -> {', '.join(message.to)}: "
            f"{message.subject}"
        )
    return "\n".join(lines)


async def held_message(config: Config, email_id: str) -> tuple[HeldMessage, bytes]:
    """The held message with this id (whichever team sent it) and its raw source."""
    async with _open_spool(config) as spool:
        for team in accounts.list_teams(spool):
            held = get_held(spool, team.id, email_id)
            source = held_source(spool, team.id, email_id)
            if held is not None and source is not None:
                return held, source
    raise PostwireError(f"no message {email_id!r} in the sandbox inbox")


def describe_held(held: HeldMessage, source: bytes) -> str:
    """A held message for a reader: who, what, when, then its text (or HTML) body."""
    lines = [
        f"Email:     {held.id}",
        f"From:      {held.sender}",
        f"To:        {', '.join(held.to)}",
        f"Subject:   {held.subject}",
        f"Envelope:  {held.envelope_from} -> {', '.join(held.recipients)}",
        f"Held at:   {format_timestamp(held.held_at_ms)}",
        f"Size:      {held.size} bytes (postwire sandbox show --raw {held.id})",
    ]
    message = email.message_from_bytes(source, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    body = message.get_body(preferencelist=("plain", "html"))
    text = body.get_content() if isinstance(body, EmailMessage) else "(no text or HTML part)"
    return "\n".join([*lines, "", str(text).rstrip("\n")])


@asynccontextmanager
async def _open_spool(config: Config) -> AsyncIterator[Spool]:
    """The service's spool, opened beside a running `serve` (LMDB allows it), for reading."""
    if not (config.data_dir / "spool").is_dir():
        raise PostwireError(
            f"no spool in {config.data_dir}: run this where `postwire serve --sandbox` runs, "
            "with the same --config"
        )
    async with trio.open_nursery() as nursery:
        spool: Spool = await nursery.start(serve_spool, config)
        try:
            yield spool
        finally:
            nursery.cancel_scope.cancel()
