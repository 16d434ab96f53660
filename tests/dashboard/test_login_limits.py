"""Bursts against a live `postwire serve` (two processes): parallel guesses at a password get
no more checks than the allowance, parallel sign-ups open no more accounts than the limit,
parallel checks keep the server's memory bounded (Argon2 takes 64 MiB each), a stranger
guessing from other addresses never locks the owner out (password and code in a browser), and
`postwire users unlock` lifts a throttle.

Bursts come from distinct loopback addresses (127.0.0.0/8) as from distinct clients, with
httpx under Trio; every request is a form post with the double-submit CSRF cookie."""

from __future__ import annotations

import re
import ssl
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pyotp
import pytest
import trio
from playwright.sync_api import Page

from tests.dashboard.conftest import DashboardServer, StartDashboard, log_in
from tests.dashboard.module_server import running_dashboard
from tests.dashboard.test_mfa import (
    OWNER,
    PASSWORD,
    enrol_totp,
    log_out,
    path_of,
    sign_in_with_code,
)
from tests.e2e.conftest import _clean_env

CSRF = "burst-test-csrf-token"
# The defaults: `auth.max_login_failures` 10 (5 a minute), sign-ups 5 an hour.
MAX_LOGIN_FAILURES = 10
MAX_SIGNUPS = 5
ARGON2_BYTES = 64 * 1024 * 1024
# 40 parallel checks took the dashboard's process to 2.37 GB; two at a time, it may grow by
# their 128 MiB and what the threads and requests need, well under this.
RSS_GROWTH_BOUND = 4 * ARGON2_BYTES
# Every client of a burst shares one TLS context (unused: the dashboard is plain HTTP).
# httpx would otherwise build one per client, loading the CA bundle each time on the test's
# one thread: tens of milliseconds each, which spread a burst of a hundred posts over seconds.
UNUSED_TLS = ssl.create_default_context()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardServer]:
    """One server (two processes, open sign-up) for the tests that only send requests to it,
    each with an account of its own and its bursts from client addresses of its own (throttles
    count per account and address, and per address)."""
    directory = tmp_path_factory.mktemp("login-limits")
    with running_dashboard(directory, processes=2, auth_signup="open") as server:
        yield server


def listening_url(server: DashboardServer) -> str:
    """The dashboard on 127.0.0.1 (its public URL names localhost, which may be ::1)."""
    port = re.search(r":(\d+)$", server.dashboard_url)
    assert port, server.dashboard_url
    return f"http://127.0.0.1:{port.group(1)}"


async def post_form(url: str, path: str, source: str, form: dict[str, str]) -> httpx.Response:
    transport = httpx.AsyncHTTPTransport(local_address=source, verify=UNUSED_TLS)
    async with httpx.AsyncClient(
        base_url=url, transport=transport, cookies={"pw_csrf": CSRF}, timeout=120
    ) as client:
        return await client.post(path, data=form | {"csrf_token": CSRF})


def burst(
    url: str, path: str, requests: Iterable[tuple[str, dict[str, str]]]
) -> list[httpx.Response]:
    """Send every (source address, form) at once; the answers in the same order."""
    sent = list(requests)
    answers: list[httpx.Response | None] = [None] * len(sent)

    async def send_all() -> None:
        async def send(n: int, source: str, form: dict[str, str]) -> None:
            answers[n] = await post_form(url, path, source, form)

        async with trio.open_nursery() as nursery:
            for n, (source, form) in enumerate(sent):
                nursery.start_soon(send, n, source, form)

    trio.run(send_all)
    assert all(answer is not None for answer in answers)
    return [answer for answer in answers if answer is not None]


def login(email: str, password: str) -> dict[str, str]:
    return {"email": email, "password": password}


def statuses(answers: list[httpx.Response]) -> Counter[int]:
    return Counter(answer.status_code for answer in answers)


