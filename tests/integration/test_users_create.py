"""`postwire users create`: an owner made from the shell, with a password from standard input
or a one-time link to set it; an existing address made owner; refusals in plain words."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from postwire.accounts import passwords, users
from postwire.config import load_config
from postwire.store import accounts
from postwire.store.spool import serve_spool

PASSWORD = "a long passphrase 42"


@pytest.fixture
def config_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "postwire.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n\n[dashboard]\npublic_url = "https://dash.example"\n'
    )
    yield path


def run(
    config_file: Path, *args: str, password: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTWIRE_")}
    command = [sys.executable, "-m", "postwire", "users", "create", "--config", str(config_file)]
    command += list(args)
    if password is not None:
        command.append("--password-stdin")
    return subprocess.run(
        command, input=(password or "") + "\n", capture_output=True, text=True, env=env, timeout=60
    )


def stored(config_file: Path) -> dict[str, object]:
    """The users, their password checks and memberships, read from the spool."""

    async def read() -> dict[str, object]:
        async with trio.open_nursery() as nursery:
            spool = await nursery.start(serve_spool, load_config(config_file))
            teams = {team.id: team.name for team in accounts.list_teams(spool)}
            found: dict[str, object] = {"teams": sorted(teams.values())}
            for email in ("ada@example.com", "bob@example.com"):
                user = users.find_user_by_email(spool, email)
                if user is None:
                    continue
                found[email] = (
                    user.email_verified,
                    passwords.verify_password_sync(user.password_hash, PASSWORD),
                    sorted(
                        (teams[m.team_id], m.role) for m, _ in users.memberships_of(spool, user)
                    ),
                )
            nursery.cancel_scope.cancel()
        return found

    return trio.run(read)


def test_an_owner_with_a_password_from_stdin(config_file: Path) -> None:
    result = run(config_file, "--email", "Ada@example.com", "--team", "Acme", password=PASSWORD)
    assert result.returncode == 0, result.stderr
    assert "user Ada@example.com created, owner of team 'Acme'" in result.stderr
    assert result.stdout == ""
    assert stored(config_file) == {
        "teams": ["Acme"],
        "ada@example.com": (True, True, [("Acme", "owner")]),
    }


def test_without_a_password_a_one_time_link_is_printed(config_file: Path) -> None:
    result = run(config_file, "--email", "ada@example.com")
    assert result.returncode == 0, result.stderr
    (link,) = result.stdout.split()
    assert link.startswith("https://dash.example/password/set/")
    assert stored(config_file) == {
        "teams": ["default"],
        "ada@example.com": (True, False, [("default", "owner")]),
    }


def test_an_existing_user_is_made_owner_and_several_teams_need_a_name(config_file: Path) -> None:
    assert run(config_file, "--email", "ada@example.com", "--team", "Acme").returncode == 0
    assert run(config_file, "--email", "bob@example.com", "--team", "Beta").returncode == 0
    ambiguous = run(config_file, "--email", "bob@example.com")
    assert ambiguous.returncode == 1
    assert "several teams: choose one with --team NAME" in ambiguous.stderr
    again = run(config_file, "--email", "ADA@example.com", "--team", "Beta", password=PASSWORD)
    assert again.returncode == 0, again.stderr
    assert "is now an owner of team 'Beta'" in again.stderr
    assert stored(config_file)["ada@example.com"] == (
        True,
        True,
        [("Acme", "owner"), ("Beta", "owner")],
    )


@pytest.mark.parametrize(
    ("args", "password", "message"),
    [
        (["--email", "not-an-address"], None, "'not-an-address' is not an email address"),
        (["--email", "ada@example.com"], "short", "at least 10 characters"),
        (["--email", "ada@example.com", "--team", " "], None, "team name must be 1 to 100"),
    ],
)
def test_refusals(config_file: Path, args: list[str], password: str | None, message: str) -> None:
    result = run(config_file, *args, password=password)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr
