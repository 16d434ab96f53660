"""`postwire domains add` prints the records to publish; `postwire domains verify` checks them
against a real DNS server and exits 0 once the domain is verified."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import write_config


def postwire(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postwire", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_add_then_verify_from_the_shell(tmp_path: Path, dns_server: AuthoritativeDnsServer) -> None:
    config = tmp_path / "postwire.toml"
    write_config(config, tmp_path / "data", nameservers=(dns_server.nameserver,))
    added = postwire(config, "domains", "add", "Shell-Example.test")
    assert added.returncode == 0, added.stderr
    lines = added.stdout.splitlines()
    assert lines[0].startswith("Domain shell-example.test added")
    records = [line.split(" ", 2) for line in lines[1:]]
    assert {kind for _, kind, _ in records} == {"TXT", "MX"}
    assert any(
        name.startswith("_dmarc.") and "(recommended)" in value for name, _, value in records
    )

    unverified = postwire(config, "domains", "verify", "shell-example.test")
    assert unverified.returncode == 1
    assert unverified.stdout.startswith("shell-example.test: pending")

    for name, kind, value in records:
        if "(recommended)" not in value:
            dns_server.publish(name.rstrip("."), kind, value)
    verified = postwire(config, "domains", "verify", "shell-example.test")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("shell-example.test: verified")

    duplicate = postwire(config, "domains", "add", "shell-example.test")
    assert duplicate.returncode == 1 and "registered already" in duplicate.stderr
    unknown = postwire(config, "domains", "verify", "nothing.test")
    assert unknown.returncode == 1 and "no domain" in unknown.stderr
