"""A second `postwire serve` on a data directory that one already runs on says so (its pid and
addresses) before it binds anything, whatever ports it was given; a port another program holds
is named with the config key and the environment variable that chose it."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import LiveServer, _clean_env, write_config
from tests.ports import free_port


def postwire_command(config: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`postwire ARGS --config config` run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "postwire", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env() | env,
    )


def serve(config: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`postwire serve --config config` run to its end (a refusal ends it at once)."""
    return postwire_command(config, "serve", **env)


def test_a_second_serve_on_one_data_dir_names_the_first(tmp_path: Path) -> None:
    api, smtp, metrics = (f"127.0.0.1:{free_port()}" for _ in range(3))
    live = LiveServer(config_path=tmp_path / "postwire.toml", data_dir=tmp_path / "data")
    write_config(
        live.config_path, live.data_dir, api_listen=api, starttls_listen=(smtp,),
        metrics_listen=metrics,
    )  # fmt: skip
    live.start()
    try:
        assert live.process is not None
        first_pid = live.process.pid
        # The same config, and the same data directory with every port moved elsewhere.
        other_ports = {
            "POSTWIRE_API_LISTEN": f"127.0.0.1:{free_port()}",
            "POSTWIRE_METRICS_LISTEN": "127.0.0.1:0",
            "POSTWIRE_SMTP_STARTTLS_LISTEN": "127.0.0.1:0",
        }
        for env in ({}, other_ports):
            second = serve(live.config_path, **env)
            assert second.returncode == 1, second.stderr
            said = second.stderr
            assert f"Postwire already runs on the data directory {live.data_dir}" in said
            assert f"pid {first_pid} on host {socket.gethostname()}" in said
            assert f"REST API {api}" in said and f"SMTP {smtp} (STARTTLS)" in said
            assert f"metrics {metrics}" in said
            assert "Address already in use" not in said and "Traceback" not in said
        # The first one was left alone.
        assert httpx.get(f"{live.base_url}/emails").status_code == 401

        # Killed, it leaves its claim behind; its pid no longer runs, so `postwire status` says
        # so (the same notion of dead) and a new one starts at once.
        live.stop(signal.SIGKILL)
        status = json.loads(postwire_command(live.config_path, "status", "--json").stdout)
        assert status["running"] is False
        assert [(p["pid"], p["alive"]) for p in status["processes"]] == [(first_pid, False)]
        live.start()
        assert live.process is not None and live.process.pid != first_pid
        second = serve(live.config_path, **other_ports)
        assert f"pid {live.process.pid} on host" in second.stderr
        # Stopped gracefully, it gives the directory up.
        assert live.stop() == 0
        live.start()
    finally:
        if live.process is not None:
            live.stop()


@pytest.mark.parametrize(
    ("key", "variable", "field"),
    [
        ("api.listen", "POSTWIRE_API_LISTEN", "api_listen"),
        ("dashboard.listen", "POSTWIRE_DASHBOARD_LISTEN", "dashboard_listen"),
        ("smtp.starttls_listen", "POSTWIRE_SMTP_STARTTLS_LISTEN", "starttls_listen"),
    ],
)
def test_a_port_another_program_holds_is_named_with_its_key(
    tmp_path: Path, key: str, variable: str, field: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        address = f"127.0.0.1:{port}"
        value: Any = (address,) if field == "starttls_listen" else address
        config = tmp_path / "postwire.toml"
        write_config(config, tmp_path / "data", **{field: value})
        result = serve(config)
    assert result.returncode == 2, result.stderr
    assert (
        f"postwire: cannot listen on {address}: port {port} is already in use by another "
        f"program (asked for by config key {key!r}, environment variable {variable}): stop "
        "that program, or choose another port there"
    ) in result.stderr
    assert "Traceback" not in result.stderr
