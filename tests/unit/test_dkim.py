"""DKIM keys and signatures from `postwire._core`, checked by an independent verifier (dkimpy)."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import dkim
import pytest

from postwire import _core
from postwire.errors import DkimError

DOMAIN = "example.com"
SELECTOR = "s2025"

SIGNED = (
    "from",
    "to",
    "cc",
    "reply-to",
    "subject",
    "date",
    "message-id",
    "mime-version",
    "content-type",
    "list-unsubscribe",
    "list-unsubscribe-post",
)


@pytest.fixture(scope="module", params=["rsa", "ed25519"])
def key(request: pytest.FixtureRequest) -> _core.DkimKey:
    return _core.generate_dkim_key(request.param)


@pytest.fixture(scope="module")
def signer(key: _core.DkimKey) -> _core.DkimSigner:
    return _core.DkimSigner(key.private_key_pem, DOMAIN, SELECTOR)


def dns_for(txt: str) -> Callable[..., bytes | None]:
    """A dkimpy `dnsfunc` that publishes `txt` at our selector only."""

    def dnsfunc(name: bytes, timeout: int = 5) -> bytes | None:
        return txt.encode() if name == f"{SELECTOR}._domainkey.{DOMAIN}.".encode() else None

    return dnsfunc


def verifies(txt: str, signed_message: bytes) -> bool:
    return bool(dkim.verify(signed_message, dnsfunc=dns_for(txt)))


def tags(header: bytes) -> dict[str, str]:
    """Tag=value pairs of a DKIM-Signature header, unfolded, whitespace removed."""
    name, _, value = header.decode("ascii").partition(":")
    assert name == "DKIM-Signature"
    pairs = (t.split("=", 1) for t in value.split(";") if t.strip())
    return {k.strip(): re.sub(r"\s+", "", v) for k, v in pairs}


def crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode("utf-8")


PLAIN = crlf(
    "From: Alice <alice@example.com>\n"
    "To: Bob <bob@example.org>\n"
    "Subject: Quarterly report\n"
    "Date: Fri, 21 Nov 2025 12:00:00 +0000\n"
    "Message-ID: <plain.1@example.com>\n"
    "MIME-Version: 1.0\n"
    "Content-Type: text/plain; charset=us-ascii\n"
    "X-Mailer: postwire-tests\n"
    "\n"
    "Hello Bob,\n"
    "\n"
    "the numbers are attached.\n"
)

NON_ASCII = crlf(
    "From: =?utf-8?q?J=C3=BCrgen?= <juergen@example.com>\n"
    "To: =?utf-8?b?0JDQvdC90LA=?= <anna@example.org>\n"
    "Cc: carol@example.net\n"
    "Reply-To: support@example.com\n"
    "Subject: =?utf-8?b?R3LDvMOfZSBhdXMgTcO8bmNoZW4g8J+Nug==?=\n"
    "Date: Fri, 21 Nov 2025 12:00:00 +0100\n"
    "Message-ID: <utf8.1@example.com>\n"
    "MIME-Version: 1.0\n"
    "Content-Type: text/plain; charset=utf-8\n"
    "Content-Transfer-Encoding: 8bit\n"
    "\n"
    "Grüße aus München 🍺\n"
    "Ярослав, 東京, naïve café   \n"
    "\n"
    "\n"
)

ATTACHMENT = base64.encodebytes(bytes(range(256)) * 8).decode("ascii")
MULTIPART = crlf(
    "From: reports@example.com\n"
    "To: finance@example.org\n"
    "Subject: Invoice 42\n"
    "Date: Fri, 21 Nov 2025 12:00:00 +0000\n"
    "Message-ID: <multi.1@example.com>\n"
    "MIME-Version: 1.0\n"
    'Content-Type: multipart/mixed; boundary="=_b1"\n'
    "List-Unsubscribe: <https://example.com/u/1>, <mailto:u@example.com>\n"
    "List-Unsubscribe-Post: List-Unsubscribe=One-Click\n"
    "\n"
    "--=_b1\n"
    "Content-Type: text/plain; charset=utf-8\n"
    "\n"
    "Invoice attached.\n"
    "--=_b1\n"
    'Content-Type: application/octet-stream; name="invoice.bin"\n'
    "Content-Transfer-Encoding: base64\n"
    'Content-Disposition: attachment; filename="invoice.bin"\n'
    "\n" + ATTACHMENT + "--=_b1--\n"
)

LONG_LINES = crlf(
    "From: Very Long Display Name Of The Sender <sender@example.com>\n"
    "To: one@example.org, two@example.org, three@example.org,\n"
    " four@example.org, five@example.org,\n"
    "\tsix@example.org\n"
    "Subject: A subject that goes on and on and on, long enough that it had to be\n"
    "  folded   over   several lines\n"
    "Date: Fri, 21 Nov 2025 12:00:00 +0000\n"
    "Message-ID: <long.1@example.com>\n"
    "\n" + "x" * 450 + " " + "y" * 449 + "\n"
    "end\n"
)

MESSAGES = {
    "plain": PLAIN,
    "non_ascii": NON_ASCII,
    "multipart": MULTIPART,
    "long_lines": LONG_LINES,
}


def present_headers(message: bytes) -> set[str]:
    head = message.split(b"\r\n\r\n", 1)[0].decode("utf-8")
    names = {line.split(":", 1)[0].strip().lower() for line in head.split("\r\n") if line[:1] > " "}
    return names & set(SIGNED)


@pytest.mark.parametrize("name", MESSAGES)
def test_signature_verifies_with_dkimpy(
    key: _core.DkimKey, signer: _core.DkimSigner, name: str
) -> None:
    message = MESSAGES[name]
    header = signer.sign(message)
    assert header.startswith(b"DKIM-Signature: ") and header.endswith(b"\r\n")
    assert all(len(line) <= 78 for line in header.split(b"\r\n"))
    assert verifies(key.dns_txt, header + message)


@pytest.mark.parametrize("name", MESSAGES)
def test_signature_tags(signer: _core.DkimSigner, name: str) -> None:
    message = MESSAGES[name]
    t = tags(signer.sign(message, timestamp=1_763_726_400))
    assert t["v"] == "1"
    assert t["a"] == {"rsa": "rsa-sha256", "ed25519": "ed25519-sha256"}[signer.kind]
    assert t["a"] == signer.algorithm
    assert t["c"] == "relaxed/relaxed"
    assert t["d"] == DOMAIN
    assert t["s"] == SELECTOR
    assert t["t"] == "1763726400"
    h = t["h"].split(":")
    assert h[0] == "from"
    # Exactly the present ones, each once (no header of these is repeated in the samples),
    # and never one the message lacks.
    assert sorted(h) == sorted(present_headers(message))
    assert "x-mailer" not in h


def test_tampered_body_fails(key: _core.DkimKey, signer: _core.DkimSigner) -> None:
    header = signer.sign(PLAIN)
    assert verifies(key.dns_txt, header + PLAIN)
    tampered = PLAIN.replace(b"attached", b"enclosed")
    assert not verifies(key.dns_txt, header + tampered)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"Subject: Quarterly report", b"Subject: Quarterly rep0rt"),
        (b"To: Bob <bob@example.org>", b"To: Mallory <mallory@example.org>"),
        (b"From: Alice <alice@example.com>", b"From: Alice <alice@evil.example>"),
    ],
)
def test_tampered_signed_header_fails(
    key: _core.DkimKey, signer: _core.DkimSigner, old: bytes, new: bytes
) -> None:
    header = signer.sign(PLAIN)
    assert old in PLAIN
    assert not verifies(key.dns_txt, header + PLAIN.replace(old, new))


def test_unsigned_header_and_whitespace_changes_still_verify(
    key: _core.DkimKey, signer: _core.DkimSigner
) -> None:
    header = signer.sign(PLAIN)
    changed = PLAIN.replace(b"X-Mailer: postwire-tests", b"X-Mailer: relay-rewrote-this")
    changed = changed.replace(b"Subject: Quarterly report", b"subject:   Quarterly\r\n report")
    assert verifies(key.dns_txt, header + changed)


def test_timestamp_makes_signing_deterministic(signer: _core.DkimSigner) -> None:
    a = signer.sign(PLAIN, timestamp=1_700_000_000)
    assert a == signer.sign(PLAIN, timestamp=1_700_000_000)
    assert tags(a)["t"] == "1700000000"
    assert tags(signer.sign(PLAIN))["t"] != "1700000000"


def test_signing_from_threads(key: _core.DkimKey, signer: _core.DkimSigner) -> None:
    messages = [PLAIN.replace(b"Bob,", f"Bob #{i},".encode()) for i in range(16)]
    with ThreadPoolExecutor(4) as pool:
        headers = list(pool.map(signer.sign, messages))
    for header, message in zip(headers, messages, strict=True):
        assert verifies(key.dns_txt, header + message)


def test_key_and_signer_describe_the_same_public_key(
    key: _core.DkimKey, signer: _core.DkimSigner
) -> None:
    assert key.private_key_pem.startswith("-----BEGIN PRIVATE KEY-----\n")
    assert signer.dns_txt == key.dns_txt
    assert signer.domain == DOMAIN
    assert signer.selector == SELECTOR
    assert signer.kind == key.kind
    assert key.private_key_pem not in repr(key)
    p = base64.b64decode(key.dns_txt.split("p=", 1)[1], validate=True)
    if key.kind == "rsa":
        assert key.dns_txt.startswith("v=DKIM1; k=rsa; p=")
        assert p.startswith(b"\x30\x82\x01\x22\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d")  # SPKI
    else:
        assert key.dns_txt.startswith("v=DKIM1; k=ed25519; p=")
        assert len(p) == 32


def test_rsa_key_sizes() -> None:
    for bits in (1024, 3072):
        key = _core.generate_dkim_key("rsa", bits)
        signer = _core.DkimSigner(key.private_key_pem, DOMAIN, SELECTOR)
        assert verifies(key.dns_txt, signer.sign(PLAIN) + PLAIN)
    for bits in (512, 1000, 4104, 8192):
        with pytest.raises(DkimError, match=r"outside 1024\.\.=4096"):
            _core.generate_dkim_key("rsa", bits)


def test_bad_generation_arguments() -> None:
    with pytest.raises(DkimError, match="unknown key kind"):
        _core.generate_dkim_key("dsa")  # type: ignore[arg-type]
    with pytest.raises(DkimError, match="RSA only"):
        _core.generate_dkim_key("ed25519", 2048)


EC_P256_PEM = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgt8nOH0/OvSoabsGA
iOblTPoEdNSMtvX2M1FZtwpbCpuhRANCAARj7RVuOSo/jvJW8suKd4NKqdMeCW0c
YWA3woGL69sYpli4A79fIhaCIAOmR0D6M8xcLu/vFTxLXTuZj1CpoWzQ
-----END PRIVATE KEY-----
"""


