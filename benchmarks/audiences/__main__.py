"""`make bench-audiences`: an import of a million contacts from CSV through a live
`postwire serve`: contacts/s and the server's peak memory.

1. The server is the API benchmark's (`postwire serve` on an ephemeral loopback port, no SMTP
   listeners), its spool map sized for the run. Through the API: a key, the contact properties
   `plan` (string) and `seats` (number), a segment.
2. The CSV, written to disk before the server starts: N rows of
   `email,first_name,last_name,plan,seats`, about 40 bytes each (a million rows fit the 50 MB
   cap), one in 1,000 with an address that is not one (refused and reported, the rest kept).
3. `POST /contacts/imports` with the file streamed from disk, `on_conflict=upsert` and the
   segment: the upload is timed on its own (the answer comes once the file is in the spool).
4. The import: from the 201 to the first `GET /contacts/imports/{id}` (polled every 0.25 s)
   that reads `completed`, every row then applied: each contact written with its address index,
   segment membership and `contact.created` webhook event, in commits of 1,000 rows with the
   job's cursor. Contacts/s = rows / that time. Meanwhile the server's memory is sampled:
   VmHWM (the kernel's peak resident set) as asked, and the peak of RssAnon beside it, since
   the spool's map counts in VmHWM as page cache (see `benchmarks.broadcasts.memory`).
5. With `--profile`: a second import of `--profile-contacts` new rows under py-spy.

Progress goes to stderr, the Markdown report to stdout and to `--output`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from benchmarks.api.profile import profile_section
from benchmarks.audiences.run import BAD_EVERY, Measured, run_benchmark
from benchmarks.report import (
    LoadAverages,
    add_report_options,
    check_options,
    machine_description,
    measure_and_render,
    rate_over_tenths,
    report_to_file,
    server_source,
)


def report(args: argparse.Namespace, m: Measured, load_average: LoadAverages) -> str:
    lines = [
        f"# Contact import throughput, {datetime.date.today().isoformat()}",
        "",
        f"{machine_description()}. One `postwire serve` (`processes = {args.processes}`), "
        f"`POST /contacts/imports` of a CSV of {m.rows:,} rows ({m.file_bytes / 1e6:.1f} MB: "
        "email, two names, a string and a number contact property; one row in "
        f"{BAD_EVERY:,} refused), `on_conflict=upsert`, every contact put in a segment. Each "
        "row's contact is written with its address index, its segment membership and its "
        "`contact.created` webhook event, 1,000 rows a commit with the job's cursor and counts. "
        f"Load average before {load_average.before:.2f}, after {load_average.after:.2f}. "
        f"Server: {server_source()}. Command: "
        f"`{shlex.join(['python', '-m', 'benchmarks.audiences', *args.argv])}`.",
        "",
        "| figure | measured |",
        "|---|---:|",
        f"| contacts imported/s (201 to status `completed`) | {m.per_s:,.0f} |",
        f"| import time | {m.seconds:,.1f} s |",
        f"| upload of the file, to its 201 | {m.upload_seconds:,.1f} s |",
        f"| peak resident set of the server, VmHWM | {m.memory.vm_hwm:,.0f} MiB |",
        f"| peak of its anonymous memory, RssAnon (heap) | {m.memory.rss_anon:,.0f} MiB |",
        "",
        f"Counts at the end: `{json.dumps(m.final['counts'])}`. The server kept "
        f"{m.server_cpu:.2f} cores busy on average, everything else on the machine "
        f"{m.other_cpu:.2f} (2 = the whole machine).",
        "",
        "VmHWM counts the pages of the spool's LMDB map the server wrote or read (WRITEMAP: "
        "file-backed page cache the kernel may take back); RssAnon, sampled every 0.2 s with "
        f"the file-backed share beside it ({m.memory.rss_file_at_anon_peak:,.0f} MiB at its "
        "peak), is what the server itself holds: a window of the file and one slice of rows, "
        "whatever the file's size.",
        "",
        "CPU seconds of the server's threads during the import, by thread name:",
        "",
        "| thread | CPU seconds | per contact |",
        "|---|---:|---:|",
    ]
    for name, seconds in sorted(m.threads.items(), key=lambda item: -item[1]):
        lines.append(f"| `{name}` | {seconds:.1f} | {seconds / m.rows * 1e6:.0f} µs |")
    if len(m.progress) > 2:
        lines += ["", *rate_over_tenths(m.progress, "rows")]
    for profiled in m.profiles:
        lines += profile_section(
            profiled,
            why_the_gil="the Trio thread runs the import job and the API; the spool's "
            "commits release the GIL and run beside it",
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options, checked (a usage error exits)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.audiences",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--contacts", type=int, default=1_000_000, help="rows of the CSV")
    parser.add_argument("--processes", type=int, default=1, help="Postwire's `processes`")
    parser.add_argument(
        "--import-timeout", type=float, default=3600.0, help="seconds an import may take"
    )
    add_report_options(
        parser, report_name="audiences", profile_help="profile an extra import (py-spy)"
    )
    parser.add_argument("--profile-seconds", type=int, default=15)
    parser.add_argument(
        "--profile-contacts", type=int, default=200_000, help="rows of the profiled import"
    )
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    check_options(
        parser,
        args,
        at_least_one=("contacts", "processes", "profile_contacts", "profile_seconds"),
        make_target="bench-audiences",
    )
    return args


def measure(args: argparse.Namespace, profile_base: Path | None) -> tuple[Measured, str]:
    """Run the benchmark: what it measured, and its Markdown report."""
    return measure_and_render(
        work_prefix="postwire-bench-audiences-",
        measure=partial(run_benchmark, args),
        render=lambda measured, load_average: report(args, measured, load_average),
        profile_base=profile_base,
    )


def main() -> None:
    args = parse_args()
    report_to_file(args, partial(measure, args))


if __name__ == "__main__":
    main()
