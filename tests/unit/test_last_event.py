"""Table test of how an email's `last_event` follows what happens to it."""

from __future__ import annotations

import pytest

from postwire.store.emails import next_last_event


@pytest.mark.parametrize(
    ("current", "new", "expected"),
    [
        ("queued", "delivered", "delivered"),
        ("queued", "bounced", "bounced"),
        ("delivery_delayed", "delivered", "delivered"),
        ("delivered", "bounced", "bounced"),  # a DSN after the first hop took it
        ("delivered", "complained", "complained"),
        ("bounced", "delivered", "bounced"),  # another recipient's success hides no bounce
        ("bounced", "delivery_delayed", "bounced"),
        ("complained", "delivered", "complained"),
        ("bounced", "complained", "complained"),
        ("complained", "bounced", "bounced"),
    ],
)
def test_next_last_event(current: str, new: str, expected: str) -> None:
    assert next_last_event(current, new) == expected
