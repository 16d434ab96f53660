"""The sans-IO SMTP client: scripted server bytes in, events and command bytes out."""

from __future__ import annotations

import base64

import pytest

from postwire.errors import InvalidCommandArgument
from postwire.smtp.client_protocol import (
    MAX_REPLY_LINE,
    NEED_DATA,
    Capabilities,
    ConnectionClosed,
    EhloReply,
    Event,
    Greeting,
    MalformedReply,
    Reply,
    SmtpClientProtocol,
    dot_stuff,
    needing_smtputf8,
)

EHLO_REPLY = (
    b"250-mx.example.test Hello\r\n"
    b"250-PIPELINING\r\n"
    b"250-SIZE 10240000\r\n"
    b"250-8BITMIME\r\n"
    b"250-SMTPUTF8\r\n"
    b"250-ENHANCEDSTATUSCODES\r\n"
    b"250-STARTTLS\r\n"
    b"250-AUTH PLAIN LOGIN\r\n"
    b"250 AUTH=CRAM-MD5\r\n"
)


def feed(protocol: SmtpClientProtocol, data: bytes) -> list[Event]:
    protocol.receive_data(data)
    events: list[Event] = []
    while (event := protocol.next_event()) is not NEED_DATA:
        events.append(event)
        if isinstance(event, MalformedReply | ConnectionClosed):
            break
    return events


def ready_session(ehlo_reply: bytes = EHLO_REPLY) -> SmtpClientProtocol:
    protocol = SmtpClientProtocol()
    assert feed(protocol, b"220 mx.example.test ESMTP\r\n") == [
        Greeting(Reply(220, None, ["mx.example.test ESMTP"]))
    ]
    assert protocol.ehlo("client.example.test") == b"EHLO client.example.test\r\n"
    (event,) = feed(protocol, ehlo_reply)
    assert isinstance(event, EhloReply) and event.capabilities is not None
    return protocol


def test_greeting_arrives_in_pieces() -> None:
    protocol = SmtpClientProtocol()
    assert feed(protocol, b"220 mx.exa") == []
    assert feed(protocol, b"mple.test\r") == []
    (event,) = feed(protocol, b"\n")
    assert event == Greeting(Reply(220, None, ["mx.example.test"]))


def test_ehlo_multiline_capabilities() -> None:
    protocol = ready_session()
    capabilities = protocol.capabilities
    assert capabilities is not None
    assert capabilities.pipelining and capabilities.eight_bit_mime and capabilities.smtputf8
    assert capabilities.enhanced_status_codes and capabilities.starttls
    assert capabilities.size == 10240000
    assert capabilities.auth_mechanisms == {"PLAIN", "LOGIN", "CRAM-MD5"}
    assert protocol.session_ready


def test_minimal_ehlo_has_no_extensions() -> None:
    protocol = ready_session(b"250 mx.example.test\r\n")
    assert protocol.capabilities is not None
    assert not protocol.capabilities.pipelining
    assert protocol.capabilities.size is None
    assert protocol.capabilities.auth_mechanisms == frozenset()


def test_helo_fallback_after_ehlo_refused() -> None:
    protocol = SmtpClientProtocol()
    feed(protocol, b"220 old.example.test\r\n")
    protocol.ehlo("client.example.test")
    (event,) = feed(protocol, b"502 5.5.1 Command not implemented\r\n")
    assert isinstance(event, EhloReply) and event.capabilities is None
    assert event.reply.code == 502 and event.reply.enhanced == (5, 5, 1)
    assert not protocol.session_ready
    assert protocol.helo("client.example.test") == b"HELO client.example.test\r\n"
    (reply,) = feed(protocol, b"250 old.example.test\r\n")
    assert isinstance(reply, Reply) and reply.is_positive
    assert protocol.session_ready and protocol.capabilities is None
    # No ESMTP: no SIZE or BODY parameters.
    assert protocol.mail_from("a@x.test", ["b@y.test"], size=100, body_8bit=True) == (
        b"MAIL FROM:<a@x.test>\r\n"
    )


def test_pipelined_transaction_with_mixed_recipients() -> None:
    protocol = ready_session()
    recipients = ["ok1@y.test", "nobody@y.test", "later@y.test", "ok2@y.test"]
    sent = protocol.mail_from("a@x.test", recipients, size=1234, body_8bit=True)
    sent += b"".join(protocol.rcpt_to(r) for r in recipients) + protocol.data()
    assert sent == (
        b"MAIL FROM:<a@x.test> SIZE=1234 BODY=8BITMIME\r\n"
        b"RCPT TO:<ok1@y.test>\r\nRCPT TO:<nobody@y.test>\r\nRCPT TO:<later@y.test>\r\n"
        b"RCPT TO:<ok2@y.test>\r\nDATA\r\n"
    )
    assert protocol.replies_pending == 6
    events = feed(
        protocol,
        b"250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n550 5.1.1 <nobody@y.test>: User unknown\r\n"
        b"450 4.2.0 <later@y.test>: Greylisted\r\n250 2.1.5 Ok\r\n354 End data with .\r\n",
    )
    assert [e.code for e in events if isinstance(e, Reply)] == [250, 250, 550, 450, 250, 354]
    assert protocol.message(b"Subject: hi\r\n\r\nbody\r\n") == b"Subject: hi\r\n\r\nbody\r\n.\r\n"
    feed(protocol, b"250 2.0.0 Ok: queued as ABC\r\n")
    transaction = protocol.transaction
    assert transaction is not None and transaction.is_complete
    assert transaction.accepted == ["ok1@y.test", "ok2@y.test"]
    refused = {address: reply for address, reply in transaction.refused}
    assert refused["nobody@y.test"].enhanced == (5, 1, 1)
    assert refused["nobody@y.test"].is_permanent
    assert refused["later@y.test"].is_transient
    assert transaction.message_reply is not None and transaction.message_reply.code == 250


