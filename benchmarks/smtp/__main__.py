"""`make bench-smtp`: messages/s that SMTP submission over implicit TLS accepts from 50
concurrent sessions, and delivers to Postfix's `smtp-sink`, with 4 KiB and 100 KiB messages;
two baselines fed and drained the same way, side by side in one run: Postfix with an OpenDKIM
milter signing every message (RSA-2048), the usual self-hosted stack, and Postfix alone.

The path of every message: `smtp-source -d -s 50` (Postfix's load generator: 50 sessions, each
sending message after message over one connection) -> `stunnel` client (plain on loopback, TLS
to the server) -> the server's implicit-TLS listener -> its queue -> `smtp-sink` on loopback.

Postwire (the API benchmark's `BenchServer`, its sending domain verified for real against a
Knot DNS server on loopback) listens on `smtp.tls_listen` with its self-signed certificate;
smtp-source cannot AUTH, so 127.0.0.1 is in `smtp.trusted_networks` and the mail belongs to the
team of the verified domain of its From header (smtp-source writes `From:` from its `-f`).
`delivery.routes` sends everything to the sink over at most 50 connections. Postfix (a private
instance on loopback, see `postfix_relay.py`) gets the same certificate, TLS from the first
byte on its smtpd, and relays to the same sink over at most 50 connections. For the signing
baseline a second instance hands every message to OpenDKIM (`opendkim.py`: a key made by
`opendkim-genkey -b 2048` for the sending domain, configured as Debian ships it: relaxed/simple
where Postwire signs relaxed/relaxed, From oversigned, a Unix socket) and refuses it with a 4xx
when the milter fails (`milter_default_action = tempfail`). `--baselines` picks which of the
two run.

Before anything is timed, one message must go end to end through each server, then a short
warm-up runs. Through Postfix + OpenDKIM, one more message goes first to a second smtp-sink
that keeps it: it must carry a DKIM-Signature of the sending domain at OpenDKIM's selector
that dkimpy verifies against the public key `opendkim-genkey` wrote. Each round, for each size
in a rotating order, each server in turn (a different one first each time) gets N messages:
accepted/s is N over smtp-source's run (it exits 0 only when every message got a 2xx reply);
delivered/s is N over the time from smtp-source's start to smtp-sink's
count of the Nth message. Then, untimed: the API must report `last_event` "delivered" for all N
of Postwire's (found by the round's subject), Postfix's queues must be empty, and the sink must
hold exactly N new messages, or the run fails. Medians of the rounds are reported.

Progress goes to stderr, the Markdown report to stdout and to `--output`. With `--profile`, an
extra round of each size of Postwire runs under py-spy (`--gil`, every process of the service)
and the report names its hot spots.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import email
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import dkim
import httpx
from tests.dns_server import AuthoritativeDnsServer
from tests.postfix_mta import postfix_unavailable

from benchmarks.api import profile
from benchmarks.api.profile import Profiled, profile_section
from benchmarks.api.server import BenchServer, verify_domain
from benchmarks.cpu_time import children_cpu, machine_busy, process_cpu, process_tree_cpu
from benchmarks.delivery.rounds import MAX_CONNECTIONS, SINK_DELIVERY, Size
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
from benchmarks.smtp.opendkim import (
    CANONICALIZATION,
    OpenDkim,
    opendkim_unavailable,
    opendkim_version,
)
from benchmarks.smtp.postfix_relay import PostfixRelay, postfix_version
from benchmarks.smtp.source import Load, send, source_path
from benchmarks.smtp.tunnel import StunnelClient, stunnel_path, stunnel_version

DOMAIN = "bench-example.test"
SENDER = f"news@{DOMAIN}"
RECIPIENT_DOMAIN = "example.org"
RECIPIENT = f"reader@{RECIPIENT_DOMAIN}"
SESSIONS = 50
CHECK_TIMEOUT = 30.0
CONFIRM_TIMEOUT = 60.0
TLS_LISTENING = re.compile(r"SMTP submission \(implicit TLS\) on 127\.0\.0\.1:(\d+)")
POSTWIRE, POSTFIX, POSTFIX_DKIM = "Postwire", "Postfix", "Postfix + OpenDKIM"
# `--baselines` names, in the order the servers are set up and reported.
BASELINES = {"postfix-opendkim": POSTFIX_DKIM, "postfix": POSTFIX}
SELECTOR = "opendkim"
# Routed by the signing Postfix to a second smtp-sink that keeps what it gets: the DKIM check.
CHECK_DOMAIN = "dkim-check.example.org"
# Where the event loop's time goes, in the terms of this path: modules and packages as py-spy
# names their frames, so that the parts outlive renames inside them.
PROFILE_PARTS = {
    "aiosmtpd: the SMTP session (commands, DATA read line by line)": ("(aiosmtpd/",),
    "TLS record layer (`asyncio/sslproto.py`, `ssl.py`)": ("(asyncio/sslproto.py)", "(ssl.py)"),
    "accept path (`postwire/accept.py`, `SubmissionHandler.accept`)": (
        "(postwire/accept.py)",
        "SubmissionHandler.accept (",
    ),
    "handing work to threads (`trio.to_thread.run_sync`)": ("to_thread_run_sync (trio/",),
    "delivery (`postwire/delivery/`, the SMTP client)": (
        "(postwire/delivery/",
        "(postwire/smtp/client_",
    ),
    "Python's `email` package": ("(email/",),
    "logging": ("(logging/",),
}


@dataclass(frozen=True)
class Sample:
    accepted_per_s: float
    delivered_per_s: float
    accept_seconds: float  # smtp-source's run
    deliver_seconds: float  # smtp-source's start to the Nth message at smtp-sink
    server_cpu: float  # cores busy on average over deliver_seconds (2 = the whole machine)
    server_cpu_ms_per_message: float
    tunnel_cpu: float
    source_cpu: float
    sink_cpu: float
    other_cpu: float  # everything else: this process, Knot, the rest of the machine


@dataclass
class Figure:
    server: str
    size: Size
    samples: list[Sample] = field(default_factory=list)

    def median(self, value: str) -> float:
        return statistics.median(float(getattr(s, value)) for s in self.samples)


class ServerUnderTest(Protocol):
    """What a round needs of a server: where its tunnel listens, its CPU, and its word that
    every message of a round was delivered."""

    name: str
    tunnel: StunnelClient

    def cpu_seconds(self) -> float: ...

    def confirm_delivered(self, subject: str, messages: int, timeout: float) -> None: ...


class SmtpBenchServer(BenchServer):
    """The API benchmark's server, with implicit-TLS submission open to 127.0.0.1 without AUTH
    and every recipient routed to the sink over 50 connections."""

    def __init__(
        self, directory: Path, nameserver: str, sink_port: int, *, processes: int, **config: Any
    ) -> None:
        super().__init__(
            directory,
            nameserver,
            processes=processes,
            tls_listen=("127.0.0.1:0",),
            smtp_extra='trusted_networks = ["127.0.0.1/32"]',
            routes={"*": f"127.0.0.1:{sink_port}"},
            delivery_extra=SINK_DELIVERY,
            **config,
        )

    @property
    def tls_certificate(self) -> tuple[Path, Path]:
        """The self-signed (certificate, key) it generated on first start."""
        directory = self.data_dir / "tls"
        return directory / "smtp-cert.pem", directory / "smtp-key.pem"


@dataclass
class PostwireUnderTest:
    server: SmtpBenchServer
    client: httpx.Client  # the REST API, with a full-access key
    tunnel: StunnelClient
    name: str = POSTWIRE

    def cpu_seconds(self) -> float:
        return process_tree_cpu(self.server.pid)

    def confirm_delivered(self, subject: str, messages: int, timeout: float) -> None:
        """Until the round's emails, the newest ones (those up to the first email with another
        subject), are `messages` in number and all read "delivered" (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            states = self._states_of(subject)
            if sum(states.values()) > messages:
                raise SystemExit(f"{sum(states.values())} emails of {subject!r}, {messages} sent")
            if states["delivered"] == messages:
                return
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"{subject!r}: not every one of {messages} emails delivered per the API after "
                    f"{timeout:g} s: {dict(states)}"
                )
            time.sleep(0.5)

    def _states_of(self, subject: str) -> collections.Counter[str]:
        states: collections.Counter[str] = collections.Counter()
        params: dict[str, str | int] = {"limit": 100}
        while True:
            page = ok(self.client.get("/emails", params=params))
            for item in page["data"]:
                if item["subject"] != subject:
                    return states
                states[item["last_event"]] += 1
            if not page["data"] or not page.get("has_more"):
                return states
            params["after"] = page["data"][-1]["id"]


