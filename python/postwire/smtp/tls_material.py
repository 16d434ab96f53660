"""The certificate and key SMTP submission offers in STARTTLS and implicit TLS.

Configured ones (`smtp.tls_cert`, `smtp.tls_key`) are used as they are. Without them a
self-signed certificate is generated once, on first start, under `data_dir/tls` and reused on
every later start, so clients that pinned it keep working.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import ssl
import subprocess
from pathlib import Path

import trio

from postwire.config import Config
from postwire.errors import ConfigError

SELF_SIGNED_DAYS = 3650

log = logging.getLogger("postwire.smtp")


async def ensure_tls_material(config: Config) -> tuple[Path, Path]:
    """The (certificate, key) paths to serve, generating the self-signed pair if needed."""
    if config.smtp.tls_cert is not None and config.smtp.tls_key is not None:
        return config.smtp.tls_cert, config.smtp.tls_key
    directory = config.data_dir / "tls"
    cert, key = directory / "smtp-cert.pem", directory / "smtp-key.pem"
    if cert.exists() and key.exists():
        return cert, key
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Written under temporary names and renamed: a crash mid-way leaves no half pair behind.
    cert_tmp, key_tmp = cert.with_suffix(".tmp"), key.with_suffix(".tmp")
    host = socket.getfqdn() or "localhost"
    subject_alt_names = f"subjectAltName=DNS:{host},DNS:localhost,IP:127.0.0.1,IP:::1"
    try:
        await trio.run_process(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
             "-days", str(SELF_SIGNED_DAYS), "-subj", f"/CN={host}",
             "-addext", subject_alt_names, "-keyout", str(key_tmp), "-out", str(cert_tmp)],
            capture_stdout=True,
            capture_stderr=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ConfigError(
            f"cannot generate a self-signed SMTP certificate with openssl ({exc}); set "
            "smtp.tls_cert and smtp.tls_key"
        ) from None
    os.chmod(key_tmp, 0o600)
    os.replace(key_tmp, key)
    os.replace(cert_tmp, cert)
    return cert, key


class ServedCertificate:
    """The TLS context new SMTP sessions get, read again from its files by `reload` (SIGHUP):
    sessions already open keep the context they began with, new ones get the new one."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = cert, key
        self.context = server_tls_context(cert, key)

    def reload(self) -> None:
        """Read the certificate and key again; on an error keep serving the current ones."""
        try:
            self.context = server_tls_context(self.cert, self.key)
        except ConfigError as exc:
            log.error("SIGHUP: %s; still serving the certificate loaded before", exc)
            return
        log.info(
            "SIGHUP: SMTP certificate reloaded from %s (SHA-256 %s)",
            self.cert, certificate_fingerprint(self.cert),
        )  # fmt: skip


def certificate_fingerprint(cert: Path) -> str:
    """SHA-256 of the first certificate in the PEM file, as `openssl x509 -fingerprint` says."""
    pem = cert.read_text()
    first = pem[: pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(first)).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def server_tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the SMTP certificate {str(cert)!r}: {exc}") from None
    return context
