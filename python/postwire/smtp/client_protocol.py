"""The outbound SMTP client as a sans-IO state machine (RFC 5321, 2920, 3463, 2034, 6531).

No sockets, no clock: `receive_data(bytes)` feeds what the server sent (`b""` at end of
stream), `next_event()` hands back one parsed event at a time, and every command method returns
the bytes to send. The driver (`client_connection.py`) moves bytes and owns the timeouts.

Replies are matched to commands in the order the commands were issued, so a pipelined
MAIL FROM + RCPT TO... + DATA group (RFC 2920) is written at once and its replies land in the
current `Transaction` one by one.
"""

from __future__ import annotations

import base64
import enum
from collections import deque
from dataclasses import dataclass, field
from typing import TypeAlias

from postwire import _core
from postwire.errors import InvalidCommandArgument

# RFC 5321 §4.5.3.1.5: a reply line is at most 512 octets including its CRLF.
MAX_REPLY_LINE = 512
# A multi-line reply longer than this is a peer trying to exhaust memory, not SMTP.
MAX_REPLY_LINES = 100


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA = _Sentinel.NEED_DATA
"""`next_event()` needs more bytes from the server before it can say anything."""


@dataclass(frozen=True)
class Reply:
    """One (possibly multi-line) server reply.

    `lines` are the texts after "NNN-"/"NNN "; `enhanced` is the RFC 3463 code from the first
    line when present and its class matches the reply's first digit.
    """

    code: int
    enhanced: tuple[int, int, int] | None
    lines: list[str]

    @property
    def is_positive(self) -> bool:
        return 200 <= self.code < 300

    @property
    def is_transient(self) -> bool:
        return 400 <= self.code < 500

    @property
    def is_permanent(self) -> bool:
        return 500 <= self.code < 600

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def __str__(self) -> str:
        enhanced = ".".join(map(str, self.enhanced)) + " " if self.enhanced else ""
        return f"{self.code} {enhanced}{' / '.join(self.lines)}".strip()


@dataclass(frozen=True)
class Capabilities:
    """What an EHLO reply advertised (RFC 5321 §4.1.1.1); keywords are upper-cased."""

    pipelining: bool = False
    size: int | None = None  # None: no SIZE; 0: SIZE without a fixed limit
    eight_bit_mime: bool = False
    smtputf8: bool = False
    enhanced_status_codes: bool = False
    starttls: bool = False
    auth_mechanisms: frozenset[str] = frozenset()
    keywords: frozenset[str] = frozenset()

    @classmethod
    def from_ehlo_lines(cls, lines: list[str]) -> Capabilities:
        """Parse the lines of a positive EHLO reply; the first line is the server's name."""
        keywords: set[str] = set()
        size: int | None = None
        auth: set[str] = set()
        for line in lines[1:]:
            words = line.split()
            if not words:
                continue
            keyword = words[0].upper()
            # Old servers advertise "AUTH=LOGIN PLAIN" next to (or instead of) "AUTH LOGIN".
            if keyword.startswith("AUTH="):
                auth.update(w.upper() for w in [keyword[5:], *words[1:]] if w)
                continue
            keywords.add(keyword)
            if keyword == "AUTH":
                auth.update(w.upper() for w in words[1:])
            elif keyword == "SIZE":
                size = int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
        return cls(
            pipelining="PIPELINING" in keywords,
            size=size,
            eight_bit_mime="8BITMIME" in keywords,
            smtputf8="SMTPUTF8" in keywords,
            enhanced_status_codes="ENHANCEDSTATUSCODES" in keywords,
            starttls="STARTTLS" in keywords,
            auth_mechanisms=frozenset(auth),
            keywords=frozenset(keywords),
        )


@dataclass(frozen=True)
class Greeting:
    """The server's opening reply (220 to go on; 554 means it will not talk to us)."""

    reply: Reply


