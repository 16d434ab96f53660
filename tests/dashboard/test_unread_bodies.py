"""An answer decided before a POST's body is read (sign in first, not found, wrong method)
still reaches the client: the body is drained first, so the socket is never reset under it."""

from __future__ import annotations

import httpx

from tests.dashboard.conftest import DashboardServer

BODY = b"x=" + b"a" * 200_000
TRIES = 60


def _unanswered(client: httpx.Client, url: str) -> int:
    lost = 0
    for _ in range(TRIES):
        try:
            client.post(
                url, content=BODY, headers={"Content-Type": "application/x-www-form-urlencoded"}
            )
        except httpx.TransportError:
            lost += 1
    return lost


def test_large_posts_answered_without_their_body_still_get_an_answer(
    dashboard_server: DashboardServer,
) -> None:
    with httpx.Client(base_url=dashboard_server.dashboard_url, timeout=10) as client:
        assert _unanswered(client, "/domains") == 0  # signed out: to the sign-in page
        assert _unanswered(client, "/no-such-page") == 0  # not found
        assert _unanswered(client, "/metrics") == 0  # GET only
