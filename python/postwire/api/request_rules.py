"""Rules a request TypedDict can attach to a field with `Annotated`, for `wire_values`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BlankIsAbsent:
    """`""` in this field means the field was not given; with `when_given`, only when the
    body also holds that field (the one that supplies a value in its place)."""

    when_given: str | None = None
