"""`GET /metrics` of a live `postwire serve`, read with the `prometheus_client` parser: mail sent
through the REST API (the `resend` SDK) and over SMTP, delivered to a scripted receiver that
refuses one recipient for good (550 5.1.1) and defers another (451 4.2.0), a webhook endpoint
taking the events. Every documented series is on the page and the numbers are those of what
happened; with `processes = 2` the worker's numbers are there beside the first process's."""

from __future__ import annotations

import os
import re
import signal
import smtplib
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest
import resend
from prometheus_client.parser import text_string_to_metric_families

from postwire.metrics.operator_exposition import SERIES
from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import (
    DOMAIN,
    LiveServer,
    serving,
    verified_domain,
    wait_until,
    write_config,
)
from tests.e2e.test_processes import children_of
from tests.e2e.test_smtp_submission import free_address, listener, wait_for_smtp
from tests.smtp_receiver import ReceiverScript, ScriptedSmtpReceiver
from tests.webhook_receiver import WebhookReceiver

METRICS_READY = re.compile(r"metrics listening on (http://\S+)")
REFUSED = "nobody@example.org"
DEFERRED = "later@example.org"
MAP_SIZE = 8 * 1024**3  # spool.map_size's default

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def receiver() -> Iterator[ScriptedSmtpReceiver]:
    script = ReceiverScript(
        refuse_recipients={REFUSED: "550 5.1.1 no such user", DEFERRED: "451 4.2.0 try later"}
    )
    receiver = ScriptedSmtpReceiver(script)
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture
def hooks() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    receiver.start()
    yield receiver
    receiver.stop()


@contextmanager
def relaying(
    tmp_path: Path,
    dns_server: AuthoritativeDnsServer,
    receiver: ScriptedSmtpReceiver,
    **config: Any,
) -> Iterator[LiveServer]:
    """A live server (`serving`, with `config`) with an SMTP listener and a verified domain,
    delivering example.org's mail to `receiver`."""
    with serving(
        tmp_path,
        dns_server,
        routes={"example.org": f"{receiver.host}:{receiver.port}"},
        tls_listen=(free_address(),),
        **config,
    ) as live:
        verified_domain(dns_server)
        yield live


def metrics_url(live: LiveServer) -> str:
    listening = live.wait_for_log(METRICS_READY, 0, what="the metrics listener")
    return listening.group(1).rstrip("/") + "/metrics"


def scrape(live: LiveServer) -> tuple[set[str], Samples]:
    """The families on the page and every sample, by name and labels."""
    response = httpx.get(metrics_url(live), timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = list(text_string_to_metric_families(response.text))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples
    }
    return {f.name for f in families}, samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (over processes, say)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


def by_destination(samples: Samples) -> dict[str, float]:
    """The retry backlog by recipient domain, as its gauge shows it."""
    name = "postwire_retry_backlog_destination_messages"
    return {dict(ls)["destination"]: v for (n, ls), v in samples.items() if n == name}


def by_process(samples: Samples, name: str, **labels: str) -> dict[str, float]:
    found: dict[str, float] = {}
    wanted = set(labels.items())
    for (n, ls), value in samples.items():
        if n == name and wanted <= set(ls):
            process = dict(ls)["process"]
            found[process] = found.get(process, 0) + value
    return found


def send_over_smtp(address: tuple[str, int], token: str, subjects: list[str]) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with smtplib.SMTP_SSL(*address, timeout=30, context=context) as client:
        client.login("postwire", token)
        for subject in subjects:
            mail = EmailMessage()
            mail["From"] = f"Shop <shop@{DOMAIN}>"
            mail["To"] = "ann@example.org"
            mail["Subject"] = subject
            mail.set_content("Sent over SMTP.\n")
            client.send_message(mail)


def send_in_parallel(address: tuple[str, int], token: str, name: str) -> int:
    """Eight SMTP sessions at once, three messages each; how many were sent."""
    with ThreadPoolExecutor(8) as pool:
        subjects = [[f"{name} session {n} message {m}" for m in range(3)] for n in range(8)]
        list(pool.map(lambda batch: send_over_smtp(address, token, batch), subjects))
    return sum(len(batch) for batch in subjects)


