"""Render time of a broadcast document: `python -m benchmarks.block_rendering [--blocks 20]`.

A typical document (every block type in turn, `--blocks` blocks with the footer) is parsed and
rendered `--rounds` times; the report gives the median CPU time of each stage (the thread's
own, so other processes on a busy machine do not inflate it; rendering runs in this thread) and
the share each takes of the whole (ratios, not a timed assertion).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from tests.unit.broadcast_blocks.sample_documents import BRAND, typical_document

from postwire import _core
from postwire.broadcasts.blocks.document import parse_document
from postwire.broadcasts.blocks.mjml import document_to_mjml
from postwire.broadcasts.blocks.render import render_document
from postwire.broadcasts.blocks.text_part import document_to_text


def median_ms(action: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.thread_time_ns()
        action()
        samples.append(time.thread_time_ns() - started)
    return statistics.median(samples) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=300)
    options = parser.parse_args()
    raw = json.loads(json.dumps(typical_document(options.blocks)))  # as decoded from storage
    document = parse_document(raw)
    mjml = document_to_mjml(document, BRAND)
    html = render_document(document, BRAND).html
    stages = {
        "parse_document": lambda: parse_document(raw),
        "document_to_mjml (Python)": lambda: document_to_mjml(document, BRAND),
        "mjml_to_html (Rust, mrml)": lambda: _core.mjml_to_html(mjml),
        "document_to_text": lambda: document_to_text(document, BRAND),
        "parse + render_document": lambda: render_document(parse_document(raw), BRAND),
    }
    timings = {name: median_ms(action, options.rounds) for name, action in stages.items()}
    whole = timings["parse + render_document"]
    sizes = f"MJML {len(mjml):,} B, HTML {len(html):,} B"
    print(f"{options.blocks} blocks, {sizes}, {options.rounds} rounds")
    print("| stage | median CPU ms | share of the whole |")
    print("|---|---:|---:|")
    for name, value in timings.items():
        print(f"| {name} | {value:.3f} | {value / whole:.0%} |")


if __name__ == "__main__":
    main()
