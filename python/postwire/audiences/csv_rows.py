"""The pure rules of a CSV import of contacts: reading records with their byte offsets, the
column map, and the contact a row describes.

A record's byte offset is what makes an import resumable: the job commits "the next record
starts at byte N, row R" with the contacts of the rows before it, and reads on from there.
Rows are numbered as a spreadsheet shows them: the header is row 1, blank rows count.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, NamedTuple

from postwire.audiences.contact_rules import MAX_NAME_LENGTH, MAX_PROPERTY_STRING
from postwire.audiences.csv_format import DEFAULT_FORMAT, CsvFormat
from postwire.compose.addresses import NOT_AN_ADDRESS, recipient_problem
from postwire.errors import validation_error
from postwire.store.contacts import ContactRecord

CONTACT_FIELDS = ("email", "first_name", "last_name", "unsubscribed")
PROPERTY_PREFIX = "properties."
PROPERTY_TYPES = ("string", "number")
UTF8_BOM = b"\xef\xbb\xbf"
# A record longer than this (a quote never closed swallowing the file) stops the import: no
# reader can tell where the next row starts.
MAX_RECORD_BYTES = 1024 * 1024

_TRUE = frozenset({"true", "yes", "y", "t", "1"})
_FALSE = frozenset({"false", "no", "n", "f", "0"})
_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")

PropertyValue = str | int | float


class CsvRecord(NamedTuple):  # a tuple: made once per row, it costs a third of a dataclass
    row: int
    end: int  # file offset just past the record: where the next one starts
    cells: list[str]  # [] for a blank row (no cell holds anything but spaces)
    problem: str | None = None  # the record is unreadable (not in the encoding, not CSV)


def read_records(
    window: bytes, start: int, row: int, *, at_eof: bool, fmt: CsvFormat = DEFAULT_FORMAT
) -> list[CsvRecord]:
    """The records of `window`, the file's bytes from offset `start`, where record number `row`
    begins, in the file's format (separator and encoding). Unless the window reaches the end
    of the file, its last record is left out: it may go on past the window (a quoted cell
    holding line breaks), and the next window, starting where the last record returned ends,
    reads it again. Lines end with LF or CRLF."""
    lines = window.split(b"\n")
    tail = lines.pop()  # after the last LF: part of a line, or nothing
    sizes = [len(line) + 1 for line in lines]
    if at_eof and tail:
        lines.append(tail)
        sizes.append(len(tail))
    # Where each line ends in the file; the reader's line count says which lines a record took.
    ends = list(itertools.accumulate(sizes, initial=start))
    unreadable: set[int] = set()  # lines that are not text in the encoding
    # One decode for the window, as a rule; LF is one byte in both encodings, so lines agree.
    try:
        joined = fmt.decode(b"\n".join(lines))
        texts = [text + "\n" for text in joined.split("\n")] if lines else []
    except UnicodeDecodeError:
        texts = []
        for number, line in enumerate(lines):
            try:
                texts.append(fmt.decode(line) + "\n")
            except UnicodeDecodeError:
                texts.append(line.decode(fmt.encoding, errors="replace") + "\n")
                unreadable.add(number)
    reader = csv.reader(texts, delimiter=fmt.separator, strict=False)
    records: list[CsvRecord] = []
    first_line = 0
    while True:
        problem = None
        try:
            cells: list[str] = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            cells, problem = [], f"the row is not CSV ({error})"
        if unreadable and not unreadable.isdisjoint(range(first_line, reader.line_num)):
            problem = problem or f"the row is not {fmt.encoding_name} text"
        first_line = reader.line_num
        if not "".join(cells).strip():
            cells = []
        records.append(CsvRecord(row, ends[first_line], cells, problem))
        row += 1
    return records if at_eof else records[:-1]


def read_header(head: bytes, *, at_eof: bool, fmt: CsvFormat = DEFAULT_FORMAT) -> CsvRecord | None:
    """The header (row 1) from the file's first bytes, its cells trimmed; None when they do not
    hold all of it. A UTF-8 byte order mark is skipped."""
    start = len(UTF8_BOM) if head.startswith(UTF8_BOM) and fmt.encoding == "utf-8" else 0
    records = read_records(head[start:], start, 1, at_eof=at_eof, fmt=fmt)
    if not records:
        return None
    first = records[0]
    return CsvRecord(1, first.end, [cell.strip() for cell in first.cells], first.problem)


def parse_column_map(raw: Any) -> dict[str, tuple[str, str | None]]:
    """The `column_map` field: target (a contact field, or `properties.<key>`) -> (the CSV
    column it is read from, the type the caller gave a property or None).

    Resend's form maps each field to its column, properties under `properties`, each a column
    or `{column, type}`: `{"email": "E-mail", "properties": {"plan": {"column": "Plan"}}}`.
    The reverse form, column -> field (`{"E-mail": "email", "Plan": "properties.plan"}`), is
    read too when a key is not a field's name."""
    if not isinstance(raw, dict):
        raise validation_error("The `column_map` field must be a JSON object.")
    targets: dict[str, tuple[str, str | None]] = {}

    def add(target: str, column: Any, kind: Any = None) -> None:
        if not isinstance(column, str) or not column.strip():
            raise validation_error(f"The `column_map` entry for `{target}` must name a column.")
        if kind is not None and kind not in PROPERTY_TYPES:
            raise validation_error(
                f"The type of `{target}` in `column_map` must be `string` or `number`."
            )
        if target in targets:
            raise validation_error(f"The `column_map` maps `{target}` twice.")
        targets[target] = (column.strip(), kind)

    for key, value in raw.items():
        if key in CONTACT_FIELDS:
            add(key, value)
        elif key == "properties":
            if not isinstance(value, dict):
                raise validation_error("The `properties` of `column_map` must be a JSON object.")
            for name, mapping in value.items():
                if isinstance(mapping, dict):
                    add(PROPERTY_PREFIX + name, mapping.get("column"), mapping.get("type"))
                else:
                    add(PROPERTY_PREFIX + name, mapping)
        elif isinstance(value, str) and (
            value in CONTACT_FIELDS or value.startswith(PROPERTY_PREFIX)
        ):
            add(value, key)
        else:
            raise validation_error(
                f"The `column_map` key `{key}` is not a contact field (email, first_name, "
                "last_name, unsubscribed, properties)."
            )
    return targets


