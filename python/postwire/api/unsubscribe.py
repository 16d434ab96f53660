"""`/u/...`: the signed unsubscribe links of broadcasts (public: no API key)."""

from __future__ import annotations

from typing import Final

from quart import Blueprint

from postwire.api.context import ApiContext

PUBLIC_PREFIX: Final = "/u/"


def routes(ctx: ApiContext) -> Blueprint:
    return Blueprint("unsubscribe", __name__)
