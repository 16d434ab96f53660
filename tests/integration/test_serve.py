"""`postwire serve` as a real process: starts, reports ready, and stops cleanly on a signal."""

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

import postwire
from postwire import app
from postwire.config import Config, load_config

READY = "postwire is ready"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0

# Port 0 everywhere so that runs in parallel (and a developer's own `postwire serve`) never clash.
EPHEMERAL_LISTENERS = {
    "POSTWIRE_API_LISTEN": "127.0.0.1:0",
    "POSTWIRE_DASHBOARD_LISTEN": "127.0.0.1:0",
    "POSTWIRE_METRICS_LISTEN": "127.0.0.1:0",
    "POSTWIRE_SMTP_STARTTLS_LISTEN": "127.0.0.1:0",
    "POSTWIRE_SMTP_TLS_LISTEN": "127.0.0.1:0",
}


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTWIRE_")}
    env.update(extra)
    return env


class ServeProcess:
    """A `python -m postwire ...` child (or `command ...`) whose stderr is read line by line
    on a thread."""

    def __init__(
        self, args: list[str], cwd: Path, env: dict[str, str], command: list[str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            [*(command or [sys.executable, "-m", "postwire"]), *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = START_TIMEOUT) -> None:
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no {text!r} within {timeout} s; stderr so far:\n{self.stderr}")
            if line is None:
                pytest.fail(f"exited ({self.proc.wait()}) before {text!r}:\n{self.stderr}")
            self.lines.append(line)
            if text in line:
                return

    def stop(self, signum: int) -> int:
        self.proc.send_signal(signum)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"still running {STOP_TIMEOUT} s after {signum!r}:\n{self.stderr}")
        self.drain()
        return code

    def drain(self) -> None:
        while (line := self._queue.get(timeout=STOP_TIMEOUT)) is not None:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def processes() -> Iterator[list[ServeProcess]]:
    started: list[ServeProcess] = []
    yield started
    for process in started:  # a failed test must not leave a server behind
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait()


def write_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "postwire.toml"
    path.write_text(
        f"""
        data_dir = "data"

        [api]
        listen = "127.0.0.1:0"

        [dashboard]
        listen = "127.0.0.1:0"

        [metrics]
        listen = "127.0.0.1:0"

        [smtp]
        starttls_listen = ["127.0.0.1:0"]
        tls_listen = ["127.0.0.1:0"]
        {extra}
        """
    )
    return path


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_with_config_stops_cleanly_on_signal(
    tmp_path: Path, processes: list[ServeProcess], signum: int
) -> None:
    config = write_config(tmp_path)
    serve = ServeProcess(["serve", "--config", str(config)], tmp_path, clean_env())
    processes.append(serve)
    serve.wait_for(READY)
    serve.wait_for(f"-m postwire keys create --name my-key --config {config}")
    assert str(tmp_path / "data") in serve.stderr  # it says where data lives
    assert (tmp_path / "data" / "spool").is_dir()

    assert serve.stop(signum) == 0, serve.stderr
    assert "shutting down" in serve.stderr
    assert "Traceback" not in serve.stderr
    assert (tmp_path / "data" / "spool").is_dir()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_embedded_default_creates_postwire_data(
    tmp_path: Path, processes: list[ServeProcess], signum: int
) -> None:
    serve = ServeProcess(["serve"], tmp_path, clean_env(**EPHEMERAL_LISTENERS))
    processes.append(serve)
    serve.wait_for(READY)
    serve.wait_for("-m postwire keys create --name my-key")
    assert "embedded default" in serve.stderr
    assert serve.stop(signum) == 0, serve.stderr
    assert (tmp_path / "postwire-data" / "spool").is_dir()
    assert "Traceback" not in serve.stderr


def test_serve_reopens_its_data(tmp_path: Path, processes: list[ServeProcess]) -> None:
    config = write_config(tmp_path)
    for _ in range(2):
        serve = ServeProcess(["serve", "--config", str(config)], tmp_path, clean_env())
        processes.append(serve)
        serve.wait_for(READY)
        assert serve.stop(signal.SIGTERM) == 0, serve.stderr


def test_version(tmp_path: Path) -> None:
    expected = f"postwire {postwire.__version__}\n"
    result = subprocess.run(
        [sys.executable, "-m", "postwire", "--version"], capture_output=True, text=True
    )
    assert (result.returncode, result.stdout) == (0, expected)
    script = Path(sys.executable).parent / "postwire"  # the console script pyproject declares
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (0, expected)


def test_unknown_key_in_config_exits_2(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra='lisen = "127.0.0.1:25"')
    result = subprocess.run(
        [sys.executable, "-m", "postwire", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=START_TIMEOUT,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("postwire: unknown config key 'smtp.lisen'")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_unknown_env_var_exits_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "postwire", "serve"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(POSTWIRE_SPOOL_MAPSIZE="1"),
        timeout=START_TIMEOUT,
    )
    assert result.returncode == 2
    assert "unknown config key 'spool.mapsize'" in result.stderr
    assert "POSTWIRE_SPOOL_MAPSIZE" in result.stderr
    assert "Traceback" not in result.stderr


def test_keys_create_elsewhere_refuses_to_start_a_new_spool(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "postwire", "keys", "create", "--name", "mine"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(XDG_CONFIG_HOME=str(tmp_path / "no-config")),
        timeout=START_TIMEOUT,
    )
    assert result.returncode == 2, result.stderr
    assert f"postwire: no Postwire data in {tmp_path / 'postwire-data'}" in result.stderr
    assert "POSTWIRE_CONFIG" in result.stderr and "--config FILE" in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "postwire-data").exists()


def test_every_command_finds_serves_config_from_any_directory(
    tmp_path: Path, processes: list[ServeProcess]
) -> None:
    """serve finds its file in $XDG_CONFIG_HOME; keys create, run elsewhere, through
    $POSTWIRE_CONFIG or the same $XDG_CONFIG_HOME, makes keys the running server knows. Its
    start-up warns of the HELO name no one else can resolve."""
    (tmp_path / "config" / "postwire").mkdir(parents=True)
    config = write_config(tmp_path / "config" / "postwire", '[delivery]\nhelo_name = "localhost"')
    (tmp_path / "serve").mkdir()
    (tmp_path / "elsewhere").mkdir()
    xdg = clean_env(XDG_CONFIG_HOME=str(tmp_path / "config"))
    serve = ServeProcess(["serve"], tmp_path / "serve", xdg)
    processes.append(serve)
    serve.wait_for("REST API listening on ")
    api_url = serve.lines[-1].split("REST API listening on ")[1].split(",")[0].strip()
    serve.wait_for(READY)
    assert f"configuration: {config}" in serve.stderr
    (warning,) = [line for line in serve.lines if " WARNING " in line]
    assert "delivery.helo_name is 'localhost', not a public DNS name" in warning
    assert "Set delivery.helo_name" in warning

    for env in (clean_env(POSTWIRE_CONFIG=str(config)), xdg):
        created = subprocess.run(
            [sys.executable, "-m", "postwire", "keys", "create", "--name", "mine"],
            cwd=tmp_path / "elsewhere",
            capture_output=True,
            text=True,
            env=env,
            timeout=START_TIMEOUT,
        )
        assert created.returncode == 0, created.stderr
        token = created.stdout.strip()
        answer = httpx.get(f"{api_url}/api-keys", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text  # the running server knows the key
    assert serve.stop(signal.SIGTERM) == 0, serve.stderr
    assert not any(tmp_path.rglob("postwire-data")), "no spool in either directory"


def test_unwritable_data_dir_exits_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "postwire", "serve"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(POSTWIRE_DATA_DIR=str(tmp_path / "file" / "data"), **EPHEMERAL_LISTENERS),
        timeout=START_TIMEOUT,
    )
    assert result.returncode == 2, result.stderr
    assert "postwire: config key 'data_dir': cannot create" in result.stderr
    assert "Traceback" not in result.stderr


async def test_run_in_process_reports_ready_and_returns_on_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(None, EPHEMERAL_LISTENERS)
    with trio.fail_after(START_TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.run, config)
            assert (tmp_path / "postwire-data" / "spool").is_dir()
            # run() holds SIGTERM through trio's signal receiver, so this only asks it to stop.
            os.kill(os.getpid(), signal.SIGTERM)
    # Leaving the nursery means run() returned on its own.


# --- the supervisor's shutdown order, with stand-in services -----------------------------------


def stand_in_service(name: str, log: list[str], *, finishes: bool) -> app.Service[None]:
    async def serve(
        config: Config, deps: app.ServiceDeps, *, task_status: trio.TaskStatus[None]
    ) -> None:
        task_status.started()
        await deps.stopping.wait()
        log.append(f"{name} stopping")
        try:
            if not finishes:
                await trio.sleep_forever()
            await trio.sleep(0.05)  # in-flight work
            assert deps.spool.get("meta", b"absent") is None  # the spool is still open
            log.append(f"{name} finished")
        except trio.Cancelled:
            log.append(f"{name} cancelled")
            raise

    return serve


def install(
    monkeypatch: pytest.MonkeyPatch, processing: app.Service[None], intake: app.Service[None]
) -> None:
    async def start_processing(
        stage: app.Stage, config: Config, deps: app.ServiceDeps
    ) -> app.ServiceDeps:
        await stage.start(processing, config, deps)
        return deps

    async def start_intake(
        stage: app.Stage, config: Config, deps: app.ServiceDeps, record: object
    ) -> None:
        await stage.start(intake, config, deps)

    monkeypatch.setattr(app, "_start_processing", start_processing)
    monkeypatch.setattr(app, "_start_intake", start_intake)


async def run_until_signals(tmp_path: Path, count: int) -> float:
    config = load_config(None, {**EPHEMERAL_LISTENERS, "POSTWIRE_DATA_DIR": str(tmp_path)})
    with trio.fail_after(START_TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(app.run, config)
            started = trio.current_time()
            for _ in range(count):
                os.kill(os.getpid(), signal.SIGTERM)
                await trio.sleep(0.2)
    return trio.current_time() - started


async def test_shutdown_stops_intake_then_processing_then_spool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    install(
        monkeypatch,
        processing=stand_in_service("processing", log, finishes=True),
        intake=stand_in_service("intake", log, finishes=True),
    )
    await run_until_signals(tmp_path, 1)
    assert log == [
        "intake stopping",
        "intake finished",
        "processing stopping",
        "processing finished",
    ]


async def test_shutdown_cancels_work_that_outlives_the_grace_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    monkeypatch.setattr(app, "SHUTDOWN_GRACE_SECONDS", 0.5)
    install(
        monkeypatch,
        processing=stand_in_service("processing", log, finishes=False),
        intake=stand_in_service("intake", log, finishes=True),
    )
    elapsed = await run_until_signals(tmp_path, 1)
    assert log == [
        "intake stopping",
        "intake finished",
        "processing stopping",
        "processing cancelled",
    ]
    assert 0.5 <= elapsed < 5


async def test_second_signal_skips_the_grace_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    install(
        monkeypatch,
        processing=stand_in_service("processing", log, finishes=False),
        intake=stand_in_service("intake", log, finishes=False),
    )
    elapsed = await run_until_signals(tmp_path, 2)
    assert log == [
        "intake stopping",
        "intake cancelled",
        "processing stopping",
        "processing cancelled",
    ]
    assert elapsed < app.SHUTDOWN_GRACE_SECONDS


async def test_signal_during_startup_abandons_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starting = trio.Event()
    log: list[str] = []

    async def never_ready(
        config: Config, deps: app.ServiceDeps, *, task_status: trio.TaskStatus[None]
    ) -> None:
        starting.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            log.append("startup cancelled")
            raise

    install(
        monkeypatch, processing=never_ready, intake=stand_in_service("intake", log, finishes=True)
    )
    config = load_config(None, {**EPHEMERAL_LISTENERS, "POSTWIRE_DATA_DIR": str(tmp_path)})
    with trio.fail_after(START_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app.run, config)
            await starting.wait()
            os.kill(os.getpid(), signal.SIGTERM)
    assert log == ["startup cancelled"]  # intake never started