@dataclass
class PostfixUnderTest:
    relay: PostfixRelay
    tunnel: StunnelClient
    name: str = POSTFIX
    milter: OpenDkim | None = None  # its CPU counts as the server's

    def cpu_seconds(self) -> float:
        milter = self.milter.cpu_seconds() if self.milter is not None else 0.0
        return self.relay.cpu_seconds() + milter

    def confirm_delivered(self, subject: str, messages: int, timeout: float) -> None:
        """The queue is empty: every message left (the sink's count says where to)."""
        left = self.relay.wait_until_empty(timeout)
        if left:
            raise SystemExit(
                f"{subject!r}: {left} messages still in Postfix's queue after {timeout:g} s:\n"
                + self.relay.maillog()[-3000:]
            )


def check_signed(server: PostfixUnderTest, keeper: SmtpSink, timeout: float) -> None:
    """One message (untimed) to the check domain, kept by the sink `keeper`: it must carry a
    DKIM-Signature of the sending domain at OpenDKIM's selector, and dkimpy must verify it
    against the public key OpenDKIM signs with (smtp-sink's own lines above the message are
    unsigned headers to it)."""
    assert server.milter is not None
    subject = f"SMTP benchmark, DKIM check, {server.name}"
    send(
        Load(1, 1, 4 * 1024, SENDER, f"reader@{CHECK_DOMAIN}", subject),
        server.tunnel.port,
        timeout=timeout,
    )
    deadline = time.monotonic() + timeout
    while not (messages := keeper.dumped()) or server.relay.queued():
        if time.monotonic() > deadline:
            raise SystemExit(
                f"{subject!r}: not delivered to the check sink within {timeout:g} s:\n"
                + server.relay.maillog()[-3000:]
            )
        time.sleep(0.1)
    if len(messages) != 1:
        raise SystemExit(f"{subject!r}: the check sink got {len(messages)} messages, 1 sent")
    content = messages[0]
    signatures = email.message_from_bytes(content).get_all("DKIM-Signature") or []
    tags = [dict(re.findall(r"(\w+)=([^;\s]*)", " ".join(value.split()))) for value in signatures]
    ours = [t for t in tags if t.get("d") == DOMAIN and t.get("s") == SELECTOR]
    if len(ours) != 1:
        raise SystemExit(
            f"{subject!r}: expected one DKIM-Signature d={DOMAIN} s={SELECTOR}, got {signatures}"
        )
    name = f"{SELECTOR}._domainkey.{DOMAIN}.".encode()
    record = server.milter.public_record()

    def txt(query: bytes, timeout: float = 5) -> bytes | None:
        return record if query == name else None

    if not dkim.verify(content, dnsfunc=txt):
        raise SystemExit(f"{subject!r}: OpenDKIM's signature does not verify:\n{content[:3000]!r}")
    progress(
        f"{server.name}: the delivered message's DKIM-Signature (a={ours[0].get('a')}) verifies"
    )


