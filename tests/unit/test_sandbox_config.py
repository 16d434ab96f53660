"""When sandbox mode may be on: only while every listener is on loopback, so never with the
production defaults, however it was turned on."""

from __future__ import annotations

from pathlib import Path

import pytest

from postwire.config import enable_sandbox, is_loopback_host, load_config
from postwire.errors import ConfigError

LOOPBACK_FILE = """
data_dir = "data"
[api]
listen = "localhost:3000"
[smtp]
starttls_listen = ["127.0.0.1:2587", "[::1]:2587"]
tls_listen = ["127.0.0.2:2465"]
"""


@pytest.mark.parametrize(
    ("file", "environ", "refused_key"),
    [
        (None, {}, None),  # the embedded default: loopback only
        (None, {"POSTWIRE_API_LISTEN": "0.0.0.0:3000"}, "api.listen"),
        (None, {"POSTWIRE_SMTP_TLS_LISTEN": "192.0.2.7:465"}, "smtp.tls_listen"),
        ("", {}, "smtp.starttls_listen"),  # production defaults: SMTP on 0.0.0.0
        ("", {"POSTWIRE_SMTP_STARTTLS_LISTEN": "", "POSTWIRE_SMTP_TLS_LISTEN": ""}, None),
        (LOOPBACK_FILE, {}, None),
        (LOOPBACK_FILE, {"POSTWIRE_SMTP_STARTTLS_LISTEN": "[::]:587"}, "smtp.starttls_listen"),
    ],
)
@pytest.mark.parametrize("how", ["--sandbox", "sandbox = true", "POSTWIRE_SANDBOX"])
def test_sandbox_only_with_loopback_listeners(
    tmp_path: Path,
    file: str | None,
    environ: dict[str, str],
    refused_key: str | None,
    how: str,
) -> None:
    path = None
    environ = {"POSTWIRE_DATA_DIR": str(tmp_path), **environ}
    if file is not None:
        path = tmp_path / "postwire.toml"
        path.write_text(("sandbox = true\n" if how == "sandbox = true" else "") + file)
    elif how == "sandbox = true":
        environ["POSTWIRE_SANDBOX"] = "true"  # no file to write it in
    if how == "POSTWIRE_SANDBOX":
        environ["POSTWIRE_SANDBOX"] = "true"

    def load() -> bool:
        config = load_config(path, environ)
        return (enable_sandbox(config) if how == "--sandbox" else config).sandbox

    if refused_key is None:
        assert load() is True
    else:
        with pytest.raises(ConfigError, match=f"sandbox mode is for one machine.*{refused_key}"):
            load()


def test_the_sandbox_is_off_by_default(tmp_path: Path) -> None:
    assert load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)}).sandbox is False


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.0.2.1", False),
        ("mail.example.com", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback
