"""The reading half of the store backends benchmark: the Emails list and contact search over
many emails and contacts, a server on each table store in turn.

Each server is the dashboard benchmark's (no SMTP, the dashboard on a known port), its tables
in LMDB or PostgreSQL. With it stopped: its owner (`postwire users create`), then `emails`
email records through the store (the dashboard benchmark's `seed`: `store/email_samples.py`,
commits of 5,000), then `contacts` contacts (the broadcast benchmark's seeding process:
`put_contact`, commits of 2,000). Then it starts, the owner logs in through the form, and wrk
loads each page in turn, every page checked first to answer 200 with what it should show.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import trio
from tests.live_postwire import DASHBOARD_READY

from benchmarks.api import load
from benchmarks.api.load import Sample, Workload
from benchmarks.broadcasts import run as broadcasts
from benchmarks.broadcasts.content import contact_email
from benchmarks.dashboard.run import DashboardBenchServer, log_in, seed
from benchmarks.report import progress
from postwire.config import load_config

CONNECTIONS = 4


@dataclass
class Page:
    """One page (or API call) loaded by wrk; `cookie` says it is the dashboard's."""

    name: str
    path: str
    dashboard: bool
    must_contain: str  # a 200 without it is not the page asked for
    samples: list[Sample] = field(default_factory=list)

    def median(self, value: str) -> float:
        return statistics.median(float(getattr(s, value)) for s in self.samples)


@dataclass
class Listed:
    store: str
    emails: int
    contacts: int
    seed_seconds: float
    pages: list[Page]


def pages(domain_id: str, contacts: int) -> list[Page]:
    """The pages loaded: the search is of the start of an address that a thousand contacts
    share (their addresses are numbered, `c0001234@...`)."""
    searched = contact_email(contacts // 3)[:5]
    return [
        Page("API: GET /emails (first page)", "/emails?limit=50", False, '"object":"list"'),
        Page("dashboard: Emails, first page", "/emails", True, 'href="/emails/'),
        Page(
            "dashboard: Emails, delivered from one domain",
            f"/emails?status=delivered&domain={domain_id}",
            True,
            'href="/emails/',
        ),
        Page(
            f"dashboard: Contacts, search {searched!r}",
            f"/contacts?q={searched}",
            True,
            searched,
        ),
        Page(
            "API: GET /contacts/{address}",
            f"/contacts/{contact_email(contacts // 2)}",
            False,
            '"object":"contact"',
        ),
    ]


def check(client: httpx.Client, page: Page, headers: dict[str, str]) -> None:
    answer = client.get(page.path, headers=headers)
    if answer.status_code != 200 or page.must_contain not in answer.text:
        raise SystemExit(f"GET {page.path}: {answer.status_code} {answer.text[:1000]}")


def run_lists(args: argparse.Namespace, work: Path, store_name: str, store: str) -> Listed:
    """Seed and load the pages of one server whose tables are in `store` (a `[store]` table)."""
    directory = work / f"lists-{store_name.lower()}"
    directory.mkdir()
    server = DashboardBenchServer(directory, emails=args.emails, store=store)
    try:
        progress(f"{store_name}: creating the owner (postwire users create) ...")
        server.create_owner()
        config = load_config(server.config_path)
        progress(f"{store_name}: seeding {args.emails:,} emails through the store ...")
        started = time.monotonic()
        domain_id = trio.run(seed, config, args.emails)
        token = server.create_key("bench")
        progress(f"{store_name}: seeding {args.contacts:,} contacts through the store ...")
        broadcasts.seed(server, token, argparse.Namespace(contacts=args.contacts, profile=False))
        seed_seconds = time.monotonic() - started
        progress(f"{store_name}: seeded in {seed_seconds:.0f} s; starting postwire serve ...")
        server.start()
        server.wait_for_log(DASHBOARD_READY)
        listed = pages(domain_id, args.contacts)
        with (
            httpx.Client(base_url=server.dashboard_url, timeout=30) as dashboard,
            httpx.Client(base_url=server.base_url, timeout=30) as api,
        ):
            cookie = log_in(dashboard)
            for page in listed:
                if page.dashboard:
                    check(dashboard, page, {"Cookie": cookie})
                else:
                    check(api, page, {"Authorization": f"Bearer {token}"})

            def run(page: Page, seconds: int) -> Sample:
                return load.run_wrk(
                    server.dashboard_url if page.dashboard else server.base_url,
                    Workload(page.name, "GET", page.path, None, 0),
                    seconds=seconds,
                    connections=CONNECTIONS,
                    token="" if page.dashboard else token,
                    server_pid=server.pid,
                    cookie=cookie if page.dashboard else "",
                )

            for page in listed:
                progress(f"{store_name}: warm-up: {page.name} ...")
                run(page, args.warmup_seconds)
            for number in range(args.rounds):
                for page in listed:
                    sample = run(page, args.seconds)
                    page.samples.append(sample)
                    progress(
                        f"{store_name}, round {number + 1}/{args.rounds}: {page.name}: "
                        f"p50 {sample.p50_ms:.1f} ms, p99 {sample.p99_ms:.1f} ms, "
                        f"errors {sample.errors}"
                    )
        return Listed(store_name, args.emails, args.contacts, seed_seconds, listed)
    except BaseException:
        progress(f"server log ({store_name}, tail):\n" + server.log())
        raise
    finally:
        server.stop()