@dataclass(frozen=True)
class EhloReply:
    """The reply to EHLO; `capabilities` is None when it was refused (then try HELO)."""

    reply: Reply
    capabilities: Capabilities | None


@dataclass(frozen=True)
class MalformedReply:
    """The server's bytes are not an SMTP reply; the session cannot go on."""

    reason: str


@dataclass(frozen=True)
class ConnectionClosed:
    """The server closed the connection (no reply was pending, or it hung up mid-reply)."""


Event: TypeAlias = Greeting | EhloReply | Reply | MalformedReply | ConnectionClosed | _Sentinel


@dataclass
class Transaction:
    """One mail transaction and every reply it got, in order.

    `mail_reply`: to MAIL FROM; `recipient_replies`: (address, reply to its RCPT TO) in order;
    `data_reply`: to DATA (354 to go on); `message_reply`: to the final dot. A reply still
    missing is None (the transaction stopped before it). `refused_locally`: recipients left
    out of it by Postwire, never offered to the server, with the reason (the driver's SMTPUTF8
    rule); they are not among `recipients`.
    """

    envelope_from: str
    recipients: list[str]
    mail_reply: Reply | None = None
    recipient_replies: list[tuple[str, Reply]] = field(default_factory=list)
    data_reply: Reply | None = None
    message_reply: Reply | None = None
    refused_locally: list[tuple[str, InvalidCommandArgument]] = field(default_factory=list)

    @property
    def is_complete(self) -> bool:
        """Every recipient has a deciding reply (see `outcomes`)."""
        return len(self.outcomes()) == len(self.recipients)

    def outcomes(self) -> list[tuple[str, Reply]]:
        """The reply that decided each recipient's fate: the first refusal on its path (MAIL,
        its RCPT, DATA), else the reply to the final dot. Undecided recipients are left out.
        """
        decided: list[tuple[str, Reply]] = []
        if self.mail_reply is None:
            return decided
        if not self.mail_reply.is_positive:
            return [(address, self.mail_reply) for address in self.recipients]
        for address, rcpt_reply in self.recipient_replies:
            if not rcpt_reply.is_positive:
                decided.append((address, rcpt_reply))
            elif self.data_reply is not None and self.data_reply.code != 354:
                decided.append((address, self.data_reply))
            elif self.message_reply is not None:
                decided.append((address, self.message_reply))
        return decided

    @property
    def accepted(self) -> list[str]:
        """Recipients the server took responsibility for."""
        return [address for address, reply in self.outcomes() if reply.is_positive]

    @property
    def refused(self) -> list[tuple[str, Reply]]:
        """Recipients refused (4xx or 5xx) with the reply that refused them."""
        return [(address, reply) for address, reply in self.outcomes() if not reply.is_positive]


class _Expect(enum.Enum):
    """What the next pending reply answers."""

    GREETING = "greeting"
    EHLO = "EHLO"
    HELO = "HELO"
    STARTTLS = "STARTTLS"
    AUTH = "AUTH"
    MAIL = "MAIL"
    RCPT = "RCPT"
    DATA = "DATA"
    MESSAGE = "message"
    RSET = "RSET"
    QUIT = "QUIT"


# RFC 6531: "non-ASCII addresses not permitted for that sender/recipient".
NON_ASCII_ADDRESS: tuple[int, int, int] = (5, 6, 7)


def _check_argument(value: str, what: str, *, allow_utf8: bool) -> bytes:
    if any(c in value for c in "\r\n\0"):
        raise InvalidCommandArgument(f"{what} contains CR, LF or NUL: {value!r}")
    if not value.isascii() and not allow_utf8:
        raise InvalidCommandArgument(
            f"{what} is not ASCII and SMTPUTF8 is not in use: {value!r}",
            enhanced=NON_ASCII_ADDRESS,
        )
    return value.encode("utf-8")