def ok(response: httpx.Response) -> Any:
    if not response.is_success:
        raise SystemExit(
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} {response.text[:500]}"
        )
    return response.json()


def run_round(
    server: ServerUnderTest,
    size: Size,
    sink: SmtpSink,
    *,
    subject: str,
    sessions: int,
    deliver_timeout: float,
) -> Sample:
    """Send `size.messages` through `server`, wait until the sink has them all, confirm."""
    sessions = min(sessions, size.messages)
    load = Load(size.messages, sessions, size.body_bytes, SENDER, RECIPIENT, subject)
    base = sink.messages
    server_cpu0, tunnel_cpu0, source_cpu0 = (
        server.cpu_seconds(),
        process_cpu(server.tunnel.pid),
        children_cpu(),
    )
    sink_cpu0, machine0 = process_cpu(sink.pid), machine_busy()
    started = time.monotonic()
    send(load, server.tunnel.port, timeout=deliver_timeout)
    accept_seconds = time.monotonic() - started
    progress(
        f"{subject}: accepted {size.messages} in {accept_seconds:.2f} s "
        f"({size.messages / accept_seconds:,.0f}/s); {sink.messages - base} delivered so far"
    )
    done = sink.wait_for_all(
        base + size.messages,
        timeout=deliver_timeout,
        label=subject,
        base=base,
        since=started,
        started=started,
    )
    wall = time.monotonic() - started
    server_seconds = server.cpu_seconds() - server_cpu0
    tunnel_cpu = (process_cpu(server.tunnel.pid) - tunnel_cpu0) / wall
    source_cpu = (children_cpu() - source_cpu0) / wall
    sink_cpu = (process_cpu(sink.pid) - sink_cpu0) / wall
    machine = (machine_busy() - machine0) / wall
    server_cpu = server_seconds / wall

    server.confirm_delivered(subject, size.messages, CONFIRM_TIMEOUT)
    received = sink.messages - base
    if received != size.messages:
        raise SystemExit(f"{subject}: smtp-sink received {received} messages, {size.messages} sent")
    deliver_seconds = done - started
    return Sample(
        accepted_per_s=size.messages / accept_seconds,
        delivered_per_s=size.messages / deliver_seconds,
        accept_seconds=accept_seconds,
        deliver_seconds=deliver_seconds,
        server_cpu=server_cpu,
        server_cpu_ms_per_message=1000 * server_seconds / size.messages,
        tunnel_cpu=tunnel_cpu,
        source_cpu=source_cpu,
        sink_cpu=sink_cpu,
        other_cpu=max(0.0, machine - server_cpu - tunnel_cpu - source_cpu - sink_cpu),
    )


