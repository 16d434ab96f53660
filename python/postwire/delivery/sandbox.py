"""Delivery in sandbox mode (`postwire serve --sandbox`): the local inbox stands in for every
recipient's server, so the engine resolves nothing and connects nowhere.

A held message counts as delivered: the inbox accepted it, as the recipient's server would
have, and the sender sees what a real delivery shows (`email.delivered`, `last_event`
`delivered`). Resend's test addresses (`delivered@resend.dev`) answer the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from postwire.delivery.bounces import Outcome

HELD_IN_INBOX: Final = Outcome(
    "delivered", None, None, None, "sandbox; held in the local inbox, not sent"
)


def held_outcomes(recipients: Iterable[str]) -> dict[str, Outcome]:
    """Every recipient's outcome once the inbox has taken the message."""
    return dict.fromkeys(recipients, HELD_IN_INBOX)
