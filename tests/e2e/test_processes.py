"""`processes = 2`: a live `postwire serve` with one worker process beside it. Both accept SMTP
sessions on the same ports, mail from both is delivered once each to Postfix's `smtp-sink`,
a killed worker is started again, and no worker outlives the first process."""

from __future__ import annotations

import base64
import os
import signal
import smtplib
import ssl
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from pathlib import Path

import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, verified_domain, wait_until
from tests.e2e.test_smtp_submission import (
    free_address,
    listener,
    relaying_to_sink,
    sink_dump,
    wait_for_smtp,
)
from tests.smtp_sink import sunk_messages

__all__ = ["sink_dump"]  # a fixture used here

SESSIONS = 12
MESSAGES_PER_SESSION = 5
# Sessions held open while looking for one in each process (more would only queue behind them).
HELD_SESSIONS = 16


def unverified_tls() -> ssl.SSLContext:
    """A client context that takes the server's self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


# One for every session: making a context loads the CA bundle, a tenth of a second on a busy
# machine, which twelve parallel sessions paid each.
SESSION_TLS = unverified_tls()


@pytest.fixture
def two_processes(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, sink_dump: Path
) -> Iterator[LiveServer]:
    with relaying_to_sink(
        tmp_path, dns_server, sink_dump, tls_listen=(free_address(),), processes=2
    ) as live:
        verified_domain(dns_server)
        wait_for_smtp(listener(live, "tls_listen"))
        yield live


def worker_pids(live: LiveServer) -> list[int]:
    assert live.process is not None
    return children_of(live.process.pid)


def children_of(parent: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name (in parentheses): state, ppid, ...
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == parent:
            pids.append(int(entry.name))
    return pids


def server_sockets(pid: int) -> set[int]:
    """Inodes of the sockets `pid` has open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def accepted_on(port: int) -> set[int]:
    """Inodes of established TCP sockets whose local port is `port`: sessions a server accepted."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] == "01":  # ESTABLISHED
            inodes.add(int(fields[9]))
    return inodes


def send_session(address: tuple[str, int], token: str, session: int) -> list[str]:
    """One implicit-TLS session sending several messages; the subjects it sent."""
    subjects = []
    with smtplib.SMTP_SSL(*address, timeout=30, context=SESSION_TLS) as client:
        client.login("postwire", token)
        for number in range(MESSAGES_PER_SESSION):
            mail = EmailMessage()
            mail["From"] = f"Shop <shop@{DOMAIN}>"
            mail["To"] = "ann@example.org"
            mail["Subject"] = subject = f"session {session} message {number}"
            mail.set_content("Sent over a shared listener.\n")
            client.send_message(mail)
            subjects.append(subject)
    return subjects


def all_emails() -> list[dict[str, object]]:
    return list(resend.Emails.list({"limit": 100})["data"])


def test_both_processes_accept_and_every_message_is_delivered_once(
    two_processes: LiveServer, sink_dump: Path
) -> None:
    address = listener(two_processes, "tls_listen")
    token = two_processes.create_key("relay", permission="sending_access")
    (worker,) = worker_pids(two_processes)
    assert two_processes.process is not None
    first = two_processes.process.pid

    # Sessions held open at once land in both processes (each accepts from the same queue).
    # One busy for a moment (the first process just after start, on a loaded machine) lets the
    # other take every session meanwhile: past a few held, a session landing where the others
    # are is closed again, and sessions are opened until both took one or time runs out.
    held: list[smtplib.SMTP_SSL] = []
    try:
        owners: set[int] = set()
        deadline = time.monotonic() + 30
        while owners != {first, worker} and time.monotonic() < deadline:
            client = smtplib.SMTP_SSL(*address, timeout=30, context=SESSION_TLS)
            client.ehlo()
            sessions = accepted_on(address[1])
            now_owned = {pid for pid in (first, worker) if server_sockets(pid) & sessions}
            if now_owned == owners and len(held) >= HELD_SESSIONS:
                client.close()
                time.sleep(0.02)
                continue
            held.append(client)
            owners = now_owned
        assert owners == {first, worker}, "one process accepted every session"

        # Failed AUTH counts are the service's, not a process's: smtp.max_auth_failures (10)
        # guesses at one key, spread over sessions in both processes, lock that key in both.
        guess = "re_qqqqqqqq_" + "g" * 24
        plain = base64.b64encode(f"\0postwire\0{guess}".encode()).decode()
        for attempt in range(10):
            assert held[attempt % len(held)].docmd("AUTH", f"PLAIN {plain}")[0] == 535
        assert {client.docmd("AUTH", f"PLAIN {plain}")[0] for client in held} == {454}
    finally:
        for client in held:
            client.close()

    with ThreadPoolExecutor(SESSIONS) as pool:
        batches = pool.map(lambda n: send_session(address, token, n), range(SESSIONS))
        sent = [subject for batch in batches for subject in batch]
    assert len(sent) == SESSIONS * MESSAGES_PER_SESSION

    def delivered() -> bool:
        emails = all_emails()
        return len(emails) == len(sent) and all(e["last_event"] == "delivered" for e in emails)

    wait_until(delivered, "every email delivered", timeout=60)
    assert sorted(str(e["subject"]) for e in all_emails()) == sorted(sent)
    # Leases: whichever process delivered a message, it arrived once.
    sunk = sunk_messages(sink_dump)
    subjects = sorted(
        line.split(b": ", 1)[1].decode()
        for message in sunk
        for line in message.content.split(b"\r\n")
        if line.startswith(b"Subject: ")
    )
    assert subjects == sorted(sent)

    # Insights are computed once per email whichever process accepted or delivered it: every
    # email has them, its sending domain's authentication among them.
    def insights_of_all() -> list[list[dict[str, str]]]:
        return [list(resend.Emails.get(str(e["id"])).get("insights", [])) for e in all_emails()]

    wait_until(lambda: all(insights_of_all()), "every email's insights", timeout=60)
    assert all(any(i["code"] == "dkim_aligned" for i in found) for found in insights_of_all())


def test_a_killed_worker_is_started_again_and_none_outlives_the_service(
    two_processes: LiveServer,
) -> None:
    address = listener(two_processes, "tls_listen")
    token = two_processes.create_key("relay", permission="sending_access")
    (worker,) = worker_pids(two_processes)
    os.kill(worker, signal.SIGKILL)

    def replaced() -> bool:
        pids = worker_pids(two_processes)
        return len(pids) == 1 and pids[0] != worker

    wait_until(replaced, "a new worker", timeout=30)
    assert len(send_session(address, token, 0)) == MESSAGES_PER_SESSION

    (replacement,) = worker_pids(two_processes)
    assert two_processes.stop() == 0
    assert not Path(f"/proc/{replacement}").exists() or _is_zombie(replacement)


def test_a_worker_stops_when_the_first_process_dies(two_processes: LiveServer) -> None:
    (worker,) = worker_pids(two_processes)
    assert two_processes.process is not None
    two_processes.process.kill()
    two_processes.process.wait()
    two_processes.process = None
    deadline = time.monotonic() + 30
    while Path(f"/proc/{worker}").exists() and not _is_zombie(worker):
        assert time.monotonic() < deadline, "the worker outlived the first process"
        time.sleep(0.05)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"
