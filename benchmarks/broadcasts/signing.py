"""The ceiling signing alone sets: RSA-2048 DKIM signatures a second over messages like the
broadcast's (its HTML personalized, the text generated from it, the List-Unsubscribe fields),
on one thread and on as many threads as the server signs with. Measured in the same run as the
broadcast, with the server stopped, so the ratio of the two is of one machine at one time."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from benchmarks.broadcasts.content import (
    HTML,
    PROPERTY_FALLBACK,
    SUBJECT,
    contact_email,
    first_name,
    plan,
)
from benchmarks.delivery.rounds import DOMAIN
from postwire import _core
from postwire.accept import SIGNING_THREADS
from postwire.compose.html_text import html_to_text
from postwire.config import DomainsConfig

MESSAGES = 500


@dataclass(frozen=True)
class SigningCeiling:
    threads: int
    one_thread_per_s: float
    all_threads_per_s: float
    message_bytes: int  # the average message signed


def personalized(number: int) -> bytes:
    """Contact `number`'s message, built as the server builds one (the placeholders filled the
    simple way: the measure is of signing, not rendering)."""
    token = f"{number:024x}"
    unsubscribe = f"http://127.0.0.1:3000/u/{token}"
    html = (
        HTML.replace("{{{contact.first_name|there}}}", first_name(number) or "there")
        .replace("{{{contact.plan}}}", plan(number) or PROPERTY_FALLBACK)
        .replace("{{{RESEND_UNSUBSCRIBE_URL}}}", unsubscribe)
    )
    subject = SUBJECT.replace("{{{contact.first_name|Hello}}}", first_name(number) or "Hello")
    return _core.build_message(
        sender=("Acme News", f"news@{DOMAIN}"),
        to=[(None, contact_email(number))],
        subject=subject,
        text=html_to_text(html),
        html=html,
        headers=[
            ("List-Unsubscribe", f"<{unsubscribe}>, <mailto:unsubscribe+{token}@{DOMAIN}>"),
            ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ],
    )


def _signed_per_s(
    signer: _core.DkimSigner, messages: list[bytes], seconds: float, threads: int
) -> float:
    def worker(offset: int) -> int:
        done = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            signer.sign(messages[(offset + done) % len(messages)])
            done += 1
        return done

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(worker, [n * len(messages) // threads for n in range(threads)]))
    return total / (time.perf_counter() - started)


def measure_signing(seconds: float) -> SigningCeiling:
    key = _core.generate_dkim_key("rsa", DomainsConfig().dkim_key_bits)  # the default size
    signer = _core.DkimSigner(key.private_key_pem, DOMAIN, "bench")
    messages = [personalized(n) for n in range(MESSAGES)]
    _signed_per_s(signer, messages, min(1.0, seconds), SIGNING_THREADS)  # warm up
    return SigningCeiling(
        threads=SIGNING_THREADS,
        one_thread_per_s=_signed_per_s(signer, messages, seconds, 1),
        all_threads_per_s=_signed_per_s(signer, messages, seconds, SIGNING_THREADS),
        message_bytes=sum(map(len, messages)) // len(messages),
    )