def test_mail_refused_decides_every_recipient() -> None:
    protocol = ready_session()
    sent = protocol.mail_from("a@x.test", ["b@y.test", "c@y.test"])
    sent += protocol.rcpt_to("b@y.test") + protocol.rcpt_to("c@y.test") + protocol.data()
    feed(
        protocol,
        b"451 4.3.0 Try later\r\n503 5.5.1 need MAIL\r\n503 5.5.1 need MAIL\r\n"
        b"503 5.5.1 need RCPT\r\n",
    )
    transaction = protocol.transaction
    assert transaction is not None and transaction.accepted == []
    assert [(a, r.code) for a, r in transaction.refused] == [("b@y.test", 451), ("c@y.test", 451)]


def test_final_dot_refusal_refuses_accepted_recipients() -> None:
    protocol = ready_session()
    protocol.mail_from("a@x.test", ["b@y.test"])
    protocol.rcpt_to("b@y.test")
    protocol.data()
    feed(protocol, b"250 ok\r\n250 ok\r\n354 go\r\n")
    protocol.message(b"x\r\n")
    feed(protocol, b"554 5.7.1 Message rejected as spam\r\n")
    assert protocol.transaction is not None
    ((address, reply),) = protocol.transaction.refused
    assert address == "b@y.test" and reply.enhanced == (5, 7, 1)


def test_rset_then_next_transaction() -> None:
    protocol = ready_session()
    protocol.mail_from("a@x.test", ["b@y.test"])
    with pytest.raises(RuntimeError):
        protocol.mail_from("a@x.test", ["b@y.test"])
    assert protocol.rset() == b"RSET\r\n"
    assert protocol.transaction is None
    feed(protocol, b"250 2.1.0 Ok\r\n250 2.0.0 Ok\r\n")
    assert protocol.mail_from("a@x.test", ["c@y.test"]).startswith(b"MAIL FROM:<a@x.test>")


@pytest.mark.parametrize(
    ("body", "on_the_wire"),
    [
        (b"", b".\r\n"),
        (b"a\r\n", b"a\r\n.\r\n"),
        (b"a", b"a\r\n.\r\n"),  # no final CRLF: one is added
        (b".\r\n", b"..\r\n.\r\n"),  # a line that is just "."
        (b"a\r\n.\r\nb\r\n", b"a\r\n..\r\nb\r\n.\r\n"),
        (b".leading\r\n", b"..leading\r\n.\r\n"),
        (b"a\r\n..two\r\n", b"a\r\n...two\r\n.\r\n"),
        (b"a\r\n.", b"a\r\n..\r\n.\r\n"),
        (b"mid.dle\r\n", b"mid.dle\r\n.\r\n"),
        (b"bare\nlf\r\n", b"bare\nlf\r\n.\r\n"),  # signed bytes: bare LF passes unchanged
        (b"caf\xc3\xa9 8bit\r\n", b"caf\xc3\xa9 8bit\r\n.\r\n"),
    ],
)
def test_dot_stuffing(body: bytes, on_the_wire: bytes) -> None:
    assert dot_stuff(body) == on_the_wire


@pytest.mark.parametrize(
    ("line", "code", "enhanced"),
    [
        (b"250 2.1.5 Ok", 250, (2, 1, 5)),
        (b"550 5.1.1 User unknown", 550, (5, 1, 1)),
        (b"451 4.7.650 Throttled", 451, (4, 7, 650)),
        (b"550 4.1.1 class mismatch", 550, None),  # class must match the reply's first digit
        (b"550 User 5.1.1 unknown", 550, None),  # never found in prose
        (b"550 5.1 short", 550, None),
        (b"250", 250, None),
    ],
)
def test_enhanced_status_codes(
    line: bytes, code: int, enhanced: tuple[int, int, int] | None
) -> None:
    protocol = ready_session()
    protocol.rset()
    (reply,) = feed(protocol, line + b"\r\n")
    assert isinstance(reply, Reply)
    assert (reply.code, reply.enhanced) == (code, enhanced)


