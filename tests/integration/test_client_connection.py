"""The outbound SMTP client against real peers on loopback: a scripted aiosmtpd receiver and
Postfix's smtp-sink.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable

import pytest
import trio

from postwire.errors import ConnectionFailed, InvalidCommandArgument, SmtpTimeout, TlsRequired
from postwire.smtp.client_connection import (
    SmtpConnection,
    Timeouts,
    TlsPolicy,
    open_smtp_connection,
)
from tests.smtp_receiver import ScriptedSmtpReceiver

StartReceiver = Callable[..., ScriptedSmtpReceiver]

# Dots at line starts, a lone "." line, 8-bit bytes, no final CRLF: all must arrive as sent.
BODY = (
    b"From: a@x.test\r\nTo: b@y.test\r\nSubject: bytes\r\n\r\n"
    b".leading dot\r\n.\r\n..two\r\ncaf\xc3\xa9\r\nlast line without CRLF"
)
SHORT = Timeouts(connect=5, greeting=5, ehlo=5, tls_handshake=5, mail=5, rcpt=5, data_initiation=5,
                 data_block=5, final_dot=5, quit=2)  # fmt: skip


def permissive_or_default(verify: bool) -> ssl.SSLContext:
    """Opportunistic: accept the self-signed certificate; enforced: the system's trust store."""
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


async def connect(
    receiver: ScriptedSmtpReceiver,
    tls_policy: TlsPolicy = "opportunistic",
    timeouts: Timeouts = SHORT,
    host: str = "mx.example.test",
) -> SmtpConnection:
    return await open_smtp_connection(
        host,
        receiver.port,
        helo_name="client.example.test",
        tls_policy=tls_policy,
        ssl_context_factory=permissive_or_default,
        timeouts=timeouts,
        connect_address=receiver.host,
    )


