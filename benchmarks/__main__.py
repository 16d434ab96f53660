"""`make bench`: every benchmark of Postwire in one run, and one report.

The sections run in this order, each as its own command would run it (`python -m
benchmarks.<module>`, which checks the same options), with the counts given here:

- smtp (`benchmarks.smtp`): the SMTP relay end to end, the headline: `smtp-source -d -s 50` ->
  stunnel -> implicit TLS -> Postwire, Postfix + OpenDKIM and Postfix alone -> `smtp-sink`,
  20,000 messages a round of 4 KiB and of 100 KiB, 3 alternating rounds, then an extra round of
  Postwire under py-spy.
- rest (`benchmarks.delivery`): the REST API to the sink, batch calls and single sends:
  accepted/s, delivered/s, p50 and p99 of a call.
- api (`benchmarks.api`): the REST API's accepting alone, driven by wrk.
- webhooks (`benchmarks.webhooks`): the REST run with a webhook endpoint subscribed to every
  kind, and the dispatcher's capacity against the mail rate.
- broadcasts (`benchmarks.broadcasts`): a broadcast to a segment of a million contacts, spooled
  end to end (render, personalize, sign, commit): messages/s, the server's memory, the p99 of
  `POST /emails` beside it against idle, with a profiled extra broadcast.
- audiences (`benchmarks.audiences`): an import of a million contacts from CSV: contacts/s and
  the server's peak memory, with a profiled extra import.
- core (`benchmarks.core`): DKIM against dkimpy, MIME against `email`, the spool's group
  commit against one commit a message.
- insights (`benchmarks.insights_cost`): the SMTP relay and batch REST messages/s with
  deliverability insights and event counters on against both off, side by side.

It writes one Markdown report, `benchmarks/results/<date>.md` (`--output`): the performance
goals and whether each is met, the headline table with its chart beside the report
(`<date>-smtp.svg`), the hot spots of the profile (`<date>-smtp-profile.txt`, also beside it),
then every section's own tables. Progress goes to stderr. A section that fails is reported as
failed and the others still run; the command then exits 1.

`--gate FILE` (`make bench-gate`, with small counts): the figures FILE names
(`benchmarks/gate.toml`) are checked against their minimums; a table of figure, measured,
minimum and pass or fail goes to stdout, and the command exits 1 when any falls below or was not
measured. With `--gate` the report is written only where `--output` says.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import chart, gate
from benchmarks.api import __main__ as api
from benchmarks.api.profile import Profiled
from benchmarks.audiences import __main__ as audiences
from benchmarks.broadcasts import __main__ as broadcasts
from benchmarks.core import __main__ as core
from benchmarks.delivery import __main__ as delivery
from benchmarks.gate import Threshold
from benchmarks.insights_cost import __main__ as insights_cost
from benchmarks.report import RESULTS_DIR, machine_description, progress, server_source
from benchmarks.smtp import __main__ as smtp
from benchmarks.webhooks import __main__ as webhooks

SIZES = (("4kib", "4 KiB"), ("100kib", "100 KiB"))  # as figure names spell them, and reports
# Postwire's performance goals for the SMTP relay, end to end (delivered to the sink).
GOALS = [
    *(
        Threshold(
            f"smtp.{size}.delivered.postwire/postfix-opendkim",
            3.0,
            f"SMTP relay >= 3x Postfix + OpenDKIM ({label})",
        )
        for size, label in SIZES
    ),
    *(
        Threshold(f"smtp.{size}.delivered.postwire/postfix", 1.0, f"above Postfix alone ({label})")
        for size, label in SIZES
    ),
    Threshold("smtp.100kib.delivered.postwire", 750.0, ">= 750 messages/s of 100 KiB delivered"),
    *broadcasts.GOALS,
    *insights_cost.GOALS,
]
# The profile's functions named in the headline.
HOT_SPOTS = 5


@dataclass(frozen=True)
class Option:
    """A section's option the driver passes on: `--<section>-<name>` becomes `--<name>`."""

    name: str
    default: str | None  # the full run's; None: the section's own default
    help: str
    many: bool = False  # takes several values


@dataclass
class Outcome:
    markdown: str
    figures: dict[str, float] = field(default_factory=dict)  # named for goals and the gate
    headline: tuple[list[smtp.Figure], list[Profiled]] | None = None  # the SMTP section's
    failed: bool = False


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    parse: Callable[[Sequence[str]], argparse.Namespace]
    run: Callable[[argparse.Namespace, Path | None], Outcome]
    options: tuple[Option, ...]
    profiles: bool = False  # profiled by default, saved beside the report


def slug(name: str) -> str:
    """A size as figure names spell it: "4 KiB" -> "4kib"."""
    return name.replace(" ", "").lower()


