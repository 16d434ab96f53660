"""How the operator's commands answer: aligned tables for people, JSON for scripts, and the
few units they share (ages such as `2h`, times, sizes). Light to import: `postwire --help`
loads it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from postwire.errors import PostwireError

Row = Mapping[str, Any]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"^(\d+)([smhdw])$")


def parse_age(text: str) -> int:
    """`30s`, `15m`, `2h`, `3d`, `1w` in seconds; PostwireError otherwise."""
    match = _AGE.match(text.strip().lower())
    if match is None:
        raise PostwireError(f"{text!r} is not an age: write a number and s, m, h, d or w (2h)")
    return int(match.group(1)) * _UNITS[match.group(2)]


def format_age(seconds: float) -> str:
    """A duration the way people read one: `45s`, `12m`, `3h 5m`, `2d 4h`."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60}m"
    return f"{whole // 86400}d {whole % 86400 // 3600}h"


def iso_ms(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO 8601 UTC to the second; None stays None."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def table(rows: Sequence[Row], columns: Sequence[tuple[str, str]]) -> str:
    """`rows` as aligned columns (`(field, heading)` each); an empty list says so."""
    if not rows:
        return "(none)"
    cells = [[_cell(row.get(name)) for name, _ in columns] for row in rows]
    headings = [heading for _, heading in columns]
    widths = [max(len(text) for text in column) for column in zip(headings, *cells, strict=True)]
    lines = [_line(headings, widths), *(_line(row, widths) for row in cells)]
    return "\n".join(lines)


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(item) for item in value) or "-"
    return str(value)


def emit(value: Any, human: str, *, as_json: bool) -> None:
    """Print `value` as JSON for scripts, else the `human` text."""
    print(json.dumps(value, indent=2, sort_keys=False, default=str) if as_json else human)


def page_note(shown: int, limit: int, last_id: str | None, command: str) -> str:
    """What to run for the next page, when this one was full."""
    if shown < limit or last_id is None:
        return ""
    return f"\n(more may follow: {command} --after {last_id})"