async def test_message_arrives_byte_for_byte(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver()
    connection = await connect(receiver)
    assert connection.capabilities is not None and connection.capabilities.pipelining
    transaction = await connection.send_message("a@x.test", ["b@y.test", "c@y.test"], BODY)
    await connection.quit()
    assert transaction.accepted == ["b@y.test", "c@y.test"]
    (message,) = receiver.received()
    assert message.mail_from == "a@x.test" and message.rcpt_tos == ["b@y.test", "c@y.test"]
    assert message.content == BODY + b"\r\n"  # only the missing final CRLF was added
    assert "BODY=8BITMIME" in message.mail_options


async def test_mixed_recipients_pipelined_and_not(smtp_receiver: StartReceiver) -> None:
    for pipelining in (True, False):
        receiver = smtp_receiver(
            pipelining=pipelining,
            refuse_recipients={"nobody@y.test": "550 5.1.1 <nobody@y.test>: no such user"},
        )
        connection = await connect(receiver)
        assert connection.capabilities is not None
        assert connection.capabilities.pipelining is pipelining
        transaction = await connection.send_message(
            "a@x.test", ["ok@y.test", "nobody@y.test", "ok2@y.test"], b"Subject: x\r\n\r\nhi\r\n"
        )
        await connection.quit()
        assert transaction.accepted == ["ok@y.test", "ok2@y.test"]
        ((address, reply),) = transaction.refused
        assert address == "nobody@y.test"
        assert reply.code == 550 and reply.enhanced == (5, 1, 1) and reply.is_permanent
        assert receiver.received()[0].rcpt_tos == ["ok@y.test", "ok2@y.test"]


async def test_all_recipients_refused_sends_nothing(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver(refuse_recipients={"x@y.test": "550 5.1.1 unknown"})
    connection = await connect(receiver)
    transaction = await connection.send_message("a@x.test", ["x@y.test"], b"body\r\n")
    await connection.quit()
    assert transaction.accepted == [] and transaction.refused[0][1].enhanced == (5, 1, 1)
    assert receiver.received() == []


async def test_deferred_then_accepted_on_the_same_connection(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver(defer_first_transactions=1)
    connection = await connect(receiver)
    first = await connection.send_message("a@x.test", ["b@y.test"], b"one\r\n")
    ((_, reply),) = first.refused
    assert reply.is_transient and reply.enhanced == (4, 3, 2)
    second = await connection.send_message("a@x.test", ["b@y.test"], b"two\r\n")  # after RSET
    await connection.quit()
    assert second.accepted == ["b@y.test"]
    assert [m.content for m in receiver.received()] == [b"two\r\n"]
    assert receiver.rsets_seen == 1


async def test_messages_after_a_completed_one_need_no_rset(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver()
    connection = await connect(receiver)
    for number in range(3):
        transaction = await connection.send_message("a@x.test", ["b@y.test"], b"%d\r\n" % number)
        assert transaction.accepted == ["b@y.test"]
    await connection.quit()
    assert [m.content for m in receiver.received()] == [b"0\r\n", b"1\r\n", b"2\r\n"]
    assert receiver.rsets_seen == 0


async def test_opportunistic_starttls_with_self_signed_certificate(
    smtp_receiver: StartReceiver,
) -> None:
    receiver = smtp_receiver(starttls=True)
    connection = await connect(receiver, "opportunistic")
    assert connection.tls_active
    transaction = await connection.send_message("a@x.test", ["b@y.test"], BODY)
    await connection.quit()
    assert transaction.accepted == ["b@y.test"]
    assert receiver.received()[0].content == BODY + b"\r\n"


async def test_policy_none_stays_in_clear(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver(starttls=True)
    connection = await connect(receiver, "none")
    assert not connection.tls_active
    await connection.quit()


async def test_enforced_tls_without_starttls_fails(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver(starttls=False)
    with pytest.raises(TlsRequired) as caught:
        await connect(receiver, "enforced")
    assert caught.value.transient


async def test_enforced_tls_with_unverifiable_certificate_fails(
    smtp_receiver: StartReceiver,
) -> None:
    receiver = smtp_receiver(starttls=True)
    with pytest.raises(TlsRequired, match="certificate"):
        await connect(receiver, "enforced")
    assert receiver.received() == []


async def test_slow_receiver_times_out(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver(delay_mail_seconds=2)
    connection = await connect(receiver, timeouts=Timeouts(mail=0.2, quit=0.5))
    with pytest.raises(SmtpTimeout) as caught:
        await connection.send_message("a@x.test", ["b@y.test"], b"x\r\n")
    assert caught.value.phase == "mail" and caught.value.transient
    assert not connection.usable


async def test_slow_final_reply_times_out(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver(delay_data_end_seconds=2)
    connection = await connect(receiver, timeouts=Timeouts(final_dot=0.2, quit=0.5))
    with pytest.raises(SmtpTimeout) as caught:
        await connection.send_message("a@x.test", ["b@y.test"], b"x\r\n")
    assert caught.value.phase == "final dot"


async def test_hang_up_mid_data_is_transient(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver(hang_up_after_354=True)
    connection = await connect(receiver)
    with pytest.raises(ConnectionFailed) as caught:
        await connection.send_message("a@x.test", ["b@y.test"], b"x\r\n" * 1000)
    assert caught.value.transient
    assert not connection.usable


async def test_injected_address_refused_and_connection_kept(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver()
    connection = await connect(receiver)
    with pytest.raises(InvalidCommandArgument):
        await connection.send_message("a@x.test", ["b@y.test>\r\nRCPT TO:<evil@z.test"], b"x")
    transaction = await connection.send_message("a@x.test", ["b@y.test"], b"x\r\n")
    await connection.quit()
    assert transaction.accepted == ["b@y.test"]
    assert receiver.received()[0].rcpt_tos == ["b@y.test"]


async def test_utf8_recipients_need_smtputf8_at_the_server(smtp_receiver: StartReceiver) -> None:
    recipients = ["ann@y.test", "josé@y.test", "bob@y.test"]
    plain = await connect(smtp_receiver(smtputf8=False))
    transaction = await plain.send_message("a@x.test", recipients, b"x\r\n")
    # Never offered to a server without SMTPUTF8: refused by Postwire, the others sent.
    assert transaction.accepted == ["ann@y.test", "bob@y.test"]
    ((address, refusal),) = transaction.refused_locally
    assert (address, refusal.enhanced) == ("josé@y.test", (5, 6, 7))
    alone = await plain.send_message("a@x.test", ["josé@y.test"], b"x\r\n")
    assert alone.mail_reply is None and len(alone.refused_locally) == 1
    await plain.quit()

    utf8 = smtp_receiver()
    connection = await connect(utf8)
    transaction = await connection.send_message("a@x.test", recipients, b"x\r\n")
    await connection.quit()
    assert transaction.accepted == recipients and not transaction.refused_locally
    (received,) = utf8.received()
    assert received.rcpt_tos == recipients
    assert "SMTPUTF8" in received.mail_options


async def test_helo_fallback(smtp_receiver: StartReceiver) -> None:
    receiver = smtp_receiver(refuse_ehlo=True)
    connection = await connect(receiver)
    assert connection.capabilities is None  # HELO: no extensions
    transaction = await connection.send_message("a@x.test", ["b@y.test"], b"plain\r\n")
    await connection.quit()
    assert transaction.accepted == ["b@y.test"]
    assert receiver.received()[0].mail_options == []


async def test_silent_server_greeting_times_out() -> None:
    async def accept_and_say_nothing(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, accept_and_say_nothing, 0, host="127.0.0.1")
        )
        listener = listeners[0]
        receiver = ScriptedSmtpReceiver()
        receiver.port = listener.socket.getsockname()[1]
        with pytest.raises(SmtpTimeout) as caught:
            await connect(receiver, timeouts=Timeouts(greeting=0.2))
        assert caught.value.phase == "greeting"
        nursery.cancel_scope.cancel()


async def test_connection_refused_is_transient() -> None:
    receiver = ScriptedSmtpReceiver()
    receiver.port = 1  # nothing listens on loopback port 1
    with pytest.raises(ConnectionFailed) as caught:
        await connect(receiver)
    assert caught.value.transient


async def test_several_messages_through_postfix_smtp_sink(smtp_sink: tuple[str, int]) -> None:
    host, port = smtp_sink
    connection = await open_smtp_connection(
        "localhost",
        port,
        helo_name="client.example.test",
        tls_policy="opportunistic",
        timeouts=SHORT,
        connect_address=host,
    )
    capabilities = connection.capabilities
    assert capabilities is not None and capabilities.pipelining
    for number in range(5):
        body = b"Subject: %d\r\n\r\n.dot line\r\n.\r\nbody %d\r\n" % (number, number)
        transaction = await connection.send_message(
            "a@x.test", [f"r{number}@y.test", "other@y.test"], body
        )
        assert transaction.accepted == [f"r{number}@y.test", "other@y.test"]
        assert transaction.message_reply is not None and transaction.message_reply.code == 250
    await connection.quit()