def smtp_figures(figures: list[smtp.Figure]) -> dict[str, float]:
    """Postwire's rates, and its ratios to each baseline, per size: `smtp.4kib.delivered.postwire`
    (messages/s) and `smtp.4kib.delivered.postwire/postfix-opendkim`."""
    named: dict[str, float] = {}
    baselines = {name: option for option, name in smtp.BASELINES.items()}
    for figure in figures:
        if figure.server != smtp.POSTWIRE:
            continue
        size = figure.size.name
        for value, word in (("accepted_per_s", "accepted"), ("delivered_per_s", "delivered")):
            named[f"smtp.{slug(size)}.{word}.postwire"] = figure.median(value)
            for name, option in baselines.items():
                ratio = smtp.ratio(figures, size, value, name)
                if ratio is not None:
                    named[f"smtp.{slug(size)}.{word}.postwire/{option}"] = ratio
    return named


def run_smtp(args: argparse.Namespace, profile_base: Path | None) -> Outcome:
    (figures, profiles), text = smtp.measure(args, profile_base)
    return Outcome(text, smtp_figures(figures), headline=(figures, profiles))


def run_rest(args: argparse.Namespace, profile_base: Path | None) -> Outcome:
    _, text = delivery.measure(args, profile_base)
    return Outcome(text)


def run_api(args: argparse.Namespace, profile_base: Path | None) -> Outcome:
    (figures, _), text = api.measure(args, profile_base)
    if any(s.errors for f in figures for s in f.samples):
        text += "\nSome requests failed during the timed rounds: these figures are not valid.\n"
        return Outcome(text, failed=True)
    return Outcome(text)


def run_webhooks(args: argparse.Namespace, profile_base: Path | None) -> Outcome:
    _, text = webhooks.measure(args, profile_base)
    return Outcome(text)


def run_broadcasts(args: argparse.Namespace, profile_base: Path | None) -> Outcome:
    measured, text = broadcasts.measure(args, profile_base)
    return Outcome(text, broadcasts.figures(measured))


def run_audiences(args: argparse.Namespace, profile_base: Path | None) -> Outcome:
    _, text = audiences.measure(args, profile_base)
    return Outcome(text)


def run_core(args: argparse.Namespace, profile_base: Path | None) -> Outcome:
    medians = core.measure(args.rounds, args.seconds, args.only)
    named = {f"core.{key}": ratio for key, ratio in core.ratios(medians).items()}
    return Outcome(core.report(medians, args.rounds, args.seconds), named)


def run_insights(args: argparse.Namespace, profile_base: Path | None) -> Outcome:
    measured, text = insights_cost.measure(args, profile_base)
    return Outcome(text, insights_cost.named_figures(measured.figures))


SECTIONS = [
    Section(
        "smtp",
        "SMTP relay end to end",
        smtp.parse_args,
        run_smtp,
        (
            Option("rounds", "3", "alternating rounds"),
            Option("messages-small", "20000", "4 KiB messages a round and server"),
            Option("messages-large", "20000", "100 KiB messages a round and server"),
            Option("warmup", None, "4 KiB messages a server, untimed"),
            Option("deliver-timeout", "900", "seconds a round may take"),
            Option("baselines", None, "the rivals (default: all)", many=True),
            Option("processes", None, "Postwire's processes"),
        ),
        profiles=True,
    ),
    Section(
        "rest",
        "REST API to the sink",
        delivery.parse_args,
        run_rest,
        (
            Option("rounds", None, "alternating rounds"),
            Option("messages-small", None, "4 KiB emails a round, batch and single"),
            Option("messages-large", None, "100 KiB emails a round, batch and single"),
            Option("sends", None, "batch and/or single (default: both)", many=True),
            Option("processes", None, "Postwire's processes"),
        ),
    ),
    Section(
        "api",
        "REST API accepting (wrk)",
        api.parse_args,
        run_api,
        (
            Option("rounds", None, "alternating rounds"),
            Option("seconds", None, "per figure and round"),
        ),
    ),
    Section(
        "webhooks",
        "Webhooks in the budget",
        webhooks.parse_args,
        run_webhooks,
        (
            Option("rounds", None, "alternating rounds"),
            Option("emails", None, "4 KiB emails a round"),
            Option("events", None, "events pre-filled for the dispatcher's capacity run"),
        ),
    ),
    Section(
        "broadcasts",
        "A broadcast to a million contacts",
        broadcasts.parse_args,
        run_broadcasts,
        (
            Option("contacts", None, "the segment's size"),
            Option("profile-contacts", None, "the profiled broadcast's segment"),
        ),
        profiles=True,
    ),
    Section(
        "audiences",
        "An import of a million contacts",
        audiences.parse_args,
        run_audiences,
        (
            Option("contacts", None, "rows of the CSV"),
            Option("profile-contacts", None, "rows of the profiled import"),
        ),
        profiles=True,
    ),
    Section(
        "core",
        "Core micro-benchmarks",
        core.parse_args,
        run_core,
        (
            Option("rounds", None, "alternating rounds"),
            Option("seconds", None, "per figure and round"),
        ),
    ),
    Section(
        "insights",
        "Cost of insights and counters",
        insights_cost.parse_args,
        run_insights,
        (
            Option("rounds", None, "alternating rounds"),
            Option("messages", None, "4 KiB messages a run"),
            Option("warmup", None, "messages a way and server, untimed"),
            Option("processes", None, "each server's processes"),
        ),
        profiles=True,
    ),
]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    names = [s.name for s in SECTIONS]
    parser.add_argument(
        "--sections", nargs="+", choices=names, default=names, help="the sections to run"
    )
    parser.add_argument(
        "--output",
        type=Path,
        help=f"the report (default: {RESULTS_DIR}/<today>.md; with --gate, none)",
    )
    parser.add_argument(
        "--no-profile", action="store_true", help="skip the profiled SMTP round (py-spy)"
    )
    parser.add_argument("--gate", type=Path, help="check the figures against this file's minimums")
    for section in SECTIONS:
        group = parser.add_argument_group(f"{section.name}: {section.title}")
        for option in section.options:
            default = f"{option.default} here" if option.default else "the section's own"
            group.add_argument(
                f"--{section.name}-{option.name}",
                nargs="+" if option.many else None,
                default=option.default,
                help=f"{option.help} (default: {default})",
            )
    args = parser.parse_args(argv)
    if args.output is None and args.gate is None:
        args.output = RESULTS_DIR / f"{datetime.date.today().isoformat()}.md"
    if args.gate is not None:
        try:
            args.thresholds = gate.load(args.gate)
        except gate.GateFileError as error:
            parser.error(str(error))
    return args