def wait_for_accepted(live: LiveServer, messages: int) -> None:
    """Until the page counts `messages` accepted, over every process (workers publish every
    few seconds)."""

    def counted() -> bool:
        return total(scrape(live)[1], "postwire_accepted_messages_total") == messages

    wait_until(counted, "every process's acceptances published")


def send_rest(to: str, subject: str) -> str:
    sent = resend.Emails.send(
        {"from": f"Shop <shop@{DOMAIN}>", "to": to, "subject": subject, "text": "Thanks."}
    )
    return str(sent["id"])


def test_every_documented_series_with_the_numbers_of_what_happened(
    tmp_path: Path,
    dns_server: AuthoritativeDnsServer,
    receiver: ScriptedSmtpReceiver,
    hooks: WebhookReceiver,
) -> None:
    started = time.time()
    with relaying(tmp_path, dns_server, receiver, allow_private_webhooks=True) as live:
        resend.Webhooks.create({"endpoint": hooks.url, "events": ["email.delivered"]})
        # REST: three single sends (one refused for good, one deferred) and a batch of two.
        for n, to in enumerate(["ann@example.org", REFUSED, DEFERRED]):
            send_rest(to, f"rest {n}")
        resend.Batch.send(
            [
                {
                    "from": f"Shop <shop@{DOMAIN}>",
                    "to": f"b{n}@example.org",
                    "subject": f"batch {n}",
                    "text": "Thanks.",
                }
                for n in range(2)
            ]
        )
        address = listener(live, "tls_listen")
        wait_for_smtp(address)
        send_over_smtp(address, live.create_key("relay", permission="sending_access"), ["s0", "s1"])
        delivered = 5  # ann, the batch's two, the two SMTP messages

        wait_until(lambda: len(receiver.received()) == delivered, "every message received")
        wait_until(lambda: len(hooks.posts()) >= delivered, "the delivered events POSTed")

        def settled() -> bool:
            _, samples = scrape(live)
            return (
                total(samples, "postwire_delivery_outcomes_total") == 7
                and total(samples, "postwire_webhook_attempts_total", result="succeeded")
                >= delivered
            )

        wait_until(settled, "the outcomes and webhook POSTs counted")
        names, samples = scrape(live)

        # Every documented series is there (the parser names counter families without _total).
        assert {s.name.removesuffix("_total") for s in SERIES} <= names
        labelled = {name for name, _ in samples}
        for series in SERIES:
            if series.kind == "histogram":
                assert f"{series.name}_bucket" in labelled, series.name
            elif series.name.startswith("postwire_queue_") and "destination" in series.labels:
                continue  # only while a destination has messages in hand
            else:
                assert series.name in labelled, series.name

        assert total(samples, "postwire_accepted_messages_total", path="rest") == 5
        assert total(samples, "postwire_accepted_messages_total", path="smtp") == 2
        outcomes = {c: total(samples, "postwire_delivery_outcomes_total", **{"class": c})
                    for c in ("2", "4", "5", "dns", "connection", "local")}  # fmt: skip
        assert outcomes == {"2": 5, "4": 1, "5": 1, "dns": 0, "connection": 0, "local": 0}
        # The deferred message waits for its retry; the others are finished.
        assert total(samples, "postwire_retry_backlog_messages") == 1
        assert by_destination(samples) == {"example.org": 1}
        age = "postwire_retry_backlog_destination_oldest_age_seconds"
        waited = {dict(ls)["destination"]: v for (n, ls), v in samples.items() if n == age}
        assert set(waited) == {"example.org"}
        assert 0 < waited["example.org"] < time.time() - started + 1
        assert total(samples, "postwire_queue_messages") == 1
        assert total(samples, "postwire_signing_seconds_count") == 7
        assert total(samples, "postwire_signing_seconds_bucket", le="+Inf") == 7
        assert 0 < total(samples, "postwire_signing_seconds_sum") < 7 * 5
        assert total(samples, "postwire_webhook_attempts_total", result="failed") == 0
        webhook_count = total(samples, "postwire_webhook_delivery_seconds_count")
        assert webhook_count == total(samples, "postwire_webhook_attempts_total") >= delivered
        assert total(samples, "postwire_webhook_backlog_messages") == 0
        used = total(samples, "postwire_spool_used_bytes")
        assert 0 < used < MAP_SIZE == total(samples, "postwire_spool_map_size_bytes")
        assert 0 < total(samples, "postwire_spool_file_bytes") < MAP_SIZE
        assert total(samples, "postwire_processes") == 1
        assert total(samples, "postwire_processes_alive") == 1
        assert set(by_process(samples, "postwire_process_start_time_seconds")) == {"0"}

        # Only /metrics, only GET (and HEAD).
        base = metrics_url(live).removesuffix("/metrics")
        assert httpx.get(base + "/", timeout=10).status_code == 404
        assert httpx.post(metrics_url(live), timeout=10).status_code == 405
        head = httpx.head(metrics_url(live), timeout=10)
        assert head.status_code == 200 and head.content == b""


