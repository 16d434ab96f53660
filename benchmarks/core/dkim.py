"""DKIM signatures/s: Postwire's Rust signer (RSA-2048, Ed25519; 1 and 2 threads, since it
releases the GIL) against dkimpy signing the same messages with the same keys in the same run."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import dkim

from postwire import _core

DOMAIN = "example.com"
SELECTOR = "bench"
SIGNED_HEADERS = [
    b"from",
    b"to",
    b"cc",
    b"reply-to",
    b"subject",
    b"date",
    b"message-id",
    b"mime-version",
    b"content-type",
    b"list-unsubscribe",
    b"list-unsubscribe-post",
]


def _messages() -> list[bytes]:
    """Eight ~4 KiB transactional messages that differ in recipient and body."""
    paragraph = "Your order has shipped and is on its way. Track it from your account page. " * 6
    out = []
    for i in range(8):
        head = (
            "From: Shop <orders@example.com>\r\n"
            f"To: customer{i}@example.org\r\n"
            f"Subject: Your order #{1000 + i} has shipped\r\n"
            "Date: Fri, 21 Nov 2025 12:00:00 +0000\r\n"
            f"Message-ID: <order-{i}@example.com>\r\n"
            "MIME-Version: 1.0\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            "Content-Transfer-Encoding: 8bit\r\n"
            f"List-Unsubscribe: <https://example.com/unsubscribe/{i}>\r\n"
            "List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"
        )
        body = "".join(f"{n}. {paragraph}\r\n" for n in range(8)) + f"Grüße, #{i}\r\n"
        out.append((head + "\r\n" + body).encode())
    return out


def _ed25519_seed(pem: str) -> bytes:
    """The base64 32-byte seed dkimpy wants, from a PKCS#8 Ed25519 PEM (v1 or v2)."""
    der = base64.b64decode("".join(pem.strip().splitlines()[1:-1]))
    at = der.index(b"\x04\x22\x04\x20") + 4  # OCTET STRING { OCTET STRING (32) }
    return base64.b64encode(der[at : at + 32])


def _rate(sign: Callable[[bytes], bytes], messages: list[bytes], seconds: float) -> float:
    done = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        sign(messages[done % len(messages)])
        done += 1
    return done / (time.perf_counter() - started)


def _threaded_rate(
    sign: Callable[[bytes], bytes], messages: list[bytes], seconds: float, threads: int
) -> float:
    def worker(offset: int) -> int:
        done = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            sign(messages[(offset + done) % len(messages)])
            done += 1
        return done

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(worker, range(threads)))
    return total / (time.perf_counter() - started)


def _check(txt: str, header: bytes, message: bytes) -> None:
    """Refuse to time a signer whose output does not verify."""

    def dnsfunc(name: bytes, timeout: int = 5) -> bytes:
        return txt.encode()

    if not dkim.verify(header + message, dnsfunc=dnsfunc):
        raise RuntimeError(f"signature does not verify: {header!r}")


def run(seconds: float) -> dict[str, float]:
    """Signatures/s of each signer, each timed for `seconds`, plus speed-ups over dkimpy."""
    messages = _messages()
    rsa = _core.generate_dkim_key("rsa", 2048)
    ed = _core.generate_dkim_key("ed25519")
    ours_rsa = _core.DkimSigner(rsa.private_key_pem, DOMAIN, SELECTOR)
    ours_ed = _core.DkimSigner(ed.private_key_pem, DOMAIN, SELECTOR)

    def dkimpy_signer(private_key: bytes, algorithm: bytes) -> Callable[[bytes], bytes]:
        def sign(message: bytes) -> bytes:
            header: bytes = dkim.sign(
                message,
                SELECTOR.encode(),
                DOMAIN.encode(),
                private_key,
                canonicalize=(b"relaxed", b"relaxed"),
                signature_algorithm=algorithm,
                include_headers=SIGNED_HEADERS,
            )
            return header

        return sign

    dkimpy_rsa = dkimpy_signer(rsa.private_key_pem.encode(), b"rsa-sha256")
    dkimpy_ed = dkimpy_signer(_ed25519_seed(ed.private_key_pem), b"ed25519-sha256")

    for txt, sign in [
        (rsa.dns_txt, ours_rsa.sign),
        (ed.dns_txt, ours_ed.sign),
        (rsa.dns_txt, dkimpy_rsa),
        (ed.dns_txt, dkimpy_ed),
    ]:
        _check(txt, sign(messages[0]), messages[0])

    result = {
        "postwire rsa-2048 sig/s (1 thread)": _rate(ours_rsa.sign, messages, seconds),
        "postwire rsa-2048 sig/s (2 threads)": _threaded_rate(ours_rsa.sign, messages, seconds, 2),
        "dkimpy rsa-2048 sig/s": _rate(dkimpy_rsa, messages, seconds),
        "postwire ed25519 sig/s (1 thread)": _rate(ours_ed.sign, messages, seconds),
        "postwire ed25519 sig/s (2 threads)": _threaded_rate(ours_ed.sign, messages, seconds, 2),
        "dkimpy ed25519 sig/s": _rate(dkimpy_ed, messages, seconds),
    }
    for alg in ("rsa-2048", "ed25519"):
        for threads in ("1 thread", "2 threads"):
            ours = result[f"postwire {alg} sig/s ({threads})"]
            result[f"{alg} speed-up over dkimpy ({threads})"] = ours / result[f"dkimpy {alg} sig/s"]
    return result


if __name__ == "__main__":
    for name, value in run(3.0).items():
        print(f"{name:45} {value:12,.1f}")
