"""`make bench-webhooks`: signed webhook events/s delivered to a local receiver, against the
rate at which mail makes them, side by side in one run.

A message makes about three events (sent, delivered, often one more), so the dispatcher must
deliver at least 3x the end-to-end message rate. Two measurements, alternating within rounds:

1. End to end with webhooks in the budget. A live `postwire serve` (the delivery benchmark's
   server: its sending domain verified for real against a Knot DNS server on loopback, mail for
   example.org routed to Postfix's `smtp-sink`; here with `webhooks.allow_private_targets`, the
   receiver being on loopback) has one webhook endpoint, created with `POST /webhooks` and
   subscribed to every kind, pointing at nginx on loopback (see `receiver.py`). A round is the
   delivery benchmark's 4 KiB round: N emails through `POST /emails/batch`, delivered to
   smtp-sink; every email makes `email.sent` and `email.delivered`, so the receiver must count
   2N POSTs. Delivered/s is N over the time from the first accept to the Nth message at the
   sink; events/s is 2N over the time from the first accept to the 2Nth POST at the receiver.
   The same round runs with the endpoint disabled (`PATCH /webhooks/{id}`: events still enter
   the outbox, nobody is subscribed); the two alternate in order from round to round.
2. Dispatcher capacity. The server is stopped, K events (sent and delivered, about the emails
   of part 1) are committed into its outbox through `postwire.store.deliveries.add_event` on
   its own spool, and the server is started again: events/s is K - 1 over the time from the
   first POST at the receiver to the Kth. This is compared with the message rates of part 1,
   measured in the same rounds, against the 3x target.

Checked, untimed, after every round: the API reports every email "delivered"; every POST got
204 from nginx and carries its own `svix-id`; the POSTs of a round are exactly one `email.sent`
and one `email.delivered` per email of the round (part 1) or the K events (part 2); the `svix`
package verifies the signature of a random sample of them (all of the first check's). Before
anything is timed, one email goes end to end with both of its events verified, and nginx's
capacity is measured with wrk (as many connections as the dispatcher has POSTs in flight to
one endpoint) to show it is far from the bottleneck. Medians of the rounds are reported; every
wait is bounded.

Progress goes to stderr, the Markdown report to stdout and to `--output`. With `--profile`, an
extra dispatcher-capacity round runs under py-spy (`--gil`) and the report names its hot spots.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
from svix.webhooks import Webhook
from tests.dns_server import AuthoritativeDnsServer

from benchmarks.api import profile
from benchmarks.api.load import Workload, run_wrk, wrk_path, wrk_version
from benchmarks.api.profile import Profiled, profile_section
from benchmarks.api.server import verify_domain
from benchmarks.cpu_time import machine_busy, process_cpu
from benchmarks.delivery.rounds import (
    CHECK_TIMEOUT,
    CONFIRM_TIMEOUT,
    DOMAIN,
    MAX_CONNECTIONS,
    DeliveryBenchServer,
    Sample,
    Size,
    check_end_to_end,
    confirm_delivered,
    ok,
    run_round,
)
from benchmarks.delivery.sink import SmtpSink, sink_path
from benchmarks.report import (
    LoadAverages,
    add_report_options,
    check_options,
    machine_description,
    measure_and_render,
    progress,
    report_to_file,
    server_source,
)
from benchmarks.webhooks.outbox import fill_outbox
from benchmarks.webhooks.receiver import NginxReceiver, ReceivedPost, nginx_path, nginx_version
from postwire.webhooks.dispatcher import PER_ENDPOINT
from postwire.webhooks.store import EVENT_KINDS

BODY_BYTES = 4 * 1024
EVENTS_PER_EMAIL = 2  # email.sent and email.delivered
TARGET = 3.0  # events a message makes, about: the dispatcher must deliver this many per message
WITH, WITHOUT = "with webhook", "without webhook"
RECEIVER_CONNECTIONS = PER_ENDPOINT  # the dispatcher's POSTs in flight to one endpoint
RECEIVER_SECONDS = 3
# Between rounds, before the endpoint is enabled or disabled: the dispatcher looks at the outbox
# every 0.2 s when idle, so by then it has fanned out the last round's events under the state
# they were made in (a check after each round would see any it did not).
SETTLE_SECONDS = 2.0
# Where the event loop's time goes in the dispatcher, in the terms of its code: modules and
# packages as py-spy names their frames.
PROFILE_PARTS = {
    "outbox fan-out (`WebhookDispatcher.fan_out`)": ("WebhookDispatcher.fan_out (",),
    "starting due messages (`WebhookDispatcher.start_due`)": ("WebhookDispatcher.start_due (",),
    "the POST (`WebhookDispatcher._post`)": ("WebhookDispatcher._post (",),
    "recording the attempt (`WebhookDispatcher._record`)": ("WebhookDispatcher._record (",),
    "httpx and httpcore (the HTTP client)": ("(httpx/", "(httpcore/"),
    "opening a TCP connection (httpcore `_connect`)": ("AsyncHTTPConnection._connect (",),
    "resolving and vetting the target (`vetted_addresses`)": ("vetted_addresses (",),
    "signing (`signed_headers`)": ("signed_headers (",),
    "building payloads (`webhook_payload`)": ("webhook_payload (",),
    "spool reads and records (`postwire/store/`)": ("(postwire/store/",),
    "logging": ("(logging/",),
}


@dataclass(frozen=True)
class EndToEnd:
    """One end-to-end round: the delivery benchmark's sample, and what the webhooks added."""

    emails: int
    delivery: Sample
    events_seconds: float | None  # first accept to the last POST at the receiver (with webhook)
    lag_seconds: float | None  # last delivery to the last POST
    server_cpu_ms_per_email: float  # the server's CPU from the first call to the round's end
    receiver_cpu: float  # nginx, cores busy on average over the same time
    connections: int  # distinct connections the round's POSTs came over (0: none)

    @property
    def events_per_s(self) -> float | None:
        if self.events_seconds is None:
            return None
        return EVENTS_PER_EMAIL * self.emails / self.events_seconds


