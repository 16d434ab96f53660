"""Routes of `/broadcasts`."""

from __future__ import annotations

from quart import Blueprint

from postwire.api.context import ApiContext


def routes(ctx: ApiContext) -> Blueprint:
    return Blueprint("broadcasts", __name__)
