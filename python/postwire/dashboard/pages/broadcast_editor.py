"""Dashboard page module `broadcast_editor` (routes are added as the page is built)."""

from __future__ import annotations

from quart import Blueprint

from postwire.dashboard.context import DashboardContext


def routes(ctx: DashboardContext) -> Blueprint:
    return Blueprint("broadcast_editor", __name__)