def memory_kib(pid: int, field: str) -> int:
    """A field of /proc/PID/status in KiB: VmRSS (resident now), VmHWM (the peak)."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB$", status, re.M)
    assert match, status
    return int(match.group(1))


def unlock(server: DashboardServer, email: str) -> None:
    command = [sys.executable, "-m", "postwire", "users", "unlock", email]
    result = subprocess.run(
        [*command, "--config", str(server.config_path)],
        capture_output=True,
        text=True,
        env=_clean_env(),
    )
    assert result.returncode == 0, result.stderr
    assert f"sign-in throttles of {email} lifted" in result.stderr


def test_a_burst_of_guesses_gets_no_more_checks_than_the_allowance(
    shared_server: DashboardServer,
) -> None:
    server, owner = shared_server, "guessed@example.org"
    server.create_user(owner, PASSWORD, team="Acme")
    url = listening_url(server)
    guesses = [login(owner, f"wrong guess {n}") for n in range(119)]
    guesses.insert(60, login(owner, PASSWORD))
    answers = burst(url, "/login", (("127.0.0.1", form) for form in guesses))
    counted = statuses(answers)
    checked = counted[401] + counted[303]
    # All 120 were checked before (118 wrong, and the right one accepted): now the minute's
    # five, and no more than the quarter hour's ten whatever the clock does meanwhile.
    assert set(counted) <= {401, 303, 429}, counted
    assert 1 <= checked <= MAX_LOGIN_FAILURES, counted
    refused = [answer for answer in answers if answer.status_code == 429]
    assert all(1 <= int(answer.headers["Retry-After"]) <= 900 for answer in refused)
    assert all("Too many failed attempts. Try again in" in answer.text for answer in refused)

    # The owner, from another address, is not held up by any of it.
    (signed_in,) = burst(url, "/login", [("127.0.0.2", login(owner, PASSWORD))])
    assert signed_in.status_code == 303, signed_in.text

    # A guesser's address throttled; the operator lifts it from the shell.
    for _ in range(3 * MAX_LOGIN_FAILURES):
        (answer,) = burst(url, "/login", [("127.0.0.5", login(owner, "a wrong guess"))])
        if answer.status_code == 429:
            break
        assert answer.status_code == 401
    assert answer.status_code == 429
    unlock(server, owner)
    (answer,) = burst(url, "/login", [("127.0.0.5", login(owner, PASSWORD))])
    assert answer.status_code == 303, answer.text


def test_a_burst_of_signups_opens_no_more_accounts_than_the_limit(
    shared_server: DashboardServer,
) -> None:
    url = listening_url(shared_server)
    forms = [
        {"name": f"Spammer {n}", "email": f"spam{n}@example.org", "password": PASSWORD, "team": ""}
        for n in range(20)
    ]
    hour_before = int(time.time()) // 3600
    answers = burst(url, "/signup", (("127.0.0.7", form) for form in forms))
    straddled = int(time.time()) // 3600 != hour_before  # two hours' allowances, then
    counted = statuses(answers)
    assert set(counted) <= {303, 429}, counted
    assert 1 <= counted[303] <= MAX_SIGNUPS * (2 if straddled else 1), counted
    # Another address still signs up.
    other = {"name": "Grace", "email": "grace@example.org", "password": PASSWORD, "team": ""}
    assert burst(url, "/signup", [("127.0.0.8", other)])[0].status_code == 303


def test_parallel_checks_keep_the_servers_memory_bounded(start_dashboard: StartDashboard) -> None:
    # A server of its own: its first process's peak memory (VmHWM) is this burst's alone.
    server = start_dashboard(processes=2)
    server.create_user(OWNER, PASSWORD, team="Acme")
    assert server.process is not None
    pid = server.process.pid  # the first process: it serves the dashboard
    before = memory_kib(pid, "VmRSS")
    # Forty clients, each its own address: no throttle stops them before the check.
    sources = [f"127.0.1.{n}" for n in range(1, 41)]
    answers = burst(
        url := listening_url(server), "/login", ((s, login(OWNER, "wrong")) for s in sources)
    )
    peak = memory_kib(pid, "VmHWM")
    counted = statuses(answers)
    # Each answered: checked (401), or refused while too many checks waited (503, retry soon).
    assert set(counted) <= {401, 503} and counted[401] >= 2, counted
    assert all(a.headers.get("Retry-After") for a in answers if a.status_code == 503)
    assert (peak - before) * 1024 < RSS_GROWTH_BOUND, (before, peak)
    assert burst(url, "/login", [("127.0.0.1", login(OWNER, PASSWORD))])[0].status_code == 303


def test_a_stranger_guessing_never_locks_the_owner_out(
    shared_server: DashboardServer, page: Page
) -> None:
    server = shared_server
    server.create_user(OWNER, PASSWORD, team="Acme")  # `sign_in_with_code` signs in as OWNER
    log_in(page, server, OWNER, PASSWORD)
    secret, _ = enrol_totp(page, server)
    log_out(page)

    # Ten wrong passwords once locked the account for 15 minutes; here 90 from three addresses.
    url = listening_url(server)
    strangers = [
        (f"127.0.0.{n}", login(OWNER, f"guess {m}")) for n in (21, 22, 23) for m in range(30)
    ]
    answers = burst(url, "/login", strangers)
    for source in ("127.0.0.21", "127.0.0.22", "127.0.0.23"):
        theirs = statuses([a for (s, _), a in zip(strangers, answers, strict=True) if s == source])
        assert theirs[429] >= 30 - MAX_LOGIN_FAILURES and theirs[401] >= 1, (source, theirs)

    # The owner signs in as ever: the password, then the code.
    sign_in_with_code(page, server, pyotp.TOTP(secret).at(time.time() + 30))
    assert path_of(page) == "/emails", page.url
