"""What a resource id looks like in a URL, so that a path is known only when its ids are ids.

Every id Postwire hands out is a UUID (version 7; any version is read). A route matches only
when its id segments have that shape, so upstream endpoints Postwire does not serve, such as
`GET /emails/receiving` or `GET /automations/runs`, answer 404 "The requested endpoint does
not exist" rather than "Email not found" or 405. Pagination cursors are
ids too: anything else is a 422, never page one.
"""

from __future__ import annotations

import re
from typing import Final

from quart import Quart
from werkzeug.routing import BaseConverter

UUID_PATTERN: Final = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# The `svix-id` a webhook receiver saw: the event id behind this prefix.
EVENT_ID_PREFIX: Final = "msg_"

_UUID = re.compile(UUID_PATTERN)


def is_resource_id(text: str) -> bool:
    return _UUID.fullmatch(text) is not None


class ResourceIdConverter(BaseConverter):
    """`<id:name>`: a resource id."""

    regex = UUID_PATTERN


class EventIdConverter(BaseConverter):
    """`<event_id:name>`: a webhook event's id, bare or as its `svix-id` (`msg_<id>`)."""

    regex = f"(?:{EVENT_ID_PREFIX})?{UUID_PATTERN}"


class IdOrAddressConverter(BaseConverter):
    """`<id_or_address:name>`: a resource id or an email address, whose local part may hold a
    `/` (the Python SDK sends it percent-encoded; the path is matched decoded)."""

    regex = f"{UUID_PATTERN}|[^/][^@]*@.+"
    part_isolating = False


def install_id_converters(app: Quart) -> None:
    """Make the converters usable in route rules; before any blueprint is registered."""
    app.url_map.converters.update(
        id=ResourceIdConverter,
        event_id=EventIdConverter,
        id_or_address=IdOrAddressConverter,
    )
