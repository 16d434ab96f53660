"""How the settings pages (domains, API keys, webhooks, suppressions) answer a refused change.

The rules live below the dashboard and refuse with `ApiError`s, worded for the REST API. A page
turns a 404 into its own "not found" page (another team's id looks like no id at all) and any
other refusal into a message shown on the page the form came from (post, redirect, get).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from quart import flash, redirect
from werkzeug.exceptions import NotFound
from werkzeug.wrappers.response import Response

from postwire.errors import ApiError

# What a form handler answers: a 303 to the page that shows the outcome.
Redirect = Response
T = TypeVar("T")


def in_plain_words(error: ApiError) -> str:
    """The refusal's message without the contract's code quotes around field names."""
    return error.message.replace("`", "")


def found_or_404(lookup: Callable[[], T]) -> T:
    """What `lookup` finds; a page's 404 where it refuses with `not_found`."""
    try:
        return lookup()
    except ApiError as error:
        if error.status == 404:
            raise NotFound from error
        raise


async def found_or_404_parked(lookup: Callable[[], Awaitable[T]]) -> T:
    """`found_or_404` of a lookup whose reads are parked."""
    try:
        return await lookup()
    except ApiError as error:
        if error.status == 404:
            raise NotFound from error
        raise


async def refused(error: ApiError, back: str) -> Redirect:
    """Send the browser back to `back` (a path of this site), the refusal shown there."""
    if error.status == 404:
        raise NotFound from error
    await flash(in_plain_words(error), "error")
    return redirect(back, 303)


async def done(message: str, back: str) -> Redirect:
    """Send the browser on to `back`, saying what was done."""
    await flash(message, "success")
    return redirect(back, 303)
