"""What the live server's launcher keeps of its log: every line for tests, which wait for any
line of the current run; a bounded tail past start-up for servers that log without end."""

from __future__ import annotations

from tests.live_postwire import ServerLog

START_UP = ["REST API listening on http://127.0.0.1:1\n", "postwire is ready\n"]


def test_an_unbounded_log_keeps_every_run_and_searches_the_current_one() -> None:
    log = ServerLog()
    log.new_run()
    for line in [*START_UP, "first run's line\n"]:
        log.append(line)
    log.new_run()
    for line in [*START_UP, "second run's line\n"]:
        log.append(line)
    assert "first run's line" not in log.run_text()
    assert log.run_text() == "".join([*START_UP, "second run's line\n"])
    assert log.text().count("postwire is ready") == 2 and "first run's line" in log.text()


def test_a_bounded_log_keeps_the_start_up_and_the_last_lines() -> None:
    log = ServerLog(tail=3)
    log.new_run()
    for line in [*START_UP, *(f"request {n}\n" for n in range(1000))]:
        log.append(line)
    kept = ["request 997\n", "request 998\n", "request 999\n"]
    assert log.run_text() == "".join([*START_UP, *kept])
    assert log.text() == "".join([*START_UP, "[997 lines not kept]\n", *kept])
    # A new run starts from nothing: its start-up is kept whole again.
    log.new_run()
    for line in ["starting\n", *START_UP]:
        log.append(line)
    assert log.text() == "starting\n" + "".join(START_UP)