def target_named_like(column: str, property_types: Mapping[str, str]) -> str | None:
    """The target a column of this name is read into when the map does not name it: a
    contact field, or a contact property (by key or as `properties.<key>`); None otherwise."""
    target = _field_named_like(column)
    if target in CONTACT_FIELDS:
        return target
    key = column.strip().removeprefix(PROPERTY_PREFIX)
    return PROPERTY_PREFIX + key if key in property_types else None


# Headers spreadsheets and other senders' exports commonly give these fields.
_FIELD_ALIASES: Final = {
    "e_mail": "email",
    "email_address": "email",
    "e_mail_address": "email",
    "mail": "email",
    "firstname": "first_name",
    "given_name": "first_name",
    "lastname": "last_name",
    "surname": "last_name",
    "family_name": "last_name",
}


def _field_named_like(column: str) -> str:
    name = re.sub(r"[\s-]+", "_", column.strip().lower())
    return _FIELD_ALIASES.get(name, name)


def resolve_columns(
    header: list[str],
    column_map: Mapping[str, tuple[str, str | None]],
    property_types: Mapping[str, str],
    *,
    by_name: bool = True,
) -> dict[str, str]:
    """Target -> the header's column it is read from. The map wins for every target it names;
    with `by_name`, the others are read from a column named like them (`email`, `First Name`,
    a contact property's key, or `properties.<key>`); other columns are left alone (without
    it, the map is the whole mapping: a column it leaves out is ignored). Raises the 422 the
    caller answers: a mapped column missing from the header or present twice, an unknown
    property or one of another type, no email column."""
    columns: dict[str, str] = {}
    for target, (column, kind) in column_map.items():
        if column not in header:
            raise validation_error(
                f"The `column_map` names the column `{column}`, which the CSV header lacks."
            )
        columns[target] = column
        if target.startswith(PROPERTY_PREFIX):
            _check_property(target.removeprefix(PROPERTY_PREFIX), kind, property_types)
    taken = set(columns.values())
    for column in header if by_name else ():
        if column in taken:
            continue
        target = _field_named_like(column)
        if target not in CONTACT_FIELDS:
            key = column.removeprefix(PROPERTY_PREFIX)
            if key not in property_types and not column.startswith(PROPERTY_PREFIX):
                continue
            _check_property(key, None, property_types)
            target = PROPERTY_PREFIX + key
        if target not in columns:
            columns[target] = column
            taken.add(column)
    for column in columns.values():
        if header.count(column) > 1:
            raise validation_error(f"The CSV header has two columns named `{column}`.")
    if "email" not in columns:
        raise validation_error(
            "The CSV has no `email` column: name the column of addresses in `column_map`."
        )
    return columns