@dataclass(frozen=True)
class Capacity:
    """One dispatcher-capacity round."""

    events: int  # pre-filled, all received
    seconds: float  # the first POST at the receiver to the last
    start_seconds: float  # the server's start to the first POST
    server_cpu: float  # cores busy on average from the first POST to the last
    server_cpu_ms_per_event: float
    receiver_cpu: float
    other_cpu: float  # everything else on the machine, this process included
    connections: int  # distinct connections the POSTs came over

    @property
    def events_per_s(self) -> float:
        # Between the first POST's arrival and the last's, the K - 1 others arrived.
        return (self.events - 1) / self.seconds


@dataclass
class Results:
    emails: int
    events: int
    end_to_end: dict[str, list[EndToEnd]] = field(default_factory=lambda: {WITH: [], WITHOUT: []})
    capacity: list[Capacity] = field(default_factory=list)
    receiver_posts_per_s: float = 0.0
    receiver_cpu: float = 0.0
    receiver_p99_ms: float = 0.0
    verified: int = 0  # signatures verified with svix
    checked: int = 0  # POSTs whose reply, svix-id and payload were checked
    profiles: list[Profiled] = field(default_factory=list)

    def median(self, mode: str, value: Callable[[EndToEnd], float | None]) -> float:
        return statistics.median(float(value(s) or 0.0) for s in self.end_to_end[mode])


class WebhookBenchServer(DeliveryBenchServer):
    """The delivery benchmark's server, allowed to POST webhooks to loopback."""

    def __init__(self, directory: Path, nameserver: str, sink_port: int) -> None:
        super().__init__(directory, nameserver, sink_port, allow_private_webhooks=True)


