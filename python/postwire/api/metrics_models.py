"""The shape of `GET /emails/metrics`'s answer, and its documented route."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from postwire.api.operation import Operation

METRICS_QUERY = (
    "start_date", "end_date", "timezone", "granularity", "metrics", "dimensions", "domain_id",
    "email_id", "broadcast_id", "tag",
)  # fmt: skip


class MetricsBody(TypedDict):
    object: Literal["metrics"]
    start_date: str
    end_date: str
    metrics: list[str]
    dimensions: list[str]
    granularity: Literal["hourly", "daily", "weekly", "monthly"]
    totals: dict[str, int | float]
    # One row per period and/or domain, broadcast or tag: `period`, `domain_id` and
    # `domain_name`, `broadcast_id` and `broadcast_name`, or `tag`, and the metrics.
    data: NotRequired[list[dict[str, str | int | float]]]


OPERATIONS: tuple[Operation, ...] = (
    Operation("get", "/emails/metrics",
              "Email metrics: totals, by period and by domain, broadcast or tag",
              MetricsBody, query=METRICS_QUERY),
)  # fmt: skip