def _check_property(key: str, kind: str | None, property_types: Mapping[str, str]) -> None:
    known = property_types.get(key)
    if known is None:
        raise validation_error(
            f"The contact property `{key}` does not exist: create it before importing."
        )
    if kind is not None and kind != known:
        raise validation_error(f"The contact property `{key}` holds a {known}, not a {kind}.")


def column_indexes(header: list[str], columns: Mapping[str, str]) -> dict[str, int]:
    """Target -> its cell's index in a row; a column the header lacks now is left out."""
    positions = {column: index for index, column in enumerate(header)}
    return {t: positions[c] for t, c in columns.items() if c in positions}


@dataclass(frozen=True, slots=True)
class ContactRow:
    """What a row says of its contact; None (or no key) where its cell is empty."""

    email: str
    first_name: str | None
    last_name: str | None
    unsubscribed: bool | None
    properties: dict[str, PropertyValue]


def contact_row(
    cells: list[str], indexes: Mapping[str, int], property_types: Mapping[str, str]
) -> ContactRow | str:
    """The contact of a row, or why the row is refused (a bad address, a value of the wrong
    type, a property that no longer exists)."""
    values: dict[str, str] = {}
    for target, index in indexes.items():
        cell = cells[index].strip() if index < len(cells) else ""
        if cell:
            values[target] = cell
    email = values.get("email")
    if email is None:
        return "the row has no email address"
    problem = recipient_problem(email)
    if problem == NOT_AN_ADDRESS:  # the people reading these lists are not reading RFC 5321
        return f"`{email}` is not an email address: it should look like name@example.com"
    if problem is not None:
        return f"`{email}` is not a valid address: {problem}"
    for name in ("first_name", "last_name"):
        if len(values.get(name, "")) > MAX_NAME_LENGTH:
            return f"`{name}` is longer than {MAX_NAME_LENGTH} characters"
    unsubscribed: bool | None = None
    if "unsubscribed" in values:
        flag = values["unsubscribed"].lower()
        if flag not in _TRUE and flag not in _FALSE:
            return f"`unsubscribed` must be true or false, not `{values['unsubscribed']}`"
        unsubscribed = flag in _TRUE
    properties: dict[str, PropertyValue] = {}
    for target, cell in values.items():
        if not target.startswith(PROPERTY_PREFIX):
            continue
        key = target.removeprefix(PROPERTY_PREFIX)
        kind = property_types.get(key)
        if kind is None:
            return f"the contact property `{key}` does not exist"
        if kind == "number":
            number = parse_number(cell)
            if number is None:
                return f"the contact property `{key}` is a number, not `{cell}`"
            properties[key] = number
        elif len(cell) > MAX_PROPERTY_STRING:
            return f"the contact property `{key}` is longer than {MAX_PROPERTY_STRING} characters"
        else:
            properties[key] = cell
    return ContactRow(
        email, values.get("first_name"), values.get("last_name"), unsubscribed, properties
    )


def parse_number(text: str) -> int | float | None:
    """A decimal number as a CSV cell writes it (`42`, `-3.5`, `1e3`); None otherwise."""
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        value = float(text)
        return value if math.isfinite(value) else None
    return None


def new_contact(
    row: ContactRow,
    contact_id: str,
    team_id: str,
    now: str,
    segment_ids: list[str],
    topics: Mapping[str, str],
) -> ContactRecord:
    """The contact a row creates, in the import's segments and with its topic choices."""
    return ContactRecord(
        id=contact_id,
        team_id=team_id,
        email=row.email,
        first_name=row.first_name,
        last_name=row.last_name,
        unsubscribed=bool(row.unsubscribed),
        created_at=now,
        updated_at=now,
        properties=dict(row.properties),
        segment_ids=list(segment_ids),
        topics=dict(topics),
    )


def updated_contact(
    contact: ContactRecord,
    row: ContactRow,
    now: str,
    segment_ids: list[str],
    topics: Mapping[str, str],
) -> ContactRecord | None:
    """`contact` as an upserting row leaves it: each cell that holds something replaces the
    field or property (an empty cell changes nothing), the import's segments are joined and its
    topic choices made. None when that changes nothing. The address keeps its case."""
    changed = replace(
        contact,
        first_name=contact.first_name if row.first_name is None else row.first_name,
        last_name=contact.last_name if row.last_name is None else row.last_name,
        unsubscribed=contact.unsubscribed if row.unsubscribed is None else row.unsubscribed,
        properties={**contact.properties, **row.properties},
        segment_ids=contact.segment_ids + [s for s in segment_ids if s not in contact.segment_ids],
        topics={**contact.topics, **topics},
    )
    return None if changed == contact else replace(changed, updated_at=now)