@dataclass
class Endpoint:
    """The webhook endpoint the benchmark created, and who checks what it receives."""

    id: str
    secret: str
    receiver: NginxReceiver
    rng: random.Random = field(default_factory=lambda: random.Random(2026))

    def check(
        self, first: int, end: int, expected: collections.Counter[tuple[str, str]], sample: int
    ) -> list[ReceivedPost]:
        """POSTs `first` to `end` - 1 must each have got 204, have their own svix-id and be,
        all together, exactly the `expected` (email id, event type) pairs; the signatures of
        `sample` of them, at random, must verify."""
        posts = self.receiver.received(first, end)
        if len(posts) != end - first:
            raise SystemExit(f"read {len(posts)} POSTs from nginx's log, {end - first} expected")
        statuses = collections.Counter(post.status for post in posts)
        if set(statuses) != {204}:
            raise SystemExit(f"nginx did not answer every POST with 204: {dict(statuses)}")
        ids = {post.headers["svix-id"] for post in posts}
        if len(ids) != len(posts):
            raise SystemExit(f"{len(posts) - len(ids)} POSTs repeated an svix-id")
        got: collections.Counter[tuple[str, str]] = collections.Counter()
        for post in posts:
            payload = post.payload()
            got[payload["data"]["email_id"], payload["type"]] += 1
        if got != expected:
            missing, extra = expected - got, got - expected
            raise SystemExit(
                f"the POSTs are not the events expected: {sum(missing.values())} missing "
                f"(e.g. {list(missing)[:3]}), {sum(extra.values())} unexpected "
                f"(e.g. {list(extra)[:3]})"
            )
        verifier = Webhook(self.secret)
        for post in self.rng.sample(posts, min(sample, len(posts))):
            verifier.verify(post.body, post.headers)  # raises WebhookVerificationError
        return posts


def set_endpoint(client: httpx.Client, endpoint: Endpoint, status: str) -> None:
    ok(client.patch(f"/webhooks/{endpoint.id}", json={"status": status}))


def end_to_end_round(
    args: argparse.Namespace,
    server: WebhookBenchServer,
    client: httpx.Client,
    token: str,
    sink: SmtpSink,
    endpoint: Endpoint,
    mode: str,
    label: str,
) -> tuple[EndToEnd, list[ReceivedPost]]:
    size = Size("4 KiB", BODY_BYTES, args.emails)
    receiver = endpoint.receiver
    sink_base, posts_base = sink.messages, receiver.posts
    server_cpu0, receiver_cpu0 = process_cpu(server.pid), receiver.cpu_seconds()
    started = time.monotonic()
    delivery, ids = run_round(
        size,
        server.base_url,
        token,
        sink,
        server.pid,
        post_threads=args.post_threads,
        deliver_timeout=args.deliver_timeout,
        label=label,
    )
    delivered = sink.time_reached(sink_base + size.messages)
    assert delivered is not None
    first_accept = delivered - delivery.deliver_seconds
    events_seconds = lag_seconds = None
    end = delivered
    if mode == WITH:
        wanted = posts_base + EVENTS_PER_EMAIL * size.messages
        end = receiver.wait_for_all(
            wanted, timeout=args.events_timeout, label=label, base=posts_base, since=first_accept
        )
        events_seconds, lag_seconds = end - first_accept, end - delivered
    wall = max(end, time.monotonic()) - started
    server_seconds = process_cpu(server.pid) - server_cpu0
    receiver_cpu = (receiver.cpu_seconds() - receiver_cpu0) / wall
    confirm_delivered(client, ids, CONFIRM_TIMEOUT)
    posts: list[ReceivedPost] = []
    if mode == WITH:
        expected = collections.Counter(
            (i, kind) for i in ids for kind in ("email.sent", "email.delivered")
        )
        posts = endpoint.check(posts_base, receiver.posts, expected, args.verify_sample)
    elif receiver.posts != posts_base:
        raise SystemExit(f"{label}: {receiver.posts - posts_base} POSTs to a disabled endpoint")
    sample = EndToEnd(
        emails=size.messages,
        delivery=delivery,
        events_seconds=events_seconds,
        lag_seconds=lag_seconds,
        server_cpu_ms_per_email=1000 * server_seconds / size.messages,
        receiver_cpu=receiver_cpu,
        connections=len({post.connection for post in posts}),
    )
    return sample, posts


