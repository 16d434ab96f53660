"""How a CSV file of contacts is written: its separator (`,`, `;` or a tab) and its text
encoding (UTF-8 or Windows-1252), told from its first bytes.

Spreadsheets write what the computer's region asks for: Excel in much of Europe separates
cells with `;` (the comma being the decimal mark) and, in its plain "CSV" format, writes
Windows-1252 rather than UTF-8; exports of other tools use tabs. Detection is a guess that
says whether it is sure; the dashboard shows its choice, and lets a person change it, before
anything is imported.
"""

from __future__ import annotations

import codecs
import csv
from dataclasses import dataclass
from typing import Final

UTF8: Final = "utf-8"
WINDOWS_1252: Final = "windows-1252"
# Value -> what a person reads.
SEPARATORS: Final = {",": "Comma ( , )", ";": "Semicolon ( ; )", "\t": "Tab"}
ENCODINGS: Final = {UTF8: "UTF-8", WINDOWS_1252: "Windows-1252"}
# The records detection reads: enough to see a pattern, few enough to stay cheap.
SAMPLE_RECORDS: Final = 50


@dataclass(frozen=True, slots=True)
class CsvFormat:
    separator: str = ","
    encoding: str = UTF8

    def decode(self, data: bytes) -> str:
        """`data` as text; raises UnicodeDecodeError (Python's Windows-1252 leaves five bytes
        undefined, so a file in another encoding can fail it too)."""
        return data.decode(self.encoding)

    @property
    def encoding_name(self) -> str:
        return ENCODINGS[self.encoding]


DEFAULT_FORMAT: Final = CsvFormat()


@dataclass(frozen=True, slots=True)
class DetectedFormat:
    format: CsvFormat
    # Whether the guess is certain: valid UTF-8 is; a file that is not must be in some 8-bit
    # encoding, Windows-1252 the likeliest but not the only one. A separator is sure when one
    # alone splits the rows into the same number of cells, more than one.
    separator_sure: bool
    encoding_sure: bool

    @property
    def sure(self) -> bool:
        return self.separator_sure and self.encoding_sure


def parse_format(separator: object, encoding: object) -> CsvFormat | None:
    """The format a form names (`tab` is read as a tab); None when it names another."""
    separator = "\t" if separator == "tab" else separator
    if separator not in SEPARATORS or encoding not in ENCODINGS:
        return None
    assert isinstance(separator, str) and isinstance(encoding, str)
    return CsvFormat(separator, encoding)


def detect_format(head: bytes, *, at_eof: bool) -> DetectedFormat:
    """The format of a file whose first bytes are `head` (all of it when `at_eof`)."""
    encoding, encoding_sure = _detect_encoding(head, at_eof=at_eof)
    text = head.decode(encoding, errors="replace")
    if not at_eof:  # the last line may be cut short
        text = text[: text.rfind("\n") + 1] or text
    separator, separator_sure = _detect_separator(text)
    return DetectedFormat(CsvFormat(separator, encoding), separator_sure, encoding_sure)


def _detect_encoding(head: bytes, *, at_eof: bool) -> tuple[str, bool]:
    decoder = codecs.getincrementaldecoder(UTF8)()
    try:  # a character cut at the end of `head` is not an error unless the file ends there
        decoder.decode(head, final=at_eof)
    except UnicodeDecodeError:
        return WINDOWS_1252, False
    return UTF8, True


def _detect_separator(text: str) -> tuple[str, bool]:
    counts = {separator: _cell_counts(text, separator) for separator in SEPARATORS}
    # A separator fits when it splits the header into several cells and every row read into
    # as many.
    fitting = [
        separator
        for separator, cells in counts.items()
        if cells and cells[0] > 1 and all(count == cells[0] for count in cells)
    ]
    if len(fitting) == 1:
        return fitting[0], True
    if fitting:  # several fit: the one that makes the most columns, but ask
        return max(fitting, key=lambda separator: counts[separator][0]), False
    widest = max(SEPARATORS, key=lambda separator: counts[separator][0] if counts[separator] else 0)
    if not counts[widest] or counts[widest][0] <= 1:
        return ",", True  # one column: every separator reads it alike
    return widest, False  # rows of uneven length whatever the separator: ask


def _cell_counts(text: str, separator: str) -> list[int]:
    """How many cells each of the first records holds, blank lines left out."""
    reader = csv.reader(text.splitlines(keepends=True), delimiter=separator, strict=False)
    counts: list[int] = []
    try:
        for cells in reader:
            if "".join(cells).strip():
                counts.append(len(cells))
            if len(counts) >= SAMPLE_RECORDS:
                break
    except csv.Error:
        pass  # what was read so far counts
    return counts
