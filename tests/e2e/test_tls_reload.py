"""docs/operations.md's certificate renewal: replace the files `smtp.tls_cert` and `smtp.tls_key`
name, send SIGHUP (`systemctl reload postwire`), and every process of the service offers the new
certificate to new SMTP sessions, with no restart: a session opened before the reload goes on
and its mail is accepted, and every message acknowledged is listed by the API."""

from __future__ import annotations

import signal
import smtplib
import ssl
import subprocess
from pathlib import Path

import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import serving, verified_domain
from tests.e2e.test_smtp_submission import listener, shop_mail, wait_for_smtp
from tests.ports import free_address

RELOADED = r"SIGHUP: SMTP certificate reloaded from \S+ \(SHA-256 {}\)"


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={name}", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def fingerprint(cert: Path | None = None, *, pem: str | None = None) -> str:
    """SHA-256 fingerprint of a certificate file, or of `pem`, as openssl prints it."""
    source = ["-in", str(cert)] if cert is not None else []
    out = subprocess.run(
        ["openssl", "x509", "-noout", "-fingerprint", "-sha256", *source],
        input=pem, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return out.strip().split("=", 1)[1]


def offered_fingerprint(address: tuple[str, int], *starttls: str) -> str:
    """The certificate `openssl s_client` is offered by a new session."""
    shown = subprocess.run(
        ["openssl", "s_client", "-connect", f"{address[0]}:{address[1]}", *starttls],
        input="", capture_output=True, text=True, timeout=30,
    ).stdout  # fmt: skip
    return fingerprint(pem=shown[shown.index("-----BEGIN CERTIFICATE-----") :])


def test_sighup_reloads_the_smtp_certificate_in_every_process(
    tmp_path: Path, dns_server: AuthoritativeDnsServer
) -> None:
    live_cert, live_key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    old_cert, old_key = self_signed(tmp_path, "old")
    new_cert, new_key = self_signed(tmp_path, "new")
    live_cert.write_bytes(old_cert.read_bytes())
    live_key.write_bytes(old_key.read_bytes())
    smtp_extra = f'tls_cert = "{live_cert}"\ntls_key = "{live_key}"'
    with serving(
        tmp_path,
        dns_server,
        processes=2,
        starttls_listen=(free_address(),),
        tls_listen=(free_address(),),
        smtp_extra=smtp_extra,
    ) as live:
        assert live.process is not None
        pid = live.process.pid
        verified_domain(dns_server)
        implicit, starttls = listener(live, "tls_listen"), listener(live, "starttls_listen")
        wait_for_smtp(implicit)
        assert offered_fingerprint(implicit) == fingerprint(old_cert)

        # A session opened before the reload, with a message acknowledged.
        trusting_old = ssl.create_default_context(cafile=str(old_cert))
        session = smtplib.SMTP_SSL(*implicit, context=trusting_old, timeout=30)
        session.login("postwire", str(resend.api_key))
        assert session.send_message(shop_mail("before the reload", "ann@example.org", "x")) == {}

        # What certbot's deploy hook does: new files in place, then SIGHUP to the service.
        new_cert.replace(live_cert)
        new_key.replace(live_key)
        live.process.send_signal(signal.SIGHUP)
        reloaded = RELOADED.format(fingerprint(live_cert))
        live.wait_for_log(reloaded + r"[\s\S]*" + reloaded, what="both processes reloaded")

        # Every new session, whichever process accepts it, is offered the new certificate.
        for _ in range(4):
            assert offered_fingerprint(implicit) == fingerprint(live_cert)
            assert offered_fingerprint(starttls, "-starttls", "smtp") == fingerprint(live_cert)
        trusting_new = ssl.create_default_context(cafile=str(live_cert))
        with smtplib.SMTP_SSL(*implicit, context=trusting_new, timeout=30) as fresh:
            fresh.login("postwire", str(resend.api_key))
            assert fresh.send_message(shop_mail("after the reload", "bo@example.org", "x")) == {}

        # The old session was not dropped: it sends again.
        assert session.send_message(shop_mail("same session", "cy@example.org", "x")) == {}
        session.quit()

        assert live.process.poll() is None and live.process.pid == pid
        assert live.log_text().count("worker 1 is ready") == 1, "no process restarted"
        subjects = {e["subject"] for e in resend.Emails.list({"limit": 10})["data"]}
        assert subjects == {"before the reload", "after the reload", "same session"}