@pytest.mark.parametrize(
    "garbage",
    [
        b"HTTP/1.1 400 Bad Request\r\n",
        b"25O ok\r\n",
        b"250_ok\r\n",
        b"650 nope\r\n",
        b"250-first\r\n251 second\r\n",  # code changes inside a multi-line reply
        b"250 " + b"x" * MAX_REPLY_LINE + b"\r\n",
        b"250 " + b"x" * MAX_REPLY_LINE,  # no line end yet, already too long
    ],
)
def test_garbage_is_a_protocol_error(garbage: bytes) -> None:
    protocol = ready_session()
    protocol.rset()
    events = feed(protocol, garbage)
    assert isinstance(events[-1], MalformedReply)
    # The session is over: the error repeats and no command may follow.
    assert isinstance(protocol.next_event(), MalformedReply)
    with pytest.raises(RuntimeError):
        protocol.quit()


def test_reply_without_command_is_a_protocol_error() -> None:
    protocol = ready_session()
    assert isinstance(feed(protocol, b"250 unsolicited\r\n")[0], MalformedReply)


def test_connection_closed() -> None:
    protocol = ready_session()
    protocol.quit()
    protocol.receive_data(b"221 2.0.0 Bye\r\n")
    protocol.receive_data(b"")
    assert isinstance(protocol.next_event(), Reply)
    assert protocol.next_event() == ConnectionClosed()


@pytest.mark.parametrize(
    "address", ["a@x.test\r\nRCPT TO:<evil@z.test>", "a@x.test\n", "a\r@x.test", "a\0@x.test"]
)
def test_crlf_injection_refused(address: str) -> None:
    protocol = ready_session()
    with pytest.raises(InvalidCommandArgument):
        protocol.mail_from(address, ["b@y.test"])
    with pytest.raises(InvalidCommandArgument):
        protocol.mail_from("a@x.test", [address])
    with pytest.raises(InvalidCommandArgument):
        protocol.ehlo(address)
    assert protocol.replies_pending == 0


def test_smtputf8() -> None:
    protocol = ready_session()
    with pytest.raises(InvalidCommandArgument):
        protocol.mail_from("josé@x.test", ["b@y.test"])
    line = protocol.mail_from("josé@x.test", ["b@y.test"], smtputf8=True)
    assert line == "MAIL FROM:<josé@x.test> SMTPUTF8\r\n".encode()
    plain = ready_session(b"250 mx.example.test\r\n")
    with pytest.raises(InvalidCommandArgument):
        plain.mail_from("josé@x.test", ["b@y.test"], smtputf8=True)


@pytest.mark.parametrize(
    ("recipients", "advertised", "sendable", "refused"),
    [
        (["a@y.test", "josé@y.test"], False, ["a@y.test"], ["josé@y.test"]),
        (["josé@y.test", "用户@y.test"], False, [], ["josé@y.test", "用户@y.test"]),
        (["a@y.test", "josé@y.test"], True, ["a@y.test", "josé@y.test"], []),
        (["a@y.test", "b@xn--bcher-kva.test"], False, ["a@y.test", "b@xn--bcher-kva.test"], []),
    ],
)
def test_non_ascii_recipients_need_smtputf8_advertised(
    recipients: list[str], advertised: bool, sendable: list[str], refused: list[str]
) -> None:
    capabilities = Capabilities(smtputf8=advertised)
    offered, refusals = needing_smtputf8(recipients, capabilities)
    assert offered == sendable
    assert [address for address, _ in refusals] == refused
    assert all(refusal.enhanced == (5, 6, 7) for _, refusal in refusals)
    assert needing_smtputf8(recipients, None)[0] == [r for r in recipients if r.isascii()]


def test_starttls_forgets_capabilities_and_refuses_injected_bytes() -> None:
    protocol = ready_session()
    assert protocol.starttls() == b"STARTTLS\r\n"
    assert isinstance(feed(protocol, b"220 2.0.0 Ready\r\n")[0], Reply)
    protocol.tls_established()
    assert protocol.capabilities is None and not protocol.session_ready
    protocol.ehlo("client.example.test")
    assert isinstance(feed(protocol, EHLO_REPLY)[0], EhloReply)

    injected = ready_session()
    injected.starttls()
    events = feed(injected, b"220 Ready\r\n250 injected before the handshake\r\n")
    assert isinstance(events[-1], MalformedReply)


def test_auth_plain() -> None:
    protocol = ready_session()
    sent = protocol.auth_plain("user", "secret")
    assert sent == b"AUTH PLAIN " + base64.b64encode(b"\0user\0secret") + b"\r\n"
    (reply,) = feed(protocol, b"235 2.7.0 Authentication successful\r\n")
    assert isinstance(reply, Reply) and reply.code == 235


def test_commands_out_of_order_are_bugs() -> None:
    protocol = SmtpClientProtocol()
    with pytest.raises(RuntimeError):
        protocol.mail_from("a@x.test", ["b@y.test"])
    protocol = ready_session()
    with pytest.raises(RuntimeError):
        protocol.data()
    protocol.mail_from("a@x.test", ["b@y.test"])
    with pytest.raises(RuntimeError):
        protocol.rcpt_to("other@y.test")
    protocol.rcpt_to("b@y.test")
    protocol.data()
    with pytest.raises(RuntimeError):
        protocol.message(b"too early")
