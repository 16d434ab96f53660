"""One run of the Emails page benchmark: the server, the owner and the million emails seeded
through the store, the login, and wrk rounds against the first page and a filtered page.
`__main__.py` says what is measured and renders the report."""

from __future__ import annotations

import argparse
import datetime
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio
from tests.live_postwire import DASHBOARD_READY
from tests.ports import free_port

from benchmarks.api import load, profile
from benchmarks.api.__main__ import Figure
from benchmarks.api.load import Sample, Workload
from benchmarks.api.profile import Profiled
from benchmarks.api.server import BenchServer
from benchmarks.report import progress
from postwire.config import Config, load_config
from postwire.domains import store as domain_store
from postwire.store import accounts
from postwire.store.email_samples import SampleSender, sample_emails, seed_emails
from postwire.store.emails import index_earlier_emails
from postwire.store.spool import serve_spool

OWNER = "owner@bench-example.test"
PASSWORD = "a long benchmark password 15"
TEAM = "Bench"
DOMAINS = ("bench-example.test", "news.bench-example.test")
KEYS_A_DOMAIN = 2
# The seeded emails are spread over this many days, the newest a minute ago.
SPAN_DAYS = 90
# Spool bytes an email record and its index entries may take.
SPOOL_BYTES_AN_EMAIL = 4 * 1024
MIN_MAP_SIZE = 8 * 1024**3
UNUSED_NAMESERVER = "127.0.0.1:9"
SESSION_COOKIE = "pw_session"
CSRF_COOKIE = "pw_csrf"
CSRF_FIELD = re.compile(r'name="csrf_token"\s+value="([^"]+)"')
# A row of the Emails table links to the email's page.
EMAIL_LINK = re.compile(r'href="/emails/[0-9a-f-]{36}"')
PAGE_ROWS_AT_LEAST = 10


@dataclass
class Measured:
    emails: int
    seed_seconds: float
    spool_bytes: int
    domain_id: str
    figures: list[Figure]
    connections: int
    profiles: list[Profiled] = field(default_factory=list)

    @property
    def seeded_per_s(self) -> float:
        return self.emails / self.seed_seconds


class DashboardBenchServer(BenchServer):
    """The API benchmark's server with its dashboard on a free loopback port (opened as
    localhost, like a browser would) and a spool map large enough for `emails`."""

    def __init__(self, directory: Path, *, emails: int, **config: Any) -> None:
        port = free_port()
        # The dashboard on a port known before it starts, not any free one.
        super().__init__(
            directory,
            UNUSED_NAMESERVER,
            dashboard_listen=f"127.0.0.1:{port}",
            dashboard_public_url=f"http://localhost:{port}",
            spool_map_size=max(MIN_MAP_SIZE, emails * SPOOL_BYTES_AN_EMAIL),
            **config,
        )
        self.dashboard_url = f"http://localhost:{port}"

    def create_owner(self) -> None:
        """`postwire users create`, the owner's password on standard input."""
        self.create_user(OWNER, PASSWORD, team=TEAM)


async def seed(config: Config, emails: int) -> str:
    """The team's domains and keys, then `emails` email records with their index entries,
    written through the store as the API writes them; the first domain's id."""
    now = datetime.datetime.now(datetime.UTC)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        # As a server's first start does on a new store: no email yet to index, and the mark
        # that says so, which spares the server indexing the seeded emails over again.
        await index_earlier_emails(spool)
        (team,) = accounts.list_teams(spool)
        senders = []
        for name in DOMAINS:
            domain = await domain_store.create_domain(spool, config, team.id, name)
            key_ids = []
            for n in range(KEYS_A_DOMAIN):
                key, _ = await accounts.create_api_key(
                    spool, team.id, f"{name} {n}", "sending_access", domain.id, now
                )
                key_ids.append(key.id)
            senders.append(SampleSender(domain.id, domain.name, key_ids))
        end_ms = int(time.time() * 1000) - 60_000
        start_ms = end_ms - SPAN_DAYS * 86_400_000
        records = sample_emails(team.id, senders, emails, start_ms=start_ms, end_ms=end_ms)
        await seed_emails(spool, records)
        nursery.cancel_scope.cancel()
    return senders[0].domain_id


def log_in(client: httpx.Client) -> str:
    """The session cookie of the owner, logged in through the login form as a browser would
    (its cookies are Secure, which httpx keeps off plain http: they are carried by hand)."""
    form = client.get("/login")
    form.raise_for_status()
    token = CSRF_FIELD.search(form.text)
    anonymous = form.cookies.get(CSRF_COOKIE)
    if token is None or anonymous is None:
        raise RuntimeError(f"the login page has no CSRF token:\n{form.text[:2000]}")
    answer = client.post(
        "/login",
        data={"email": OWNER, "password": PASSWORD, "csrf_token": token.group(1)},
        headers={"Cookie": f"{CSRF_COOKIE}={anonymous}"},
    )
    session = answer.cookies.get(SESSION_COOKIE)
    if answer.status_code not in (302, 303) or session is None:
        raise RuntimeError(f"login refused: {answer.status_code} {answer.text[:2000]}")
    return f"{SESSION_COOKIE}={session}"


