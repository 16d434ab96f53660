"""What counting an event into the metrics costs: `python -m benchmarks.event_counting`.

Events of an email (sent, delivered, a bounce) are recorded with
`postwire.store.deliveries.add_event` into a batch and committed to a fresh spool, with the
metrics' counting on and off in alternate rounds (`metrics.count_events`), with no tag and with
two tags. The report gives the median CPU time per event of recording it (this thread's own)
and of committing it (the process's, the spool's writer thread included), so other processes
on a busy machine do not inflate it, and the ratio on/off of each (ratios, not a timed
assertion).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from postwire import _core
from postwire.metrics.counters import set_event_counting
from postwire.store.deliveries import add_event
from postwire.store.spool import TABLES

TEAM = "0190a000-0000-7000-8000-000000000001"
DOMAIN = "0190a000-0000-7000-8000-0000000000d1"
# What one email's delivery records, in the proportions of a day with a 2% bounce rate.
EVENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("email.sent", {}),
    ("email.delivered", {"to": "ann@gmail.example"}),
    ("email.delivered", {"to": "bob@yahoo.example"}),
    ("email.bounced", {"to": "cay@gmail.example", "bounce": {"type": "Permanent"}}),
)


def one_round(spool: _core.Spool, events: int, tags: tuple[str, ...]) -> tuple[float, float]:
    """(µs of thread CPU to record, µs of process CPU to commit) per event."""
    now_ms = time.time_ns() // 1_000_000
    batch = _core.WriteBatch()
    started = time.thread_time_ns()
    for number in range(events):
        kind, data = EVENTS[number % len(EVENTS)]
        add_event(batch, TEAM, f"email-{number}", kind, now_ms, domain_id=DOMAIN,
                  counted_tags=tags, **data)  # fmt: skip
    recorded = time.thread_time_ns()
    before_commit = time.process_time_ns()
    spool.commit(batch)
    committed = time.process_time_ns()
    return (recorded - started) / events / 1e3, (committed - before_commit) / events / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200, help="events a commit")
    parser.add_argument("--rounds", type=int, default=60, help="rounds each way")
    options = parser.parse_args()
    print(f"{options.events} events a commit, {options.rounds} rounds on and off, medians")
    print(f"{'tags':>4}  {'record on':>10} {'off':>8} {'ratio':>6}  {'commit on':>10} {'off':>8}")
    for tags in ((), ("kind:receipt", "shop:eu")):
        spool = _core.Spool(Path(tempfile.mkdtemp()) / "spool", tables=list(TABLES))
        samples: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for number in range(2 * options.rounds):
            counting = number % 2 == 0
            set_event_counting(counting)
            samples[counting].append(one_round(spool, options.events, tags))
        spool.close()
        on, off = ([statistics.median(s[i] for s in samples[c]) for i in (0, 1)]
                   for c in (True, False))  # fmt: skip
        print(f"{len(tags):>4}  {on[0]:>8.2f}µs {off[0]:>6.2f}µs {on[0] / off[0]:>6.2f}  "
              f"{on[1]:>8.2f}µs {off[1]:>6.2f}µs")  # fmt: skip
    set_event_counting(True)


if __name__ == "__main__":
    main()