def capacity_round(
    args: argparse.Namespace,
    server: WebhookBenchServer,
    endpoint: Endpoint,
    emails: list[tuple[str, str]],
    label: str,
    *,
    while_draining: Callable[[Callable[[], object]], None] | None = None,
) -> Capacity:
    """Stop the server, fill its outbox with K events, start it, time the receiver's count."""
    receiver = endpoint.receiver
    server.stop()
    kinds = ("email.sent", "email.delivered")
    fill_outbox(server.config_path, emails, args.events, kinds)
    posts_base = receiver.posts
    wanted = posts_base + args.events
    started = time.monotonic()
    server.start()
    pid = server.pid
    first = receiver.wait_for_all(
        posts_base + 1, timeout=args.events_timeout, label=label, base=posts_base, since=started
    )
    cpu0 = (process_cpu(pid), receiver.cpu_seconds(), machine_busy(), time.monotonic())
    progress(f"{label}: first POST {first - started:.2f} s after the server's start")

    def drain() -> float:
        return receiver.wait_for_all(
            wanted, timeout=args.events_timeout, label=label, base=posts_base, since=started
        )

    if while_draining is None:
        last = drain()
    else:
        while_draining(drain)
        reached = receiver.time_reached(wanted)
        assert reached is not None
        last = reached
    wall = time.monotonic() - cpu0[3]
    server_seconds = process_cpu(pid) - cpu0[0]
    receiver_cpu = (receiver.cpu_seconds() - cpu0[1]) / wall
    machine = (machine_busy() - cpu0[2]) / wall
    expected: collections.Counter[tuple[str, str]] = collections.Counter()
    for n in range(args.events):
        expected[emails[n % len(emails)][0], kinds[n % len(kinds)]] += 1
    posts = endpoint.check(posts_base, receiver.posts, expected, args.verify_sample)
    return Capacity(
        events=args.events,
        seconds=last - first,
        start_seconds=first - started,
        server_cpu=server_seconds / wall,
        server_cpu_ms_per_event=1000 * server_seconds / (args.events - 1),
        receiver_cpu=receiver_cpu,
        other_cpu=max(0.0, machine - server_seconds / wall - receiver_cpu),
        connections=len({post.connection for post in posts}),
    )


def measure_receiver(receiver: NginxReceiver, work: Path, results: Results) -> None:
    """nginx's own capacity with this configuration: wrk POSTing a webhook-sized body."""
    body = work / "receiver-body.json"
    payload = {
        "type": "email.delivered",
        "created_at": "2026-11-23T10:00:00.000Z",
        "data": {
            "email_id": "0" * 36,
            "created_at": "2026-11-23T10:00:00.000Z",
            "from": f"Acme <news@{DOMAIN}>",
            "to": ["u1@example.org"],
            "subject": "Delivery benchmark message 1",
            "message_id": "<" + "0" * 36 + f"@{DOMAIN}>",
            "tags": {},
        },
    }
    body.write_text(json.dumps(payload))
    workload = Workload("webhook POST", "POST", "/hook", body, 0)
    base = receiver.url.removesuffix("/hook")
    sample = run_wrk(
        base,
        workload,
        seconds=RECEIVER_SECONDS,
        connections=RECEIVER_CONNECTIONS,
        token="",
        server_pid=receiver.worker_pid(),
    )
    if sample.errors:
        raise SystemExit(f"nginx answered {sample.errors} of wrk's POSTs with errors")
    results.receiver_posts_per_s = sample.requests_per_s
    results.receiver_cpu = sample.server_cpu
    results.receiver_p99_ms = sample.p99_ms


