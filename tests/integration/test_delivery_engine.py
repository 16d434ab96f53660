"""The delivery engine against a real SMTP peer on loopback (the scripted aiosmtpd receiver),
with mail accepted through the same path as the API and routed by `delivery.routes`."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dkim
import pytest
import trio

from postwire.config import load_config
from postwire.errors import SpoolFullError
from postwire.inbound.apply import apply_report, load_return_path_key
from postwire.inbound.reports import parse_report
from postwire.inbound.verp import verp_address
from postwire.store.accounts import contract_timestamp
from postwire.store.deliveries import email_attempts, email_events, is_suppressed
from postwire.store.retry_waiting import oldest_waiting_ms
from tests.integration.delivery_harness import TEAM, engine_for, received, route

DATA = Path(__file__).parent.parent / "data"
SAMPLE_VERP = "bounces+0192f0a4-7b3c-7d2e-8f10-1a2b3c4d5e6f@send.sender.test"


async def test_delivered_bytes_verify_with_dkimpy(tmp_path: Path, smtp_receiver) -> None:
    receiver = smtp_receiver()
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        email_id = await harness.send(["ann@example.org", "bob@example.org"])
        body = harness.spool.message_body(email_id)
        secret = await harness.acceptor.return_path_secret()
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        assert harness.events(email_id) == ["email.sent", "email.delivered", "email.delivered"]
        assert harness.spool.message_body(email_id) is None, "acked once everyone has it"
    (received,) = await trio.to_thread.run_sync(receiver.received)
    assert received.content == body, "the bytes on the wire are exactly the signed bytes"
    assert received.mail_from == verp_address(secret, email_id, "send.sender.test")
    assert sorted(received.rcpt_tos) == ["ann@example.org", "bob@example.org"]
    txt = harness.domain.dkim_dns_txt.encode()
    assert dkim.verify(received.content, dnsfunc=lambda name, timeout=5: txt)


async def test_a_bounce_reported_during_delivery_is_not_hidden(
    tmp_path: Path, smtp_receiver
) -> None:
    # The recipient's server takes its time to accept; meanwhile a DSN about the email comes
    # back (as when another of its servers accepted and then failed to deliver).
    receiver = smtp_receiver(delay_data_end_seconds=1.0)
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        email_id = await harness.send(["ann@example.org"])
        verp = harness.record(email_id).envelope_from
        await harness.until(lambda: email_id in harness.engine.in_hand)
        sample = (DATA / "inbound" / "postfix-failed.eml").read_bytes()
        report = parse_report(sample.replace(SAMPLE_VERP.encode(), verp.encode()))
        assert report is not None
        key = await load_return_path_key(harness.spool, load_config(None, {}))
        assert await apply_report(harness.spool, key, report, verp, harness.now_ms()) is not None
        assert harness.last_event(email_id) == "bounced"
        await harness.until(lambda: harness.spool.message_body(email_id) is None)
        assert harness.events(email_id) == ["email.bounced", "email.sent", "email.delivered"]
        assert harness.last_event(email_id) == "bounced"


async def test_mixed_outcomes_bounce_and_suppress(tmp_path: Path, smtp_receiver) -> None:
    receiver = smtp_receiver(refuse_recipients={"gone@example.org": "550 5.1.1 No such user"})
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        email_id = await harness.send(["ann@example.org", "gone@example.org"])
        await harness.until(lambda: harness.spool.message_body(email_id) is None)
        events = email_events(harness.spool, TEAM, email_id)
        bounced = next(event for event in events if event.type == "email.bounced")
        assert bounced.data["to"] == "gone@example.org"
        assert bounced.data["bounce"]["type"] == "Permanent"
        assert "5.1.1" in bounced.data["bounce"]["diagnosticCode"][0]
        assert "email.delivered" in [event.type for event in events]
        assert is_suppressed(harness.spool, TEAM, "Gone@example.org")

        again = await harness.send(["gone@example.org"], subject="Again")
        await harness.until(lambda: harness.last_event(again) == "suppressed")
    assert len(await trio.to_thread.run_sync(receiver.received)) == 1, "no attempt to suppressed"


async def test_temporary_failure_is_retried_on_schedule(tmp_path: Path, smtp_receiver) -> None:
    receiver = smtp_receiver(defer_first_transactions=1)
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: harness.last_event(email_id) == "delivery_delayed")
        state = harness.spool.message_state(email_id)
        assert state is not None and state.attempts == 1
        # It waits in example.org's retry queue, under the time it was accepted.
        assert oldest_waiting_ms(harness.spool, "example.org") == state.enqueued_at_ms
        first_try = harness.clock[0]
        # The retry is due about five minutes later; nothing happens before that.
        assert state.due_at_ms >= int((first_try + timedelta(minutes=5)).timestamp() * 1000)
        harness.clock[0] = first_try + timedelta(minutes=6)
        harness.engine.wake()
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        assert harness.events(email_id) == [
            "email.sent",
            "email.delivery_delayed",
            "email.delivered",
        ]
        assert oldest_waiting_ms(harness.spool, "example.org") is None  # left with the ack
    assert len(await trio.to_thread.run_sync(receiver.received)) == 1


async def test_an_expired_lease_in_hand_is_renewed_not_redelivered(
    tmp_path: Path, smtp_receiver, monkeypatch
) -> None:
    # A lease far shorter than the delivery: the loop sees the message due again while it is
    # still being sent, and must only renew the lease.
    monkeypatch.setattr("postwire.delivery.engine.LEASE_MS", 100)
    receiver = smtp_receiver(delay_data_end_seconds=1.0)
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: email_id in harness.engine.in_hand)
        first_token = harness.engine.in_hand[email_id]
        harness.clock[0] += timedelta(seconds=1)  # the lease has now expired
        harness.engine.wake()
        in_hand = harness.engine.in_hand
        await harness.until(lambda: in_hand.get(email_id, first_token) != first_token)
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        assert harness.spool.message_body(email_id) is None, "acked with the renewed lease"
        assert harness.events(email_id) == ["email.sent", "email.delivered"]
        attempts = email_attempts(harness.spool, TEAM, email_id, harness.now_ms())
        assert [a["status"] for a in attempts] == ["completed"], "one attempt, not interrupted"
    assert len(await trio.to_thread.run_sync(receiver.received)) == 1


async def test_a_full_spool_drains_and_accepts_again(tmp_path: Path, smtp_receiver) -> None:
    # Fill a small spool with mail scheduled for later (so nothing leaves meanwhile) until
    # intake is refused; then let it all fall due. Delivery must be able to record every
    # outcome and ack (the spool keeps a reserve for that), so it drains, each message once.
    receiver = smtp_receiver()
    route_map = {"example.org": route(receiver)}
    async with engine_for(tmp_path, route_map, map_size=2 << 20) as harness:
        later = harness.clock[0] + timedelta(hours=1)
        accepted: list[str] = []
        with pytest.raises(SpoolFullError):
            while len(accepted) < 1000:
                text = secrets.token_hex(4096)  # incompressible: 8 KiB a message
                to = [f"r{len(accepted)}@example.org"]
                accepted.append(await harness.send(to, scheduled_at=later, text=text))
        assert len(accepted) > 20

        harness.clock[0] = later + timedelta(seconds=1)
        harness.engine.wake()
        await harness.until(lambda: harness.spool.core.message_count() == 0)
        assert {harness.last_event(email_id) for email_id in accepted} == {"delivered"}
        again = await harness.send(["again@example.org"], text=secrets.token_hex(4096))
        await harness.until(lambda: harness.last_event(again) == "delivered")
    # The envelope sender names the email: bounces+{id}-{mac}@send.sender.test.
    delivered = [m.mail_from.removeprefix("bounces+")[:36] for m in await received(receiver)]
    assert sorted(delivered) == sorted([*accepted, again]), "each message delivered once"


async def test_an_attempt_in_progress_shows_on_the_email(tmp_path: Path) -> None:
    # The recipient's server accepts the connection and never greets: the email stays
    # `queued`, and its attempts say one is in progress, and since when.
    silent: list[trio.SocketStream] = []
    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]

        async def hold_connections() -> None:
            while True:
                silent.append(await listener.accept())

        nursery.start_soon(hold_connections)
        async with engine_for(tmp_path, {"example.org": f"127.0.0.1:{port}"}) as harness:
            email_id = await harness.send(["ann@example.org"])
            await harness.until(lambda: bool(silent))
            (attempt,) = email_attempts(harness.spool, TEAM, email_id, harness.now_ms())
            assert harness.last_event(email_id) == "queued"
            assert attempt["status"] == "in_progress" and attempt["number"] == 1
            started = datetime.fromtimestamp(harness.now_ms() / 1000, UTC)  # to the ms
            assert attempt["started_at"] == contract_timestamp(started)
            assert not attempt["redelivery"] and attempt["finished_at"] is None

            for stream in silent:  # the server hangs up: the attempt ends, to be retried
                await stream.aclose()
            await harness.until(lambda: harness.last_event(email_id) == "delivery_delayed")
            (attempt,) = email_attempts(harness.spool, TEAM, email_id, harness.now_ms())
            assert attempt["status"] == "completed" and attempt["finished_at"] is not None
            (recipient,) = attempt["recipients"]
            assert recipient["email"] == "ann@example.org"
            assert recipient["status"] == "delivery_delayed"
        nursery.cancel_scope.cancel()