def run_benchmark(
    args: argparse.Namespace, work: Path, profile_base: Path | None
) -> tuple[list[Figure], list[Profiled]]:
    sizes = [
        Size("4 KiB", 4 * 1024, args.messages_small),
        Size("100 KiB", 100 * 1024, args.messages_large),
    ]
    dns = AuthoritativeDnsServer()
    sink = SmtpSink()
    postwire: SmtpBenchServer | None = None
    relays: list[PostfixRelay] = []
    milters: list[OpenDkim] = []
    tunnels: list[StunnelClient] = []
    dns.start()
    keepers: list[SmtpSink] = []
    try:
        sink.start()
        progress(f"smtp-sink listening on 127.0.0.1:{sink.port}")
        postwire = SmtpBenchServer(work, dns.nameserver, sink.port, processes=args.processes)
        progress("starting postwire serve ...")
        postwire.start()
        tls_port = int(postwire.wait_for_log(TLS_LISTENING)[1])
        token = postwire.create_key("bench")
        client = httpx.Client(
            base_url=postwire.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        with client:
            progress(f"verifying {DOMAIN} against Knot DNS at {dns.nameserver} ...")
            verify_domain(client, dns, DOMAIN)
            tunnels.append(StunnelClient(work, "postwire", tls_port))
            tunnels[-1].start()
            servers: list[ServerUnderTest] = [PostwireUnderTest(postwire, client, tunnels[-1])]
            signing: list[tuple[PostfixUnderTest, SmtpSink]] = []
            for option, name in BASELINES.items():
                if option not in args.baselines:
                    continue
                milter: OpenDkim | None = None
                more_routes: dict[str, str] = {}
                if name == POSTFIX_DKIM:
                    progress(f"starting OpenDKIM ({SELECTOR}._domainkey.{DOMAIN}) ...")
                    milter = OpenDkim(DOMAIN, SELECTOR)
                    milters.append(milter)
                    milter.start()
                    # Written by smtp-sink as `nobody`.
                    dump_dir = work / "dkim-check"
                    dump_dir.mkdir(mode=0o777)
                    dump_dir.chmod(0o777)
                    work.chmod(0o755)
                    keepers.append(SmtpSink(dump_dir))
                    keepers[-1].start()
                    more_routes[CHECK_DOMAIN] = f"127.0.0.1:{keepers[-1].port}"
                relay = PostfixRelay(
                    RECIPIENT_DOMAIN,
                    f"127.0.0.1:{sink.port}",
                    *postwire.tls_certificate,
                    milter=milter.milter if milter is not None else None,
                    more_routes=more_routes,
                )
                relays.append(relay)
                progress(f"starting {name} ...")
                relay.start()
                tunnels.append(StunnelClient(work, option, relay.tls_port))
                tunnels[-1].start()
                baseline = PostfixUnderTest(relay, tunnels[-1], name, milter)
                servers.append(baseline)
                if milter is not None:
                    signing.append((baseline, keepers[-1]))
            figures = {
                (server.name, size.name): Figure(server.name, size)
                for size in sizes
                for server in servers
            }

            def one(server: ServerUnderTest, size: Size, label: str, messages: int = 0) -> Sample:
                sized = Size(size.name, size.body_bytes, messages) if messages else size
                return run_round(
                    server,
                    sized,
                    sink,
                    subject=f"SMTP benchmark, {label}, {server.name}, {size.name}",
                    sessions=args.sessions,
                    deliver_timeout=args.deliver_timeout,
                )

            for baseline, keeper in signing:
                progress(f"checking {baseline.name}'s DKIM signature on one message ...")
                check_signed(baseline, keeper, CHECK_TIMEOUT)
            for server in servers:
                progress(f"checking that one message goes end to end through {server.name} ...")
                one(server, sizes[0], "check", messages=1)
                progress(f"warm-up: {args.warmup} messages through {server.name} ...")
                one(server, sizes[0], "warm-up", messages=args.warmup)

            for round_number in range(args.rounds):
                shift = round_number % len(sizes)
                for index, size in enumerate(sizes[shift:] + sizes[:shift]):
                    # Servers alternate too, so that neither always goes first.
                    turn = (round_number + index) % len(servers)
                    for server in servers[turn:] + servers[:turn]:
                        label = f"round {round_number + 1}/{args.rounds}"
                        sample = one(server, size, label)
                        figures[server.name, size.name].samples.append(sample)
                        progress(
                            f"{label} {server.name} {size.name}: "
                            f"{sample.accepted_per_s:,.0f} accepted/s, "
                            f"{sample.delivered_per_s:,.0f} delivered/s; CPU server "
                            f"{sample.server_cpu:.2f} ({sample.server_cpu_ms_per_message:.2f} ms "
                            f"a message) stunnel {sample.tunnel_cpu:.2f} smtp-source "
                            f"{sample.source_cpu:.2f} smtp-sink {sample.sink_cpu:.2f} "
                            f"other {sample.other_cpu:.2f}; all delivered"
                        )

            profiles: list[Profiled] = []
            for size in sizes if profile_base is not None else []:
                assert profile_base is not None
                # The first size's file keeps the plain name the full report links to.
                suffix = "" if size is sizes[0] else f"-{size.name.replace(' ', '').lower()}"
                raw = profile_base.with_name(f"{profile_base.name}-profile{suffix}.txt")
                progress(f"profiling an extra {size.name} round of Postwire -> {raw} ...")
                load = partial(one, servers[0], size, "profiled round")
                profile.record(postwire.pid, args.profile_seconds, raw, "raw", load)
                collapsed = raw.read_text()
                hot = profile.hot_spots(collapsed)
                parts = profile.inclusive_shares(collapsed, PROFILE_PARTS)
                title = f"SMTP submission and delivery of {size.name} messages (an extra round)"
                profiles.append(Profiled(title, None, raw.name, hot, parts))
        return list(figures.values()), profiles
    except BaseException:
        if postwire is not None:
            progress("server log (tail):\n" + postwire.log())
        for tunnel in tunnels:
            progress(f"stunnel log ({tunnel.name}):\n" + tunnel.log())
        for relay in relays:
            progress(f"Postfix maillog ({relay.directory}, tail):\n" + relay.maillog()[-5000:])
        for milter in milters:
            progress("OpenDKIM's output:\n" + milter.log()[-3000:])
        raise
    finally:
        for tunnel in tunnels:
            tunnel.stop()
        for relay in relays:
            relay.stop()
        for milter in milters:
            milter.stop()
        for keeper in keepers:
            keeper.stop()
        if postwire is not None:
            postwire.stop()
        sink.stop()
        dns.stop()


def ratio(figures: list[Figure], size: str, value: str, baseline: str) -> float | None:
    """Postwire / `baseline` for one size (by name): the median of the rounds' ratios (rounds
    pair the runs made close together in time); None when `baseline` did not run."""
    by_server = {f.server: f for f in figures if f.size.name == size}
    if baseline not in by_server:
        return None
    pairs = zip(by_server[POSTWIRE].samples, by_server[baseline].samples, strict=True)
    return statistics.median(float(getattr(a, value) / getattr(b, value)) for a, b in pairs)


def ratio_cell(figures: list[Figure], size: str, value: str, baseline: str) -> str:
    measured = ratio(figures, size, value, baseline)
    return "n/a" if measured is None else f"{measured:.2f}"


def report(
    args: argparse.Namespace,
    figures: list[Figure],
    profiles: list[Profiled],
    load_average: LoadAverages,
) -> str:
    baselines = [BASELINES[option] for option in BASELINES if option in args.baselines]
    postfix = postfix_version()
    described = {
        POSTFIX_DKIM: f"{postfix} with {opendkim_version()} as a milter signing every message "
        f"(RSA-2048, {CANONICALIZATION} as Debian ships it, `milter_default_action = tempfail`)",
        POSTFIX: f"{postfix} alone (no DKIM)",
    }
    baseline = (
        "; the baselines, "
        + " and ".join(described[name] for name in baselines)
        + ", get the same certificate, the same tunnel, and relay to the same sink"
        if baselines
        else ""
    )
    # Seen with ps during Postfix's rounds: 15 to 30 of its processes runnable at once.
    busy_postfix = " (it counts runnable processes: Postfix's rounds run dozens at once)"
    lines = [
        f"# SMTP submission throughput, {datetime.date.today().isoformat()}",
        "",
        f"{machine_description()}. `smtp-source -d -s {args.sessions}` (each session sends "
        f"message after message over one connection) -> {stunnel_version()} client -> "
        "implicit TLS (TLS from the first byte, port 465 style) -> the server -> Postfix "
        f"`smtp-sink` on loopback, at most {MAX_CONNECTIONS} connections to it (Postwire: "
        "`delivery.max_connections_per_site`, shared out among its processes); one recipient "
        f"per message. Postwire ({_processes(args.processes)}): SMTP submission from a trusted "
        "network (no AUTH), From a verified domain, DKIM-signed (RSA-2048, relaxed/relaxed), "
        "group-committed to the spool before 250, then "
        f"delivered through `delivery.routes`{baseline}. Medians of {args.rounds} rounds per "
        "size and server (sizes rotate, servers take turns going first). Load average before "
        f"{load_average.before:.2f}, after {load_average.after:.2f}"
        f"{busy_postfix if baselines else ''}. Server: {server_source()}.",
        "",
        "| message body | server | messages per round | accepted/s | delivered/s "
        "| server CPU | server CPU per message | stunnel CPU | smtp-source CPU | smtp-sink CPU "
        "| other CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for figure in figures:
        lines.append(
            f"| {figure.size.name} | {figure.server} | {figure.size.messages:,} "
            f"| {figure.median('accepted_per_s'):,.0f} | {figure.median('delivered_per_s'):,.0f} "
            f"| {figure.median('server_cpu'):.2f} "
            f"| {figure.median('server_cpu_ms_per_message'):.2f} ms "
            f"| {figure.median('tunnel_cpu'):.2f} | {figure.median('source_cpu'):.2f} "
            f"| {figure.median('sink_cpu'):.2f} | {figure.median('other_cpu'):.2f} |"
        )
    sizes = list({f.size.name: f.size for f in figures}.values())
    if baselines:
        columns = ("accepted/s", "delivered/s", "server CPU per message")
        values = ("accepted_per_s", "delivered_per_s", "server_cpu_ms_per_message")
        lines += [
            "",
            "| message body | "
            + " | ".join(f"Postwire / {b}, {c}" for b in baselines for c in columns)
            + " |",
            "|---|" + "---:|" * (len(baselines) * len(columns)),
        ]
        lines += [
            f"| {size.name} | "
            + " | ".join(ratio_cell(figures, size.name, v, b) for b in baselines for v in values)
            + " |"
            for size in sizes
        ]
    lines += [
        "",
        "Accepted/s: messages over smtp-source's run, from its start to its exit (it exits 0 "
        "only when every message got a 2xx reply to its DATA). Delivered/s: messages over the "
        "time from smtp-source's start to smtp-sink's count of the last one (`smtp-sink -c`). "
        'After each round, untimed: the API reported `last_event` "delivered" for every '
        "Postwire email of the round, Postfix's queue was empty, and smtp-sink had received "
        "exactly the round's messages. Before the rounds, one message through Postfix + "
        "OpenDKIM reached a second smtp-sink that kept it, with OpenDKIM's DKIM-Signature "
        "(the sending domain, its selector), which dkimpy verified against the public key "
        "`opendkim-genkey` wrote. CPU columns are cores busy on average over the same "
        "time (2 = the whole machine): the server (Postwire's process; Postfix's master and "
        "every daemon it ran, plus OpenDKIM's process when it signs), the stunnel client, "
        "smtp-source, smtp-sink, and everything else "
        "(this benchmark's process, Knot DNS, the rest of the machine). Server CPU per message: "
        "CPU seconds of the server over the round's messages. Ratios are medians of the "
        "rounds' ratios.",
        "",
        "Per round (accepted/s; delivered/s):",
        "",
        "| round | " + " | ".join(f"{f.size.name} {f.server}" for f in figures) + " |",
        "|---:|" + "---:|" * len(figures),
    ]
    for index in range(args.rounds):
        cells = [
            f"{f.samples[index].accepted_per_s:,.0f}; {f.samples[index].delivered_per_s:,.0f}"
            for f in figures
        ]
        lines.append(f"| {index + 1} | " + " | ".join(cells) + " |")
    for profiled in profiles:
        lines += profile_section(
            profiled,
            why_the_gil="in each of Postwire's processes one Trio thread runs SMTP submission "
            "(aiosmtpd under trio-asyncio) and a delivery engine; the samples of every process "
            "are counted together",
        )
    return "\n".join(lines) + "\n"


def _processes(count: int) -> str:
    return "one process" if count == 1 else f"`processes = {count}`: {count} processes"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options, checked (a usage error exits)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.smtp",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--processes", type=int, default=2, help="Postwire's `processes` (one per core here)"
    )
    parser.add_argument("--messages-small", type=int, default=5000, help="4 KiB messages a round")
    parser.add_argument("--messages-large", type=int, default=2000, help="100 KiB messages a round")
    parser.add_argument("--sessions", type=int, default=SESSIONS, help="concurrent SMTP sessions")
    parser.add_argument("--warmup", type=int, default=500, help="4 KiB messages, untimed")
    parser.add_argument(
        "--deliver-timeout", type=float, default=300.0, help="seconds a round may take"
    )
    parser.add_argument(
        "--baselines",
        nargs="*",
        choices=list(BASELINES),
        default=list(BASELINES),
        help="the rivals measured beside Postwire (default: all; none: Postwire alone)",
    )
    add_report_options(
        parser, report_name="smtp", profile_help="profile an extra round of each size (py-spy)"
    )
    parser.add_argument("--profile-seconds", type=int, default=5, help="shorter than a round")
    args = parser.parse_args(argv)
    check_options(
        parser,
        args,
        at_least_one=("rounds", "messages_small", "messages_large", "sessions", "warmup"),
        make_target="bench-smtp",
    )
    missing = [
        name
        for name, path in (
            ("smtp-sink", sink_path()),
            ("smtp-source", source_path()),
            ("stunnel", stunnel_path()),
        )
        if path is None
    ]
    if missing:
        parser.error(
            f"{' and '.join(missing)} not installed (Debian: apt-get install postfix stunnel4; "
            "`make bench-smtp` does)"
        )
    if args.baselines and (why := postfix_unavailable()) is not None:
        parser.error(f"the Postfix baselines cannot run: {why} (or pass --baselines)")
    if "postfix-opendkim" in args.baselines and (why := opendkim_unavailable()) is not None:
        parser.error(f"the Postfix + OpenDKIM baseline cannot run: {why}")

    return args


def measure(
    args: argparse.Namespace, profile_base: Path | None
) -> tuple[tuple[list[Figure], list[Profiled]], str]:
    """Run the benchmark: what it measured, and its Markdown report."""
    return measure_and_render(
        work_prefix="postwire-bench-smtp-",
        measure=partial(run_benchmark, args),
        render=lambda measured, load_average: report(args, *measured, load_average),
        profile_base=profile_base,
    )


def main() -> None:
    args = parse_args()
    report_to_file(args, partial(measure, args))


if __name__ == "__main__":
    main()
