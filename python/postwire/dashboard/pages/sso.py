"""The sso page module: its owner replaces this empty blueprint with the pages."""

from __future__ import annotations

from quart import Blueprint

from postwire.dashboard.context import DashboardContext


def routes(ctx: DashboardContext) -> Blueprint:
    return Blueprint("sso", __name__)
