"""Client addresses as the per-client limits count them."""

import pytest

from postwire.client_addresses import client_source


@pytest.mark.parametrize(
    ("host", "source"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::ffff", "2001:db8:1:2::/64"),  # one subscriber's /64 is one source
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("", ""),
    ],
)
def test_client_source(host: str, source: str) -> None:
    assert client_source(host) == source