def test_with_two_processes_both_are_counted(
    tmp_path: Path, dns_server: AuthoritativeDnsServer, receiver: ScriptedSmtpReceiver
) -> None:
    with relaying(tmp_path, dns_server, receiver, processes=2) as live:
        address = listener(live, "tls_listen")
        wait_for_smtp(address)
        token = live.create_key("relay", permission="sending_access")
        wait_until(
            lambda: total(scrape(live)[1], "postwire_processes_alive") == 2,
            "the worker publishes its numbers",
        )
        # Sessions at once land in both processes (they accept from the same sockets); more
        # rounds until the worker has taken some.
        sent = 0
        accepted: dict[str, float] = {}
        for round_number in range(10):
            sent += send_in_parallel(address, token, f"round {round_number}")
            wait_for_accepted(live, sent)
            accepted = by_process(scrape(live)[1], "postwire_accepted_messages_total")
            if accepted.get("1", 0) > 0 and accepted.get("0", 0) > 0:
                break
        assert accepted.get("0", 0) > 0 and accepted.get("1", 0) > 0, accepted

        wait_until(lambda: len(receiver.received()) == sent, "every message delivered")

        def delivered_counted() -> bool:
            samples = scrape(live)[1]
            return total(samples, "postwire_delivery_outcomes_total", **{"class": "2"}) == sent

        wait_until(delivered_counted, "every process's deliveries published")
        _, samples = scrape(live)
        assert total(samples, "postwire_accepted_messages_total", path="smtp") == sent
        assert total(samples, "postwire_signing_seconds_count") == sent
        assert set(by_process(samples, "postwire_signing_seconds_count")) == {"0", "1"}
        assert set(by_process(samples, "postwire_process_start_time_seconds")) == {"0", "1"}
        assert total(samples, "postwire_processes") == 2
        assert total(samples, "postwire_processes_alive") == 2
        accepted_before = by_process(samples, "postwire_accepted_messages_total")

        # A worker killed and started again: its series start over from zero (a counter reset
        # to Prometheus) under a new start time; the first process's are untouched.
        assert live.process is not None
        (worker,) = children_of(live.process.pid)
        started = by_process(samples, "postwire_process_start_time_seconds")
        os.kill(worker, signal.SIGKILL)

        def restarted() -> bool:
            now = by_process(scrape(live)[1], "postwire_process_start_time_seconds")
            return now.get("1", started["1"]) > started["1"]

        wait_until(restarted, "the worker started again and published")
        _, after = scrape(live)
        assert by_process(after, "postwire_process_start_time_seconds")["0"] == started["0"]
        accepted_after = by_process(after, "postwire_accepted_messages_total")
        assert accepted_after == {"0": accepted_before["0"], "1": 0}


def test_a_metrics_address_in_use_is_a_config_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        config = tmp_path / "postwire.toml"
        write_config(config, tmp_path / "data", metrics_listen=address)
        result = subprocess.run(
            [sys.executable, "-m", "postwire", "serve", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("POSTWIRE_")},
        )
    assert result.returncode == 2, result.stderr
    port = address.rpartition(":")[2]
    expected = (
        f"cannot listen on {address}: port {port} is already in use by another program "
        "(asked for by config key 'metrics.listen', environment variable POSTWIRE_METRICS_LISTEN)"
    )
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
