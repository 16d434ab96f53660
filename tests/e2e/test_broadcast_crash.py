"""A live `postwire serve` killed with SIGKILL again and again while it walks a broadcast of a
few thousand contacts, restarted on the same data each time: the walk resumes after the last
page it committed, so in the end every member has exactly one email (none twice, none
skipped), the unsubscribed ones none, and the counts agree with what the spool holds (read
with the independent `lmdb` package)."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, serving, verified_domain, wait_until
from tests.e2e.test_broadcasts import member_email, seed_audience
from tests.peers import require_peer
from tests.ports import free_address
from tests.smtp_sink import running_smtp_sink, smtp_sink_binary
from tests.store_backends import table_rows

MEMBERS = 3000
UNSUBSCRIBED = range(0, 30)
# Kill the server once the walk has enqueued this many messages, each time.
KILL_AFTER = (300, 1100, 1900)


@pytest.fixture
def crash_server(tmp_path: Path, dns_server: AuthoritativeDnsServer) -> Iterator[LiveServer]:
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    with (
        running_smtp_sink() as (host, port),
        serving(
            tmp_path,
            dns_server,
            routes={"example.org": f"{host}:{port}"},
            api_listen=free_address(),
        ) as live,
    ):
        yield live


def spool_rows(data_dir: Path, table: str, prefix: bytes) -> list[tuple[bytes, bytes]]:
    return table_rows(data_dir, table, prefix)


def queued(broadcast_id: str) -> int:
    counts: dict[str, Any] = resend.Broadcasts.get(broadcast_id)["counts"]  # type: ignore[assignment]
    return int(counts["queued"])


def test_sigkill_during_a_broadcast_mails_every_member_exactly_once(
    crash_server: LiveServer, dns_server: AuthoritativeDnsServer
) -> None:
    verified_domain(dns_server)
    token = str(resend.api_key)
    crash_server.stop()
    audience = seed_audience(crash_server, token, MEMBERS, unsubscribed=UNSUBSCRIBED)
    # Pages of 50 at 1,500 a second: each kill lands somewhere inside the walk.
    with crash_server.config_path.open("a") as config:
        config.write("\n[broadcasts]\nrate = 1500\npage_size = 50\n")
    crash_server.start()
    created = resend.Broadcasts.create(
        {"segment_id": audience.segment_id, "from": f"News <news@{DOMAIN}>",
         "subject": "Hi {{{FIRST_NAME|there}}}", "text": "Hello {{{EMAIL}}}", "send": True}
    )  # fmt: skip
    broadcast_id = created["id"]
    kills = 0
    for threshold in KILL_AFTER:
        wait_until(lambda t=threshold: queued(broadcast_id) >= t, f"{threshold} enqueued")  # type: ignore[misc]
        if resend.Broadcasts.get(broadcast_id)["status"] == "sent":
            break
        assert crash_server.stop(signal.SIGKILL) == -signal.SIGKILL
        kills += 1
        crash_server.start()
    assert kills >= 2, "the walk ended before the server could be killed twice"
    wait_until(lambda: resend.Broadcasts.get(broadcast_id)["status"] == "sent", "sent", timeout=120)
    done: dict[str, Any] = dict(resend.Broadcasts.get(broadcast_id))
    crash_server.stop()

    expected = {member_email(n) for n in range(MEMBERS) if n not in UNSUBSCRIBED}
    emails = [json.loads(raw) for _, raw in spool_rows(crash_server.data_dir, "emails", b"")]
    mailed = Counter(e["to"][0] for e in emails if e.get("broadcast_id") == broadcast_id)
    assert set(mailed) == expected  # none skipped, none of the unsubscribed
    assert [address for address, n in mailed.items() if n > 1] == []  # none twice
    team_id = next(e["team_id"] for e in emails if e.get("broadcast_id") == broadcast_id)

    outcomes = spool_rows(
        crash_server.data_dir,
        "broadcast_recipients",
        f"{team_id}/{broadcast_id}/contact/".encode(),
    )
    statuses = Counter(json.loads(raw)["status"] for _, raw in outcomes)
    assert statuses == {"queued": len(expected), "skipped_unsubscribed": len(UNSUBSCRIBED)}
    counts = done["counts"]
    assert (counts["queued"], counts["skipped_unsubscribed"]) == (len(expected), len(UNSUBSCRIBED))
    assert counts["failed"] == counts["suppressed"] == counts["skipped_topic"] == 0