def run_benchmark(args: argparse.Namespace, work: Path, profile_base: Path | None) -> Results:
    results = Results(emails=args.emails, events=args.events)
    dns = AuthoritativeDnsServer()
    sink = SmtpSink()
    receiver = NginxReceiver(work)
    server: WebhookBenchServer | None = None
    dns.start()
    try:
        sink.start()
        receiver.start()
        progress(f"smtp-sink on 127.0.0.1:{sink.port}, nginx on {receiver.url}")
        progress(f"nginx alone: wrk, {RECEIVER_CONNECTIONS} connections ...")
        measure_receiver(receiver, work, results)
        progress(f"nginx alone: {results.receiver_posts_per_s:,.0f} POSTs/s")
        server = WebhookBenchServer(work, dns.nameserver, sink.port)
        progress("starting postwire serve ...")
        server.start()
        token = server.create_key("bench")
        headers = {"Authorization": f"Bearer {token}"}

        def api() -> httpx.Client:
            assert server is not None
            return httpx.Client(base_url=server.base_url, headers=headers, timeout=60)

        with api() as client:
            progress(f"verifying {DOMAIN} against Knot DNS at {dns.nameserver} ...")
            verify_domain(client, dns, DOMAIN)
            created = ok(
                client.post("/webhooks", json={"endpoint": receiver.url, "events": EVENT_KINDS})
            )
            endpoint = Endpoint(created["id"], created["signing_secret"], receiver)
            progress("checking that one email goes end to end, with both of its events ...")
            base = receiver.posts
            check_end_to_end(client, sink)
            receiver.wait_for_all(
                base + 2, timeout=CHECK_TIMEOUT, label="check", base=base, since=time.monotonic()
            )
            posts = receiver.received(base, receiver.posts)
            kinds = sorted(post.payload()["type"] for post in posts)
            if kinds != ["email.delivered", "email.sent"]:
                raise SystemExit(f"the check email's events: {kinds}")
            email_id = posts[0].payload()["data"]["email_id"]
            expected = collections.Counter((email_id, kind) for kind in kinds)
            endpoint.check(base, receiver.posts, expected, 2)
            results.checked += 2
            results.verified += 2

        emails: list[tuple[str, str]] = []
        for round_number in range(args.rounds):
            modes = [WITH, WITHOUT] if round_number % 2 == 0 else [WITHOUT, WITH]
            label = f"round {round_number + 1}/{args.rounds}"
            with api() as client:
                for mode in modes:
                    # The last round's events are fanned out under the state they were made in.
                    time.sleep(SETTLE_SECONDS)
                    set_endpoint(client, endpoint, "enabled" if mode == WITH else "disabled")
                    sample, posts = end_to_end_round(
                        args, server, client, token, sink, endpoint, mode, f"{label} {mode}"
                    )
                    results.end_to_end[mode].append(sample)
                    if posts:
                        results.checked += len(posts)
                        results.verified += min(args.verify_sample, len(posts))
                        emails = [
                            (p["data"]["email_id"], p["data"]["to"][0])
                            for p in (post.payload() for post in posts)
                            if p["type"] == "email.delivered"
                        ]
                    events = (
                        f", {sample.events_per_s:,.0f} events/s (last {sample.lag_seconds:.2f} s "
                        "after the last delivery)"
                        if sample.events_per_s is not None and sample.lag_seconds is not None
                        else ""
                    )
                    progress(
                        f"{label} {mode}: {sample.delivery.delivered_per_s:,.0f} delivered/s"
                        f"{events}; server CPU {sample.server_cpu_ms_per_email:.2f} ms an email; "
                        "all delivered"
                    )
                time.sleep(SETTLE_SECONDS)
                set_endpoint(client, endpoint, "enabled")
            capacity = capacity_round(args, server, endpoint, emails, f"{label} capacity")
            results.capacity.append(capacity)
            results.checked += capacity.events
            results.verified += min(args.verify_sample, capacity.events)
            progress(
                f"{label} capacity: {capacity.events_per_s:,.0f} events/s "
                f"({capacity.seconds:.2f} s); server CPU {capacity.server_cpu:.2f} "
                f"({capacity.server_cpu_ms_per_event:.2f} ms an event), nginx "
                f"{capacity.receiver_cpu:.2f}"
            )

        if profile_base is not None:
            raw = profile_base.with_name(f"{profile_base.name}-profile.txt")
            progress(f"profiling an extra dispatcher-capacity round with py-spy -> {raw}")

            def record(drain: Callable[[], object]) -> None:
                assert server is not None
                profile.record(server.pid, args.profile_seconds, raw, "raw", drain)

            capacity_round(args, server, endpoint, emails, "profiled round", while_draining=record)
            collapsed = raw.read_text()
            hot = profile.hot_spots(collapsed)
            parts = profile.inclusive_shares(collapsed, PROFILE_PARTS)
            title = "the dispatcher draining a pre-filled outbox (an extra round)"
            results.profiles.append(Profiled(title, None, raw.name, hot, parts))
        return results
    except BaseException:
        if server is not None:
            progress("server log (tail):\n" + server.log())
        progress("nginx error log:\n" + receiver.error_log())
        raise
    finally:
        if server is not None:
            server.stop()
        receiver.stop()
        sink.stop()
        dns.stop()