def needing_smtputf8(
    recipients: list[str], capabilities: Capabilities | None
) -> tuple[list[str], list[tuple[str, InvalidCommandArgument]]]:
    """The recipients that can be offered to a server, and those that cannot, each with
    Postwire's refusal: a non-ASCII address (domains travel as A-labels, so a UTF-8 local
    part) needs SMTPUTF8, which RFC 6531 section 3.2 forbids using unless advertised.
    """
    if (capabilities is not None and capabilities.smtputf8) or all(r.isascii() for r in recipients):
        return recipients, []
    refused = [
        (
            address,
            InvalidCommandArgument(
                f"the address {address!r} is not ASCII and the recipient's mail server"
                " does not offer SMTPUTF8",
                enhanced=NON_ASCII_ADDRESS,
            ),
        )
        for address in recipients
        if not address.isascii()
    ]
    return [address for address in recipients if address.isascii()], refused


def dot_stuff(body: bytes) -> bytes:
    """The DATA payload for `body`: lines starting with "." get one more (RFC 5321 §4.5.2), a
    final CRLF is added when missing, then the terminating ".\\r\\n". Nothing else changes:
    the body is DKIM-signed, so bare CR or LF are passed through as given. (In Rust: one pass
    and one copy, where Python's byte operations made three copies of every body.)
    """
    return _core.stuff_data(body)


