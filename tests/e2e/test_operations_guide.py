"""docs/operations.md, the steps that run here: the shipped systemd unit passes
`systemd-analyze verify`; a service with `log_format = "json"` and worker processes writes one
JSON object a line; every series the shipped alert rules use is one that live `/metrics` serves."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import yaml

from tests.e2e.conftest import _clean_env, wait_until, write_config
from tests.peers import require_peer
from tests.ports import free_address
from tests.processes import stop_process

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "postwire.service"
ALERTS = ROOT / "deploy" / "prometheus-alerts.yml"
METRIC_NAME = re.compile(r"\b(postwire_[a-z_]+)\b")


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = require_peer(shutil.which("systemd-analyze"), "systemd-analyze", "systemd")
    text = UNIT.read_text()
    # The unit as shipped, its ExecStart pointed at this checkout's postwire (verify checks
    # that the program exists).
    assert "ExecStart=/opt/postwire/venv/bin/postwire serve" in text
    unit = tmp_path / "postwire.service"
    unit.write_text(text.replace("/opt/postwire/venv/bin/postwire", f"{sys.prefix}/bin/postwire"))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    for line in ("User=postwire", "AmbientCapabilities=CAP_NET_BIND_SERVICE", "Restart=on-failure",
                 "ExecReload=/bin/kill -HUP $MAINPID", "NoNewPrivileges=yes"):  # fmt: skip
        assert f"\n{line}\n" in text


def test_json_log_lines_and_the_alert_rules_series(tmp_path: Path) -> None:
    config, metrics = tmp_path / "postwire.toml", free_address()
    write_config(config, tmp_path / "data", processes=2, metrics_listen=metrics)
    config.write_text('log_format = "json"\n' + config.read_text())
    log = tmp_path / "serve.log"
    with log.open("wb") as stderr:
        serve = subprocess.Popen(
            [sys.executable, "-m", "postwire", "serve", "--config", str(config)],
            stderr=stderr,
            env=_clean_env(),
        )
    try:
        wait_until(lambda: "postwire is ready" in log.read_text(), "postwire is ready", 60)
        exposition = httpx.get(f"http://{metrics}/metrics").text
    finally:
        stop_process(serve, sig=signal.SIGTERM)

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {"time", "level", "logger", "pid", "process", "message"} <= lines[0].keys()
    assert {line["process"] for line in lines} == {"main", "worker 1"}
    assert any(line["message"].startswith("postwire is ready") for line in lines)
    assert any(line["message"] == "stopped" for line in lines)

    served = set(re.findall(r"^# TYPE (\S+) ", exposition, re.MULTILINE))
    rules = [
        rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]
    ]
    used = {name for rule in rules for name in METRIC_NAME.findall(rule["expr"])}
    assert used and used <= served, f"not served: {sorted(used - served)}"
    for rule in rules:
        assert rule["alert"].startswith("Postwire") and rule["labels"]["severity"]
        assert rule["annotations"]["summary"] and rule["for"]
