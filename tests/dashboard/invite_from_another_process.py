"""A process beside a running server inviting at once: `python -m
tests.dashboard.invite_from_another_process CONFIG OWNER ADDRESS COUNT` opens the server's spool
(as every `postwire` command does) and makes COUNT parallel invitations to ADDRESS as OWNER, in
OWNER's first team, with the limits of CONFIG. It prints one line per invitation, "sent" or
"refused", once all are done."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import trio

from postwire.accounts.invitations import InvitationError, InvitationLimits, invite
from postwire.accounts.system_mail import SystemMailer
from postwire.config import load_config
from postwire.store import users
from postwire.store.accounts import TEAMS
from postwire.store.spool import Spool, serve_spool


async def _invite_all(config_path: Path, owner_email: str, address: str, count: int) -> None:
    config = load_config(config_path, {})
    outcomes: list[str] = []
    async with trio.open_nursery() as nursery:
        spool: Spool = await nursery.start(serve_spool, config)
        owner_id = users.find_user_id_by_email(spool, users.normalize_email(owner_email))
        assert owner_id is not None
        owner = users.get_user(spool, owner_id)
        assert owner is not None
        (membership, *_) = users.memberships_of_user(spool, owner_id)
        team = TEAMS.get(spool, membership.team_id)
        assert team is not None
        mailer = SystemMailer(config, spool)

        async def one() -> None:
            try:
                await invite(
                    spool, mailer, team=team, email=address, role="member", inviter=owner,
                    inviter_role=membership.role, public_url=config.dashboard.public_url,
                    now=datetime.now(UTC), limits=InvitationLimits.of(config.auth),
                )  # fmt: skip
            except InvitationError:
                outcomes.append("refused")
            else:
                outcomes.append("sent")

        async with trio.open_nursery() as invitations:
            for _ in range(count):
                invitations.start_soon(one)
        nursery.cancel_scope.cancel()
    print("\n".join(outcomes), flush=True)


if __name__ == "__main__":
    config_arg, owner_arg, address_arg, count_arg = sys.argv[1:]
    trio.run(_invite_all, Path(config_arg), owner_arg, address_arg, int(count_arg))
