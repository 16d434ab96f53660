"""docs/operations.md's backup and restore, step by step against live servers: `postwire backup`
while the service runs and takes mail, `postwire restore` into a new data directory (refused into
one a service has open, and over existing data without --force), then a server started on the
restored directory answers for every email accepted before the backup, with the same API key,
and starts at once beside the service the backup was taken from."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, _clean_env, verified_domain, write_config


def postwire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postwire", *args], capture_output=True, text=True, env=_clean_env()
    )


def send(subject: str) -> str:
    sent = resend.Emails.send(
        {"from": f"ops@{DOMAIN}", "to": "ann@example.org", "subject": subject, "text": "x"}
    )
    return str(sent["id"])


def test_backup_while_serving_then_restore_into_a_new_data_dir(
    server: LiveServer, dns_server: AuthoritativeDnsServer, tmp_path: Path
) -> None:
    verified_domain(dns_server)
    before = [send(f"before {i}") for i in range(5)]
    scheduled = resend.Emails.send(
        {"from": f"ops@{DOMAIN}", "to": "bo@example.org", "subject": "later", "text": "x",
         "scheduled_at": "in 2 hours"}
    )["id"]  # fmt: skip
    assert server.process is not None
    # A running service holds LMDB's lock on the spool (what restore looks for).
    from postwire.backup import spool_holder

    assert spool_holder(server.data_dir) == server.process.pid

    # Online: the API keeps accepting mail while the copy is written.
    during: list[str] = []
    stop = threading.Event()

    def keep_sending() -> None:
        while not stop.is_set():
            during.append(send(f"during {len(during)}"))

    sender = threading.Thread(target=keep_sending)
    sender.start()
    backup_dir = tmp_path / "backups" / "first"
    try:
        result = postwire("backup", str(backup_dir), "--config", str(server.config_path))
    finally:
        stop.set()
        sender.join()
    assert result.returncode == 0, result.stderr
    assert f"written to {backup_dir}" in result.stdout
    assert (backup_dir / "postwire-backup.json").is_file()
    assert not (backup_dir.parent / "first.partial").exists()
    after = send("after the backup")

    # Not into the data directory the service has open, even with --force.
    refused = postwire("restore", str(backup_dir), "--force", "--config", str(server.config_path))
    assert refused.returncode == 1
    assert f"process {server.process.pid} has the spool" in refused.stderr
    # A backup never overwrites one.
    again = postwire("backup", str(backup_dir), "--config", str(server.config_path))
    assert again.returncode == 1 and "not an empty directory" in again.stderr
    api_key = resend.api_key

    # The documented restore: a new data directory, its own config, while the service the
    # backup was taken from still runs (its record in the copy names a live pid).
    restored = LiveServer(config_path=tmp_path / "restored.toml", data_dir=tmp_path / "restored")
    write_config(restored.config_path, restored.data_dir, nameservers=(dns_server.nameserver,))
    done = postwire("restore", str(backup_dir), "--config", str(restored.config_path))
    assert done.returncode == 0, done.stderr
    assert f"into {restored.data_dir}" in done.stdout
    assert (restored.data_dir.stat().st_mode & 0o777) == 0o700
    twice = postwire("restore", str(backup_dir), "--config", str(restored.config_path))
    assert twice.returncode == 1 and "pass --force" in twice.stderr
    forced = postwire("restore", str(backup_dir), "--force", "--config", str(restored.config_path))
    assert forced.returncode == 0, forced.stderr

    restored.start()  # at once: the restored copy does not take itself for the original
    server.stop()
    try:
        resend.api_url, resend.api_key = restored.base_url, api_key  # the keys came back too
        for email_id in before:
            assert resend.Emails.get(email_id)["id"] == email_id
        assert resend.Emails.get(scheduled)["last_event"] == "scheduled"
        # Mail accepted during the copy is there or not, whole: every one that is answers.
        listed = {e["id"] for e in resend.Emails.list({"limit": 100})["data"]}
        assert set(before) | {scheduled} <= listed and after not in listed
        for email_id in listed & set(during):
            assert resend.Emails.get(email_id)["subject"].startswith("during")
        send("on the restored server")
    finally:
        restored.stop()


def test_restore_refuses_what_is_not_a_whole_backup(tmp_path: Path) -> None:
    config = tmp_path / "postwire.toml"
    write_config(config, tmp_path / "data")
    (tmp_path / "empty").mkdir()
    result = postwire("restore", str(tmp_path / "empty"), "--config", str(config))
    assert result.returncode == 1
    assert "is not a Postwire backup" in result.stderr
    assert not (tmp_path / "data" / "spool").exists()