def check_page(client: httpx.Client, path: str, cookie: str) -> None:
    """The page answers 200 with a table of emails: a redirect to the login page, an error
    or an empty table would make a fast figure of nothing."""
    answer = client.get(path, headers={"Cookie": cookie})
    rows = len(EMAIL_LINK.findall(answer.text))
    if answer.status_code != 200 or rows < PAGE_ROWS_AT_LEAST:
        raise RuntimeError(f"GET {path}: {answer.status_code}, {rows} email rows")


def run_benchmark(args: argparse.Namespace, work: Path, profile_base: Path | None) -> Measured:
    server = DashboardBenchServer(work, emails=args.emails)
    try:
        progress("creating the owner (postwire users create) ...")
        server.create_owner()
        config = load_config(server.config_path)
        progress(f"seeding {args.emails:,} emails through the store ...")
        started = time.monotonic()
        domain_id = trio.run(seed, config, args.emails)
        seed_seconds = time.monotonic() - started
        spool_bytes = sum(f.stat().st_blocks * 512 for f in (server.data_dir / "spool").iterdir())
        progress(f"seeded in {seed_seconds:.0f} s; starting postwire serve ...")
        server.start()
        server.wait_for_log(DASHBOARD_READY)
        filtered = f"/emails?status=delivered&domain={domain_id}"
        figures = [
            Figure(Workload("first page", "GET", "/emails", None, 0), args.connections),
            Figure(Workload("delivered, one domain", "GET", filtered, None, 0), args.connections),
        ]
        with httpx.Client(base_url=server.dashboard_url, timeout=30) as client:
            cookie = log_in(client)
            for figure in figures:
                check_page(client, figure.workload.path, cookie)

            def run(figure: Figure, seconds: int) -> Sample:
                return load.run_wrk(
                    server.dashboard_url,
                    figure.workload,
                    seconds=seconds,
                    connections=figure.connections,
                    token="",
                    server_pid=server.pid,
                    cookie=cookie,
                )

            for figure in figures:
                progress(f"warm-up: {figure.workload.name} ...")
                run(figure, args.warmup)
            for round_number in range(args.rounds):
                for figure in figures:
                    sample = run(figure, args.seconds)
                    figure.samples.append(sample)
                    progress(
                        f"round {round_number + 1}/{args.rounds}: {figure.workload.name}: "
                        f"{sample.requests_per_s:,.0f}/s, p50 {sample.p50_ms:.1f} ms, "
                        f"p99 {sample.p99_ms:.1f} ms, errors {sample.errors}"
                    )
            profiles = (
                []
                if profile_base is None
                else profile_pages(server, figures, run, args, profile_base)
            )
            for figure in figures:  # the session lasted the whole run
                check_page(client, figure.workload.path, cookie)
        return Measured(
            emails=args.emails,
            seed_seconds=seed_seconds,
            spool_bytes=spool_bytes,
            domain_id=domain_id,
            figures=figures,
            connections=args.connections,
            profiles=profiles,
        )
    except BaseException:
        progress("server log (tail):\n" + server.log())
        raise
    finally:
        server.stop()


def profile_pages(
    server: DashboardBenchServer,
    figures: list[Figure],
    run: Callable[[Figure, int], Sample],
    args: argparse.Namespace,
    profile_base: Path,
) -> list[Profiled]:
    """Each page under py-spy for `args.seconds` (flamegraph, then collapsed stacks), the load
    outlasting the sampling window so that every sample falls under load."""
    profiles = []
    load_seconds = args.seconds + int(profile.ATTACH_SECONDS) + 2
    for figure, slug in zip(figures, ("first-page", "filtered-page"), strict=True):
        svg = profile_base.with_name(f"{profile_base.name}-{slug}.svg")
        raw = svg.with_suffix(".txt")
        for fmt, path in (("flamegraph", svg), ("raw", raw)):
            progress(f"profiling {figure.workload.name} with py-spy -> {path} ...")
            profile.record(server.pid, args.seconds, path, fmt, partial(run, figure, load_seconds))
        hot = profile.hot_spots(raw.read_text())
        profiles.append(
            Profiled(f"{figure.workload.name} (`{figure.workload.path}`)", svg.name, raw.name, hot)
        )
    return profiles
