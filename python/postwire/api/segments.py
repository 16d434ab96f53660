"""Routes of `/segments`."""

from __future__ import annotations

from quart import Blueprint

from postwire.api.context import ApiContext


def routes(ctx: ApiContext) -> Blueprint:
    return Blueprint("segments", __name__)
