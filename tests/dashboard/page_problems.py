"""What a page must never show in a test: a script error, or a request its Content Security
Policy refused (chromium reports a violation as a console error naming the policy)."""

from __future__ import annotations

from playwright.sync_api import Page


def watch_problems(page: Page) -> list[str]:
    """The list the page's script errors and CSP violations are added to as they happen."""
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}")
            if message.type == "error" and "Content Security Policy" in message.text
            else None
        ),
    )
    return problems
