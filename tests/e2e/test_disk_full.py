"""A full disk under a live `postwire serve`: its data directory is a small tmpfs, a filler file
takes every free block, and the REST API answers 503 `service_unavailable` and SMTP `452 4.3.1`
while the process stays up (and comes up again when restarted on the full disk); once the filler
is gone, intake resumes without a restart and every email accepted reaches Postfix's smtp-sink.
With one process, and with two on the same spool."""

from __future__ import annotations

import base64
import errno
import os
import smtplib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, verified_domain, wait_until
from tests.e2e.test_smtp_submission import (
    free_address,
    listener,
    relaying_to_sink,
    shop_mail,
    sink_dump,  # noqa: F401 (a fixture)
    submit_over_starttls,
    wait_for_smtp,
)
from tests.smtp_sink import sunk_messages

# The spool's map, and so its reserves (an eighth of it, kept for delivery's writes on a full
# map and a full disk), small enough for a small filesystem.
SPOOL_MAP_SIZE = 64 << 20
TMPFS_SIZE = "48m"
# Random bytes, so that the spool's compression does not shrink them: mail big enough to need
# new pages of the spool's file, and few of them to use up what is allocated past its reserve.
ATTACHMENT = os.urandom(384 << 10)
# More than the allocation past the reserve could ever take of such mail.
MOST_ACCEPTED_ON_A_FULL_DISK = 8


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of `TMPFS_SIZE` mounted where `serving` puts the data directory, unmounted
    after (the tests run as root)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0700", "tmpfs", str(data_dir)],
        check=True,
    )
    try:
        yield data_dir
    finally:
        subprocess.run(["umount", "--lazy", str(data_dir)], check=True)


def fill(directory: Path) -> Path:
    """A file that takes every free block of `directory`'s filesystem."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 20, 4096):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


def send_api(live: LiveServer, subject: str, scheduled_at: str | None = None) -> httpx.Response:
    email = {
        "from": f"Shop <shop@{DOMAIN}>",
        "to": "ann@example.org",
        "subject": subject,
        "text": "Hello.\n",
        "attachments": [{"filename": "data.bin", "content": base64.b64encode(ATTACHMENT).decode()}],
    }
    if scheduled_at is not None:
        email["scheduled_at"] = scheduled_at
    return httpx.post(
        f"{live.base_url}/emails",
        headers={"Authorization": f"Bearer {resend.api_key}"},
        json=email,
        timeout=30,
    )


def send_smtp(address: tuple[str, int], token: str, cert: Path, subject: str) -> None:
    """One message over STARTTLS; raises `SMTPDataError` when DATA is refused."""
    mail = shop_mail(subject, "bob@example.org", "Sent over SMTP.\n")
    mail.add_attachment(ATTACHMENT, maintype="application", subtype="octet-stream")
    assert submit_over_starttls(address, token, cert, mail) == {}


@pytest.mark.parametrize("processes", [1, 2])
def test_full_disk_answers_503_and_452_then_resumes_and_delivers_everything(
    processes: int,
    small_disk: Path,
    tmp_path: Path,
    dns_server: AuthoritativeDnsServer,
    sink_dump: Path,  # noqa: F811
) -> None:
    with relaying_to_sink(
        tmp_path,
        dns_server,
        sink_dump,
        starttls_listen=(free_address(),),
        spool_map_size=SPOOL_MAP_SIZE,
        processes=processes,
    ) as live:
        verified_domain(dns_server)
        smtp = listener(live, "starttls_listen")
        wait_for_smtp(smtp)
        token = live.create_key("relay", permission="sending_access")
        cert = small_disk / "tls" / "smtp-cert.pem"
        accepted: list[str] = []
        # Emails sent on the full disk wait in the spool, scheduled for later, so that its pages
        # stay taken; they are made due at the end.
        scheduled: list[str] = []

        def send_both(label: str) -> None:
            response = send_api(live, f"api {label}")
            assert response.status_code == 200, response.text
            accepted.append(f"api {label}")
            send_smtp(smtp, token, cert, f"smtp {label}")
            accepted.append(f"smtp {label}")

        def api_refused(label: str) -> bool:
            """Send through the API; False when accepted, True when refused as full."""
            response = send_api(live, label, scheduled_at="in 1 hour")
            if response.status_code == 200:
                accepted.append(label)
                scheduled.append(response.json()["id"])
                return False
            assert response.status_code == 503, response.text
            assert response.json() == {
                "statusCode": 503,
                "name": "service_unavailable",
                "message": "Postwire's spool is full; retry later.",
            }
            return True

        def smtp_refused(label: str) -> bool:
            try:
                send_smtp(smtp, token, cert, label)
            except smtplib.SMTPDataError as refusal:
                assert refusal.smtp_code == 452, refusal
                assert refusal.smtp_error.startswith(b"4.3.1 "), refusal.smtp_error
                return True
            accepted.append(label)
            return False

        def refused_both(label: str) -> None:
            """Both ways refused, after at most a few more accepted (the disk's blocks already
            allocated to the spool past its reserve), and the server still up."""
            for refused in (api_refused, smtp_refused):
                attempts = 0
                while not refused(f"{refused.__name__} {label} {attempts}"):
                    attempts += 1
                    assert attempts < MOST_ACCEPTED_ON_A_FULL_DISK, "a full disk took all that"
                assert refused(f"{refused.__name__} {label} again")
            assert live.process is not None and live.process.poll() is None

        for i in range(3):
            send_both(f"before {i}")
        filler = fill(small_disk)
        refused_both("full")

        # Started again on the full disk, it comes up and refuses the same way.
        live.stop()
        live.start()
        resend.api_url = live.base_url
        wait_for_smtp(smtp)
        refused_both("after restart")
        live.wait_for_log("the disk holding the spool is full", what="the full disk logged")

        # Space returns: intake resumes by itself.
        filler.unlink()
        for i in range(3):
            send_both(f"after {i}")
        for email_id in scheduled:
            resend.Emails.update({"id": email_id, "scheduled_at": "in 1 second"})

        def delivered() -> list[str]:
            subjects = []
            for message in sunk_messages(sink_dump):
                for line in message.content.split(b"\r\n"):
                    if line.startswith(b"Subject: "):
                        subjects.append(line.removeprefix(b"Subject: ").decode())
            return subjects

        # At least once: a message in flight at the restart may arrive twice.
        wait_until(lambda: set(accepted) <= set(delivered()), "every accepted email delivered")
        assert set(delivered()) == set(accepted)
        assert live.process is not None and live.process.poll() is None