def verdict(ratio: float) -> str:
    return "meets" if ratio >= TARGET else "misses"


def report(args: argparse.Namespace, results: Results, load_average: LoadAverages) -> str:
    with_, without = results.end_to_end[WITH], results.end_to_end[WITHOUT]
    capacity = statistics.median(c.events_per_s for c in results.capacity)

    # Ratios are medians of the rounds' ratios: a round's parts ran close together in time.
    cost = statistics.median(
        [
            a.delivery.delivered_per_s / b.delivery.delivered_per_s
            for a, b in zip(with_, without, strict=True)
        ]
    )
    against_without = statistics.median(
        [
            c.events_per_s / b.delivery.delivered_per_s
            for c, b in zip(results.capacity, without, strict=True)
        ]
    )
    against_with = statistics.median(
        [
            c.events_per_s / a.delivery.delivered_per_s
            for c, a in zip(results.capacity, with_, strict=True)
        ]
    )
    keeping_up = statistics.median(
        [(a.events_per_s or 0.0) / a.delivery.delivered_per_s for a in with_]
    )
    lines = [
        f"# Webhook delivery throughput, {datetime.date.today().isoformat()}",
        "",
        f"{machine_description()}. One `postwire serve` (its sending domain verified against "
        "Knot DNS on loopback; mail routed to Postfix `smtp-sink` on loopback over at most "
        f"{MAX_CONNECTIONS} connections) with one webhook endpoint, created through "
        f"`POST /webhooks` and subscribed to every kind, pointing at {nginx_version()} on "
        "loopback (one worker, 204 to every POST, each logged with its svix headers and body). "
        f"{args.rounds} rounds; each runs, with the endpoint enabled and disabled in "
        f"alternating order, {args.emails:,} emails of a 4 KiB body through "
        f"`POST /emails/batch` (100 a call, {args.post_threads} client threads), then a "
        f"dispatcher-capacity run of {args.events:,} events pre-filled into the stopped "
        f"server's outbox. Medians of the rounds. Load average before {load_average.before:.2f}"
        f", after {load_average.after:.2f}. Server: {server_source()}.",
        "",
        "## Against the target",
        "",
        "| dispatcher events/s from a pre-filled outbox | divided by delivered messages/s | ratio "
        "| target | events/s the target needs | |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for mode, ratio in ((WITHOUT, against_without), (WITH, against_with)):
        rate = results.median(mode, lambda s: s.delivery.delivered_per_s)
        lines.append(
            f"| {capacity:,.0f} | {mode}, {rate:,.0f} | {ratio:.2f} | {TARGET:g} "
            f"| {TARGET * rate:,.0f} | {verdict(ratio)} |"
        )
    lines += [
        "",
        "Ratios are medians of the rounds' ratios (the parts of a round ran close together "
        "in time). "
        f"Webhooks cost the mail rate: delivered/s with the endpoint ÷ without = {cost:.2f}. "
        f"End to end, events/s received ÷ delivered messages/s = {keeping_up:.2f} (2 would "
        "mean the events kept pace with the mail: each email makes two).",
        "",
        "## End to end, webhooks in the budget",
        "",
        "| endpoint | delivered/s | accepted/s | events/s received | last event after first "
        "accept | after the last delivery | connections the POSTs came over "
        "| server CPU per email | server CPU | nginx CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in (WITH, WITHOUT):
        has_events = mode == WITH
        lines.append(
            f"| {mode} | {results.median(mode, lambda s: s.delivery.delivered_per_s):,.0f} "
            f"| {results.median(mode, lambda s: s.delivery.accepted_per_s):,.0f} "
            + (
                f"| {results.median(mode, lambda s: s.events_per_s):,.0f} "
                f"| {results.median(mode, lambda s: s.events_seconds):.2f} s "
                f"| {results.median(mode, lambda s: s.lag_seconds):.2f} s "
                f"| {results.median(mode, lambda s: s.connections):,.0f} "
                if has_events
                else "| n/a | n/a | n/a | n/a "
            )
            + f"| {results.median(mode, lambda s: s.server_cpu_ms_per_email):.2f} ms "
            f"| {results.median(mode, lambda s: s.delivery.server_cpu):.2f} "
            f"| {results.median(mode, lambda s: s.receiver_cpu):.2f} |"
        )
    lines += [
        "",
        "Delivered/s: emails over the time from the first accepted batch call to smtp-sink's "
        "count of the last message; accepted/s: emails over the batch calls' time (the delivery "
        "benchmark's figures). Events/s received: the round's 2 events an email over the time "
        "from the first accept to nginx's log line of the last POST. Server CPU per email: the "
        "server's CPU seconds from the first call to the end of the round (the last delivery, "
        "or the last POST when later) over the emails. Server CPU: cores busy on average from "
        "the first call to the last delivery (2 = the whole machine). nginx CPU: its master and "
        "worker over the whole round. With the endpoint disabled the events still enter the "
        "outbox, which the dispatcher empties; it POSTs nothing.",
        "",
        "## Dispatcher capacity",
        "",
        "| events per round | events/s | server's start to the first POST | server CPU "
        "| connections the POSTs came over | server CPU per event | nginx CPU | other CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {results.events:,} | {capacity:,.0f} "
        f"| {statistics.median(c.start_seconds for c in results.capacity):.2f} s "
        f"| {statistics.median(c.server_cpu for c in results.capacity):.2f} "
        f"| {statistics.median(c.connections for c in results.capacity):,.0f} "
        f"| {statistics.median(c.server_cpu_ms_per_event for c in results.capacity):.2f} ms "
        f"| {statistics.median(c.receiver_cpu for c in results.capacity):.2f} "
        f"| {statistics.median(c.other_cpu for c in results.capacity):.2f} |",
        "",
        "Events (half `email.sent`, half `email.delivered`, about the emails of the round's "
        "part 1) committed with `add_event` into the outbox of the stopped server; events/s is "
        "the events after the first over the time from nginx's log line of the first POST to "
        "the last's. CPU columns: cores busy on average over that time. Connections: nginx's "
        "count of distinct connections the round's POSTs came over"
        + (
            " (about one a POST: the dispatcher did not reuse its connections)."
            if statistics.median(c.connections for c in results.capacity) > results.events / 2
            else "."
        ),
        "",
        f"The receiver is not the bottleneck: nginx alone, with this configuration, took "
        f"{results.receiver_posts_per_s:,.0f} POSTs/s of a webhook-sized body from "
        f"{wrk_version()} over {RECEIVER_CONNECTIONS} connections (the dispatcher's limit per "
        f"endpoint), p99 {results.receiver_p99_ms:.2f} ms, its worker using "
        f"{results.receiver_cpu:.2f} of a core: "
        f"{results.receiver_posts_per_s / capacity:.0f}x the dispatcher's rate.",
        "",
        f"Checked, untimed: {results.checked:,} POSTs (every one of every round: a 204 reply, "
        "its own `svix-id`, exactly the expected events); the `svix` package verified the "
        f"signatures of {results.verified:,} of them, chosen at random "
        f"({args.verify_sample} a round, and both of the first email's).",
        "",
        "Per round (end to end: delivered/s with; without; events/s received. Capacity: events/s):",
        "",
        "| round | delivered/s with webhook | delivered/s without | events/s end to end "
        "| capacity events/s |",
        "|---:|---:|---:|---:|---:|",
    ]
    for index in range(args.rounds):
        a, b, c = with_[index], without[index], results.capacity[index]
        lines.append(
            f"| {index + 1} | {a.delivery.delivered_per_s:,.0f} "
            f"| {b.delivery.delivered_per_s:,.0f} | {a.events_per_s or 0:,.0f} "
            f"| {c.events_per_s:,.0f} |"
        )
    for profiled in results.profiles:
        lines += profile_section(
            profiled,
            why_the_gil="one Trio thread runs the dispatcher, as it runs the API and delivery",
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options, checked (a usage error exits)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.webhooks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--emails", type=int, default=5000, help="4 KiB emails a round")
    parser.add_argument(
        "--events", type=int, default=20000, help="events pre-filled for the capacity run"
    )
    parser.add_argument("--post-threads", type=int, default=4, help="concurrent batch calls")
    parser.add_argument(
        "--verify-sample", type=int, default=200, help="signatures verified a round (svix)"
    )
    parser.add_argument(
        "--deliver-timeout", type=float, default=300.0, help="seconds the mail of a round may take"
    )
    parser.add_argument(
        "--events-timeout", type=float, default=600.0, help="seconds a round's events may take"
    )
    add_report_options(
        parser, report_name="webhooks", profile_help="profile an extra capacity round (py-spy)"
    )
    parser.add_argument(
        "--profile-seconds", type=int, default=10, help="shorter than a capacity round"
    )
    args = parser.parse_args(argv)
    check_options(
        parser,
        args,
        at_least_one=("rounds", "emails", "events", "post_threads", "verify_sample"),
        make_target="bench-webhooks",
    )
    if args.events < 2:
        parser.error("--events must be >= 2")
    missing = [
        name
        for name, path in (("smtp-sink", sink_path()), ("nginx", nginx_path()), ("wrk", wrk_path()))
        if path is None
    ]
    if missing:
        parser.error(
            f"{' and '.join(missing)} not installed (Debian: apt-get install postfix nginx-light "
            "wrk; `make bench-webhooks` does)"
        )

    return args


def measure(args: argparse.Namespace, profile_base: Path | None) -> tuple[Results, str]:
    """Run the benchmark: what it measured, and its Markdown report."""
    return measure_and_render(
        work_prefix="postwire-bench-webhooks-",
        measure=partial(run_benchmark, args),
        render=lambda measured, load_average: report(args, measured, load_average),
        profile_base=profile_base,
    )


def main() -> None:
    args = parse_args()
    report_to_file(args, partial(measure, args))


if __name__ == "__main__":
    main()