@pytest.mark.parametrize(
    ("pem", "message"),
    [
        ("", "not a PEM-encoded key"),
        ("hello", "not a PEM-encoded key"),
        ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "malformed"),
        ("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n", "PEM"),
        (EC_P256_PEM, "unsupported key algorithm"),
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
            "encrypted",
        ),
    ],
)
def test_bad_pem_raises_dkim_error(pem: str, message: str) -> None:
    with pytest.raises(DkimError, match=message):
        _core.DkimSigner(pem, DOMAIN, SELECTOR)


def test_public_key_pem_is_refused() -> None:
    # An RSA TXT record holds a SubjectPublicKeyInfo, i.e. a "PUBLIC KEY" PEM body.
    spki = _core.generate_dkim_key("rsa", 1024).dns_txt.split("p=", 1)[1]
    lines = "\n".join(spki[i : i + 64] for i in range(0, len(spki), 64))
    pem = f"-----BEGIN PUBLIC KEY-----\n{lines}\n-----END PUBLIC KEY-----\n"
    with pytest.raises(DkimError, match="public key"):
        _core.DkimSigner(pem, DOMAIN, SELECTOR)


@pytest.mark.parametrize(
    ("domain", "selector"),
    [("", "s1"), ("example.com", ""), ("exa mple.com", "s1"), ("example.com", "s1; l=0")],
)
def test_bad_domain_or_selector(key: _core.DkimKey, domain: str, selector: str) -> None:
    with pytest.raises(DkimError, match="invalid DKIM"):
        _core.DkimSigner(key.private_key_pem, domain, selector)


def test_message_without_from_is_refused(signer: _core.DkimSigner) -> None:
    with pytest.raises(DkimError, match="no From header"):
        signer.sign(b"To: bob@example.org\r\nSubject: x\r\n\r\nbody\r\n")


def test_sign_takes_bytes_only(signer: _core.DkimSigner) -> None:
    with pytest.raises(TypeError):
        signer.sign(bytearray(PLAIN))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        signer.sign(PLAIN.decode())  # type: ignore[arg-type]


def test_sign_many_is_sign_of_each(signer: _core.DkimSigner) -> None:
    messages = list(MESSAGES.values())
    at = 1_700_000_000
    assert signer.sign_many(messages, timestamp=at) == [
        signer.sign(message, timestamp=at) for message in messages
    ]
    assert signer.sign_many([]) == []
    with pytest.raises(DkimError, match="no From header"):
        signer.sign_many([PLAIN, b"To: bob@example.org\r\nSubject: x\r\n\r\nbody\r\n"])
    with pytest.raises(TypeError):
        signer.sign_many([bytearray(PLAIN)])  # type: ignore[list-item]
