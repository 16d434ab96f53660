"""The shapes of the audience API's bodies, as TypedDicts, and its documented routes."""

from __future__ import annotations

from postwire.api.operation import Operation

OPERATIONS: tuple[Operation, ...] = ()
