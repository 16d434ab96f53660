"""Delivery scenarios end to end inside one process: scheduled mail, a tarpitting site beside a
fast one, TLS policies, and MX records from a real DNS server. Every peer is real (the scripted
aiosmtpd receiver, Knot DNS) on loopback; mail is accepted through the API's path; the engine's
clock is a list the test moves. Nothing here measures time: tests count messages."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from postwire.store.accounts import contract_timestamp
from postwire.store.deliveries import DELIVERIES, email_attempts, email_events, is_suppressed
from postwire.store.emails import cancel_email, reschedule_email
from tests.dns_server import AuthoritativeDnsServer
from tests.integration.delivery_harness import TEAM, engine_for, received, route

# --- scheduled mail -----------------------------------------------------------------------------


async def test_scheduled_mail_waits_for_its_time_cancel_and_reschedule(
    tmp_path: Path, smtp_receiver
) -> None:
    receiver = smtp_receiver()
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        start = harness.clock[0]
        at = start + timedelta(hours=1)
        kept = await harness.send(["kept@example.org"], scheduled_at=at)
        canceled = await harness.send(["canceled@example.org"], scheduled_at=at)
        moved = await harness.send(["moved@example.org"], scheduled_at=at)
        assert [harness.last_event(i) for i in (kept, canceled, moved)] == ["scheduled"] * 3

        await harness.idle_rounds()
        assert await received(receiver) == [], "nothing goes before its time"
        assert receiver.transactions_seen == 0

        harness.clock[0] = start + timedelta(minutes=30)
        await cancel_email(harness.spool, harness.record(canceled), harness.now_ms())
        later = start + timedelta(hours=2)
        await reschedule_email(
            harness.spool,
            harness.record(moved),
            contract_timestamp(later),
            int(later.timestamp() * 1000),
            harness.now_ms(),
        )
        await harness.idle_rounds()
        assert await received(receiver) == []

        # Past the first time: only the kept email goes.
        harness.clock[0] = at + timedelta(minutes=1)
        harness.engine.wake()
        await harness.until(lambda: harness.last_event(kept) == "delivered")
        await harness.idle_rounds()
        assert [m.rcpt_tos for m in await received(receiver)] == [["kept@example.org"]]
        assert harness.last_event(canceled) == "canceled"
        assert harness.last_event(moved) == "scheduled"
        assert harness.events(canceled) == [] and harness.events(moved) == []

        # Past the new time: the rescheduled email goes; the canceled one never does.
        harness.clock[0] = later + timedelta(minutes=1)
        harness.engine.wake()
        await harness.until(lambda: harness.last_event(moved) == "delivered")
        await harness.idle_rounds()
        assert harness.events(moved) == ["email.sent", "email.delivered"]
        assert harness.last_event(canceled) == "canceled"
        assert harness.spool.message_body(canceled) is None
    rcpts = sorted(m.rcpt_tos[0] for m in await received(receiver))
    assert rcpts == ["kept@example.org", "moved@example.org"]


# --- a tarpit beside a fast site ----------------------------------------------------------------


async def test_a_tarpitting_site_does_not_slow_another(tmp_path: Path, smtp_receiver) -> None:
    slow = smtp_receiver(delay_data_end_seconds=3.0)
    fast = smtp_receiver()
    count = 4
    routes = {"slow.example": route(slow), "fast.example": route(fast)}
    async with engine_for(tmp_path, routes) as harness:
        # The slow site's mail is accepted first, so it is leased first.
        slow_ids = [await harness.send([f"a{i}@slow.example"]) for i in range(count)]
        fast_ids = [await harness.send([f"b{i}@fast.example"]) for i in range(count)]
        await harness.until(lambda: all(harness.last_event(i) == "delivered" for i in fast_ids))
        assert len(await received(fast)) == count
        slow_so_far = len(await received(slow))
        assert slow_so_far < count, "the fast site finished while the slow one still held mail"
        # The slow site has its mail in hand meanwhile: a transaction is open there.
        await harness.until(lambda: slow.transactions_seen >= 1)
        assert len(await received(slow)) < count
        # Let the rest through quickly; whatever is already in DATA finishes at its own pace.
        slow.script.delay_data_end_seconds = 0
        await harness.until(lambda: all(harness.last_event(i) == "delivered" for i in slow_ids))
    assert len(await received(slow)) == count


async def test_a_fast_domains_recipient_is_recorded_before_the_slow_one_answers(
    tmp_path: Path, smtp_receiver
) -> None:
    # One message to two domains: the fast one's delivery is committed when it answers, not
    # held until the slow one does (a crash meanwhile would send it to the fast one again).
    slow = smtp_receiver(delay_data_end_seconds=1.5)
    fast = smtp_receiver()
    routes = {"slow.example": route(slow), "fast.example": route(fast)}
    async with engine_for(tmp_path, routes) as harness:
        email_id = await harness.send(["ann@slow.example", "bob@fast.example"])
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        delivery = DELIVERIES.get(harness.spool, email_id)
        assert delivery is not None and delivery.finished == {"bob@fast.example": "delivered"}
        assert harness.events(email_id) == ["email.sent", "email.delivered"]
        assert len(await received(slow)) == 0, "the slow domain has not answered yet"
        (attempt,) = email_attempts(harness.spool, TEAM, email_id, harness.now_ms())
        assert attempt["status"] == "in_progress"
        await harness.until(lambda: harness.spool.message_body(email_id) is None)
        (attempt,) = email_attempts(harness.spool, TEAM, email_id, harness.now_ms())
        statuses = {r["email"]: r["status"] for r in attempt["recipients"]}
        assert statuses == {"ann@slow.example": "delivered", "bob@fast.example": "delivered"}
        assert harness.events(email_id) == ["email.sent", "email.delivered", "email.delivered"]


# --- TLS policies -------------------------------------------------------------------------------


async def test_enforced_tls_without_starttls_is_delayed_never_sent_in_clear(
    tmp_path: Path, smtp_receiver
) -> None:
    receiver = smtp_receiver()
    async with engine_for(tmp_path, {"example.org": route(receiver)}, tls="enforced") as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: harness.last_event(email_id) == "delivery_delayed")
        assert harness.events(email_id) == ["email.sent", "email.delivery_delayed"]
        (delayed,) = [
            e for e in email_events(harness.spool, TEAM, email_id)
            if e.type == "email.delivery_delayed"
        ]  # fmt: skip
        assert "tls" in delayed.data["diagnostic"].lower()
        state = harness.spool.message_state(email_id)
        assert state is not None and state.attempts == 1, "kept for a retry"
    assert await received(receiver) == []
    assert receiver.transactions_seen == 0, "no MAIL FROM in clear"


async def test_enforced_tls_with_an_unverifiable_certificate_is_delayed(
    tmp_path: Path, smtp_receiver
) -> None:
    receiver = smtp_receiver(starttls=True)
    async with engine_for(tmp_path, {"example.org": route(receiver)}, tls="enforced") as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: harness.last_event(email_id) == "delivery_delayed")
        assert harness.events(email_id) == ["email.sent", "email.delivery_delayed"]
        assert harness.spool.message_state(email_id) is not None
    assert await received(receiver) == []
    assert receiver.transactions_seen == 0


async def test_opportunistic_tls_delivers_over_starttls(tmp_path: Path, smtp_receiver) -> None:
    receiver = smtp_receiver(starttls=True)
    async with engine_for(tmp_path, {"example.org": route(receiver)}) as harness:
        email_id = await harness.send(["ann@example.org"])
        await harness.until(lambda: harness.last_event(email_id) == "delivered")
        assert [connection.tls_active for _, _, connection in harness.connections] == [True]
    (message,) = await received(receiver)
    assert message.rcpt_tos == ["ann@example.org"]


# --- MX records from a real DNS server ----------------------------------------------------------


async def test_mx_from_dns_null_mx_and_nxdomain(
    tmp_path: Path, smtp_receiver, dns_server: AuthoritativeDnsServer
) -> None:
    receiver = smtp_receiver()
    dns_server.publish("mx-example.test", "MX", "10 mx1.mx-example.test.")
    dns_server.publish("mx1.mx-example.test", "A", "127.0.0.1")
    dns_server.publish("nullmx-example.test", "MX", "0 .")
    dns_server.publish("nullmx-example.test", "A", "127.0.0.1")  # no implicit MX either
    environ = {
        "POSTWIRE_DNS_NAMESERVERS": dns_server.nameserver,
        "POSTWIRE_DELIVERY_PORT": str(receiver.port),
        "POSTWIRE_DELIVERY_ALLOW_PRIVATE_DESTINATIONS": "true",  # the receiver is on loopback
    }
    async with engine_for(tmp_path, environ=environ) as harness:
        delivered = await harness.send(["ann@mx-example.test"])
        await harness.until(lambda: harness.last_event(delivered) == "delivered")
        assert [(host, port) for host, port, _ in harness.connections] == [
            ("mx1.mx-example.test", receiver.port)
        ]

        for address in ("bob@nullmx-example.test", "eve@nowhere-example.test"):
            email_id = await harness.send([address])
            await harness.until(lambda: harness.last_event(email_id) == "bounced")  # noqa: B023
            events = email_events(harness.spool, TEAM, email_id)
            assert [event.type for event in events] == ["email.sent", "email.bounced"]
            assert events[1].data["bounce"]["type"] == "Permanent", address
            assert harness.spool.message_body(email_id) is None, "finished, not retried"
        assert len(harness.connections) == 1, "no connection for a null MX or NXDOMAIN"
    (message,) = await received(receiver)
    assert message.rcpt_tos == ["ann@mx-example.test"]


async def test_mx_and_addresses_leading_to_this_host_are_refused_by_default(
    tmp_path: Path, smtp_receiver, dns_server: AuthoritativeDnsServer
) -> None:
    receiver = smtp_receiver()
    dns_server.publish("mx-example.test", "MX", "10 mx1.mx-example.test.")
    dns_server.publish("mx1.mx-example.test", "A", "127.0.0.1")
    dns_server.publish("v6-example.test", "AAAA", "::1")  # an implicit MX on loopback
    dns_server.publish("routed-example.test", "MX", "10 mx1.mx-example.test.")
    environ = {
        "POSTWIRE_DNS_NAMESERVERS": dns_server.nameserver,
        "POSTWIRE_DELIVERY_PORT": str(receiver.port),
    }
    routes = {"routed-example.test": route(receiver)}  # the operator's route is trusted
    async with engine_for(tmp_path, routes, environ=environ) as harness:
        for address in ("ann@mx-example.test", "bob@v6-example.test"):
            email_id = await harness.send([address])
            await harness.until(lambda: harness.last_event(email_id) == "bounced")  # noqa: B023
            events = email_events(harness.spool, TEAM, email_id)
            assert [event.type for event in events] == ["email.sent", "email.bounced"]
            bounce = events[1].data["bounce"]
            assert bounce["type"] == "Transient", "Postwire's refusal suppresses nobody"
            assert bounce["message"].startswith("Postwire did not send the email: mail for ")
            (diagnostic,) = bounce["diagnosticCode"]
            assert diagnostic.startswith("local; ") and "loopback" in diagnostic, diagnostic
            assert not is_suppressed(harness.spool, TEAM, address)
        routed = await harness.send(["cat@routed-example.test"])
        await harness.until(lambda: harness.last_event(routed) == "delivered")
    assert [host for host, _, _ in harness.connections] == [receiver.host], "the route alone"
    (message,) = await received(receiver)
    assert message.rcpt_tos == ["cat@routed-example.test"]