class SmtpClientProtocol:
    """The client side of one SMTP session.

    Commands check the order they are issued in (a misuse is a bug: `RuntimeError`) and refuse
    CR/LF in arguments (`InvalidCommandArgument`). After a `MalformedReply` or
    `ConnectionClosed` the session is over: every later `next_event()` repeats it.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._eof = False
        self._pending: deque[_Expect] = deque([_Expect.GREETING])
        self._partial_lines: list[str] = []
        self._partial_code = 0
        self._terminal: MalformedReply | ConnectionClosed | None = None
        self.capabilities: Capabilities | None = None
        """The last accepted EHLO's; None before EHLO, after HELO and after STARTTLS."""
        self.session_ready = False
        """An EHLO or HELO was accepted: transactions may start."""
        self.transaction: Transaction | None = None
        self._awaiting_tls = False
        self._data_accepted = False
        self._smtputf8 = False
        self._recipients_sent = 0

    # ---- input ----

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the server; `b""` means it closed the connection."""
        if data:
            self._buffer += data
        else:
            self._eof = True

    def next_event(self) -> Event:
        if self._terminal is not None:
            return self._terminal
        if self._awaiting_tls:
            # Bytes after the 220 to STARTTLS and before the handshake would be read as if
            # protected by TLS (the STARTTLS injection attack): refuse them.
            if self._buffer:
                return self._fail("data received after the reply to STARTTLS")
            return NEED_DATA
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) >= MAX_REPLY_LINE:
                    return self._fail(f"reply line longer than {MAX_REPLY_LINE} octets")
                if self._eof:
                    self._terminal = ConnectionClosed()
                    return self._terminal
                return NEED_DATA
            if end + 1 > MAX_REPLY_LINE:
                return self._fail(f"reply line longer than {MAX_REPLY_LINE} octets")
            raw = bytes(self._buffer[: end + 1])
            del self._buffer[: end + 1]
            event = self._feed_line(raw.rstrip(b"\r\n"))
            if event is not None:
                return event

    def _fail(self, reason: str) -> MalformedReply:
        self._terminal = MalformedReply(reason)
        return self._terminal

    def _feed_line(self, line: bytes) -> Event | None:
        head = line[:3]
        separator = line[3:4]
        if not (
            len(head) == 3
            and head.isdigit()
            and head[0:1] in b"2345"
            and head[1:2] in b"012345"
            and separator in (b"", b" ", b"-")
        ):
            return self._fail(f"not an SMTP reply line: {line[:80]!r}")
        code = int(head)
        if not self._pending:
            return self._fail(f"reply without a command: {line[:80]!r}")
        if self._partial_lines and code != self._partial_code:
            return self._fail(f"reply code changed inside a multi-line reply: {line[:80]!r}")
        self._partial_code = code
        self._partial_lines.append(line[4:].decode("utf-8", errors="replace"))
        if len(self._partial_lines) > MAX_REPLY_LINES:
            return self._fail(f"reply longer than {MAX_REPLY_LINES} lines")
        if separator == b"-":
            return None
        reply = Reply(code, _parse_enhanced(code, self._partial_lines[0]), self._partial_lines)
        self._partial_lines = []
        return self._on_reply(self._pending.popleft(), reply)

    def _on_reply(self, expect: _Expect, reply: Reply) -> Event:
        match expect:
            case _Expect.GREETING:
                return Greeting(reply)
            case _Expect.EHLO:
                if reply.is_positive:
                    self.capabilities = Capabilities.from_ehlo_lines(reply.lines)
                    self.session_ready = True
                    return EhloReply(reply, self.capabilities)
                return EhloReply(reply, None)
            case _Expect.HELO:
                self.session_ready = self.session_ready or reply.is_positive
            case _Expect.STARTTLS:
                if reply.code == 220:
                    self._awaiting_tls = True
                    if self._buffer:
                        return self._fail("data received after the reply to STARTTLS")
            case _ if self.transaction is not None:
                self._record(expect, reply)
        return reply

    def _record(self, expect: _Expect, reply: Reply) -> None:
        assert self.transaction is not None
        transaction = self.transaction
        if expect is _Expect.MAIL:
            transaction.mail_reply = reply
        elif expect is _Expect.RCPT:
            address = transaction.recipients[len(transaction.recipient_replies)]
            transaction.recipient_replies.append((address, reply))
        elif expect is _Expect.DATA:
            transaction.data_reply = reply
            self._data_accepted = reply.code == 354
        elif expect is _Expect.MESSAGE:
            transaction.message_reply = reply
            self._data_accepted = False

    # ---- output ----

    @property
    def replies_pending(self) -> int:
        """Commands sent whose replies have not been read yet."""
        return len(self._pending)

    def _command(self, expect: _Expect, line: bytes) -> bytes:
        if self._terminal is not None:
            raise RuntimeError("the SMTP session is over")
        if self._awaiting_tls:
            raise RuntimeError("STARTTLS was accepted: call tls_established() first")
        self._pending.append(expect)
        return line + b"\r\n"

    def ehlo(self, name: str) -> bytes:
        return self._command(
            _Expect.EHLO, b"EHLO " + _check_argument(name, "EHLO name", allow_utf8=False)
        )

    def helo(self, name: str) -> bytes:
        """The RFC 821 greeting, for servers that refuse EHLO with 5xx."""
        return self._command(
            _Expect.HELO, b"HELO " + _check_argument(name, "HELO name", allow_utf8=False)
        )

    def starttls(self) -> bytes:
        return self._command(_Expect.STARTTLS, b"STARTTLS")

    def tls_established(self) -> None:
        """The TLS handshake is done: all that was learnt before is forgotten (RFC 3207 §4.2)
        and EHLO must be sent again.
        """
        if not self._awaiting_tls:
            raise RuntimeError("tls_established() without an accepted STARTTLS")
        self._awaiting_tls = False
        self.capabilities = None
        self.session_ready = False

    def auth_plain(self, user: str, password: str) -> bytes:
        """AUTH PLAIN with an initial response (RFC 4616); for smarthost routes, over TLS."""
        if not self.session_ready:
            raise RuntimeError("AUTH before EHLO")
        for value, what in ((user, "AUTH user"), (password, "AUTH password")):
            if "\0" in value:
                raise InvalidCommandArgument(f"{what} contains NUL")
        token = base64.b64encode(f"\0{user}\0{password}".encode())
        return self._command(_Expect.AUTH, b"AUTH PLAIN " + token)

    def mail_from(
        self,
        address: str,
        recipients: list[str],
        *,
        size: int | None = None,
        body_8bit: bool = False,
        smtputf8: bool = False,
    ) -> bytes:
        """MAIL FROM, opening a `Transaction` for `recipients` (send them with `rcpt_to`).

        SIZE and BODY=8BITMIME are declared only when advertised; SMTPUTF8 when asked must be
        advertised (RFC 6531 §3.2 forbids sending it otherwise). An 8-bit body to a server
        without 8BITMIME goes as it is: it is signed, so it cannot be re-encoded here.
        """
        if not self.session_ready:
            raise RuntimeError("MAIL FROM before EHLO/HELO was accepted")
        if self.transaction is not None and not self._transaction_finished():
            raise RuntimeError("MAIL FROM inside an open transaction: RSET first")
        capabilities = self.capabilities or Capabilities()
        if smtputf8 and not capabilities.smtputf8:
            raise InvalidCommandArgument(
                "the message needs SMTPUTF8, which the server lacks", enhanced=NON_ASCII_ADDRESS
            )
        line = b"MAIL FROM:<" + _check_argument(address, "sender", allow_utf8=smtputf8) + b">"
        if size is not None and capabilities.size is not None:
            line += b" SIZE=%d" % size
        if body_8bit and capabilities.eight_bit_mime:
            line += b" BODY=8BITMIME"
        if smtputf8:
            line += b" SMTPUTF8"
        for recipient in recipients:
            _check_argument(recipient, "recipient", allow_utf8=smtputf8)
        self._smtputf8 = smtputf8
        self._recipients_sent = 0
        data = self._command(_Expect.MAIL, line)
        self.transaction = Transaction(address, list(recipients))
        self._data_accepted = False
        return data

    def _transaction_finished(self) -> bool:
        transaction = self.transaction
        return transaction is not None and transaction.is_complete and not self._pending

    def rcpt_to(self, address: str) -> bytes:
        """RCPT TO for the next recipient of the transaction, in the order given to MAIL."""
        transaction = self.transaction
        if transaction is None or self._recipients_sent >= len(transaction.recipients):
            raise RuntimeError("RCPT TO without MAIL FROM or beyond its recipients")
        if address != transaction.recipients[self._recipients_sent]:
            raise RuntimeError("RCPT TO out of the order given to MAIL FROM")
        self._recipients_sent += 1
        encoded = _check_argument(address, "recipient", allow_utf8=self._smtputf8)
        return self._command(_Expect.RCPT, b"RCPT TO:<" + encoded + b">")

    def data(self) -> bytes:
        if self.transaction is None or self._recipients_sent == 0:
            raise RuntimeError("DATA without MAIL FROM and RCPT TO")
        return self._command(_Expect.DATA, b"DATA")

    def message(self, body: bytes) -> bytes:
        """The dot-stuffed body and final dot; only after DATA got 354."""
        if self._terminal is not None:
            raise RuntimeError("the SMTP session is over")
        if not self._data_accepted:
            raise RuntimeError("message body before DATA was answered 354")
        self._data_accepted = False
        self._pending.append(_Expect.MESSAGE)
        return dot_stuff(body)

    def rset(self) -> bytes:
        """RSET: the transaction is dropped now (keep a reference to read its replies)."""
        data = self._command(_Expect.RSET, b"RSET")
        self.transaction = None
        self._data_accepted = False
        return data

    def quit(self) -> bytes:
        return self._command(_Expect.QUIT, b"QUIT")


def _parse_enhanced(code: int, first_line: str) -> tuple[int, int, int] | None:
    """The RFC 3463 code at the start of `first_line`: "class.subject.detail", class equal to
    the reply's first digit, subject and detail 1-3 digits. Structure only, never prose.
    """
    token = first_line.split(" ", 1)[0]
    parts = token.split(".")
    if len(parts) != 3 or not all(p.isdigit() and p.isascii() for p in parts):
        return None
    klass, subject, detail = parts
    if klass != str(code // 100) or len(subject) > 3 or len(detail) > 3:
        return None
    return int(klass), int(subject), int(detail)