def section_argv(args: argparse.Namespace, section: Section) -> list[str]:
    """The section's own command line, from the driver's options."""
    argv = []
    for option in section.options:
        value = getattr(args, f"{section.name}_{option.name}".replace("-", "_"))
        if value is not None:
            argv += [f"--{option.name}", *(value if option.many else [value])]
    # A profile is saved beside the report: none without one.
    if section.profiles and not args.no_profile and args.output is not None:
        argv.append("--profile")
    return argv


def demoted(markdown: str) -> str:
    """A section's report under the full report's title: every heading one level down."""
    return "\n".join("#" + line if line.startswith("#") else line for line in markdown.split("\n"))


def arranged(
    figures: list[smtp.Figure],
) -> tuple[list[str], list[str], dict[tuple[str, str], smtp.Figure]]:
    """The servers and the sizes in the order they ran, and each figure by (server, size)."""
    servers = list(dict.fromkeys(f.server for f in figures))
    sizes = list(dict.fromkeys(f.size.name for f in figures))
    return servers, sizes, {(f.server, f.size.name): f for f in figures}


def headline(figures: list[smtp.Figure], chart_name: str | None) -> list[str]:
    """The SMTP relay's medians, per size and server, and the chart of them."""
    servers, sizes, by = arranged(figures)
    lines = [
        "| message body | server | messages a round | accepted/s | delivered/s "
        "| Postwire / this server, delivered/s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for size in sizes:
        for server in servers:
            figure = by[server, size]
            ratio = smtp.ratio(figures, size, "delivered_per_s", server)
            lines.append(
                f"| {size} | {server} | {figure.size.messages:,} "
                f"| {figure.median('accepted_per_s'):,.0f} "
                f"| {figure.median('delivered_per_s'):,.0f} "
                f"| {'' if server == smtp.POSTWIRE or ratio is None else f'{ratio:.2f}x'} |"
            )
    if chart_name is None:
        return lines
    return [*lines, "", f"![SMTP relay end to end, medians]({chart_name})"]


def headline_chart(figures: list[smtp.Figure]) -> str:
    servers, sizes, by = arranged(figures)
    groups = []
    for size in sizes:
        for value, word in (("accepted_per_s", "accepted/s"), ("delivered_per_s", "delivered/s")):
            marks = []
            if word == "delivered/s" and (smtp.POSTFIX_DKIM, size) in by:
                rival = by[smtp.POSTFIX_DKIM, size].median(value)
                marks.append(chart.Mark("goal: 3x Postfix + OpenDKIM", 3 * rival))
            if word == "delivered/s" and size == "100 KiB":
                marks.append(chart.Mark("goal: 750/s", 750.0))
            values = [by[s, size].median(value) if (s, size) in by else None for s in servers]
            groups.append(chart.Group(f"{size}, {word}", values, marks))
    return chart.bar_chart(
        "SMTP relay end to end: 50 sessions over implicit TLS to smtp-sink (medians)",
        "messages/s",
        servers,
        groups,
    )


def hot_spots(profiled: Profiled) -> list[str]:
    """The profile's top functions, in a few lines."""
    hot = profiled.hot

    def listed(rows: list[tuple[str, float]], quote: str = "`") -> str:
        return "; ".join(f"{quote}{name}{quote} {share:.0%}" for name, share in rows[:HOT_SPOTS])

    lines = [
        f"Hot spots in the profile of {profiled.title}: py-spy `--gil`, {hot.samples} samples, "
        f"collapsed stacks in `{profiled.collapsed}` beside this report, every table of it in "
        "the SMTP section below.",
        "",
        f"- Postwire's own functions, inclusive: {listed(hot.postwire)}",
        f"- self time: {listed(hot.self_time)}",
    ]
    if profiled.parts:
        parts = sorted(profiled.parts, key=lambda part: -part[1])
        # The parts' names carry their own code quotes.
        lines.append(f"- parts of the work (they may overlap): {listed(parts, quote='')}")
    return lines


def report(
    argv: Sequence[str],
    outcomes: dict[str, Outcome],
    figures: dict[str, float],
    seconds: float,
    chart_name: str | None,
) -> str:
    today = datetime.date.today().isoformat()
    command = shlex.join(["python", "-m", "benchmarks", *argv])
    lines = [
        f"# Postwire benchmarks, {today}",
        "",
        f"{machine_description()}. Server: {server_source()}. `{command}` ran the sections "
        f"{', '.join(outcomes)} in {seconds / 60:.1f} min (`make bench` runs them all at full "
        "size). Every comparison was measured side by side in one run: medians of alternating "
        "rounds.",
        "",
        "## Goals",
        "",
    ]
    lines += gate.table(gate.check(GOALS, figures), passed="met", failed="MISSED")
    lines += [
        "",
        "Ratios are Postwire's delivered/s over the rival's, the median of the rounds' ratios; "
        "the rate is Postwire's median delivered/s of 100 KiB messages, relayed end to end.",
    ]
    smtp_outcome = outcomes.get("smtp")
    if smtp_outcome is not None and smtp_outcome.headline is not None:
        headline_figures, profiles = smtp_outcome.headline
        lines += ["", "## Headline: SMTP relay end to end", ""]
        lines += headline(headline_figures, chart_name)
        for profiled in profiles:
            lines += ["", *hot_spots(profiled)]
    for name, outcome in outcomes.items():
        if outcome.failed:
            title = next(s.title for s in SECTIONS if s.name == name)
            lines += ["", f"## {title}: FAILED"]
        lines += ["", demoted(outcome.markdown).rstrip("\n")]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    chosen = [s for s in SECTIONS if s.name in args.sections]
    # Every section's options are checked before anything runs.
    section_args = {s.name: s.parse(section_argv(args, s)) for s in chosen}
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    outcomes: dict[str, Outcome] = {}
    for number, section in enumerate(chosen, 1):
        progress(
            f"[{number}/{len(chosen)}] {section.name}: {section.title} "
            f"({time.monotonic() - started:.0f} s so far) ..."
        )
        profile_base = None
        if getattr(section_args[section.name], "profile", False):
            # The section names its files after this: <report>-smtp-profile.txt.
            profile_base = args.output.with_name(f"{args.output.stem}-{section.name}")
        try:
            outcomes[section.name] = section.run(section_args[section.name], profile_base)
        except (Exception, SystemExit) as error:  # one section's failure spoils no other
            progress(f"{section.name} failed: {error}")
            outcomes[section.name] = Outcome(f"Failed: {error}\n", failed=True)
    seconds = time.monotonic() - started
    figures = {k: v for outcome in outcomes.values() for k, v in outcome.figures.items()}

    failed = any(outcome.failed for outcome in outcomes.values())
    if args.output is not None:
        chart_name = None
        smtp_outcome = outcomes.get("smtp")
        if smtp_outcome is not None and smtp_outcome.headline is not None:
            chart_path = args.output.with_name(f"{args.output.stem}-smtp.svg")
            chart_path.write_text(headline_chart(smtp_outcome.headline[0]))
            chart_name = chart_path.name
        args.output.write_text(report(argv, outcomes, figures, seconds, chart_name))
        progress(f"wrote {args.output} in {seconds / 60:.1f} min")
    if args.gate is not None:
        verdicts = gate.check(args.thresholds, figures)
        print(f"Release gate ({args.gate}), measured in {seconds:.0f} s:\n")
        print("\n".join(gate.table(verdicts)))
        passed = sum(v.passed for v in verdicts)
        print(f"\ngate: {passed} passed, {len(verdicts) - passed} failed")
        failed = failed or not all(v.passed for v in verdicts)
    for name, outcome in outcomes.items():
        if outcome.failed:
            progress(f"{name} failed")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
