"""The shapes of the broadcast API's bodies, as TypedDicts, and its documented routes."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired, TypedDict

from postwire.api.models import DeletedReference, IdOnly, ListBody, Reference
from postwire.api.operation import PAGE_QUERY, Operation
from postwire.api.request_rules import BlankIsAbsent

BroadcastStatus = Literal["draft", "scheduled", "queued", "sending", "sent", "canceled"]

# `from` is a keyword: these use the functional syntax.
CreateBroadcastBody = TypedDict(
    "CreateBroadcastBody",
    {
        "segment_id": NotRequired[str],
        "audience_id": NotRequired[str],  # the deprecated name of segment_id
        "from": str,
        "subject": str,
        "reply_to": NotRequired[str | list[str]],
        "html": NotRequired[str],
        "text": NotRequired[str],
        "preview_text": NotRequired[str],
        "name": NotRequired[str],
        "topic_id": NotRequired[str | None],
        "send": NotRequired[bool],
        "scheduled_at": NotRequired[str],
    },
)

UpdateBroadcastBody = TypedDict(
    "UpdateBroadcastBody",
    {
        "segment_id": NotRequired[str],
        "audience_id": NotRequired[str],
        "from": NotRequired[str],
        "subject": NotRequired[str],
        "reply_to": NotRequired[str | list[str]],
        "html": NotRequired[str],
        "text": NotRequired[str],
        "preview_text": NotRequired[str],
        "name": NotRequired[str],
        "topic_id": NotRequired[str | None],
    },
)


class SendBroadcastBody(TypedDict):
    # The Go SDK sends `"scheduled_at": ""` for "now".
    scheduled_at: NotRequired[Annotated[str, BlankIsAbsent()]]


class BroadcastCounts(TypedDict):
    """Live counts (a Postwire addition): messages `queued` by the walk, the events of its
    emails (`opened` and `clicked` count recipients), members skipped, unsubscribes."""

    queued: int
    sent: int
    delivered: int
    delivery_delayed: int
    bounced: int
    complained: int
    opened: int
    clicked: int
    failed: int
    suppressed: int
    skipped_unsubscribed: int
    skipped_topic: int
    unsubscribed: int


class BroadcastSummary(TypedDict):
    """A list item. `name` is "" when none was given and `audience_id` repeats `segment_id`:
    the Rust SDK requires both as strings."""

    id: str
    name: str
    audience_id: str
    segment_id: str
    status: BroadcastStatus
    created_at: str
    scheduled_at: str | None
    sent_at: str | None
    topic_id: str | None


BroadcastObject = TypedDict(
    "BroadcastObject",
    {
        "object": Literal["broadcast"],
        "id": str,
        "name": str,
        "audience_id": str,
        "segment_id": str,
        "from": str,
        "subject": str,
        "reply_to": list[str] | None,
        "preview_text": str | None,
        "status": BroadcastStatus,
        "created_at": str,
        "scheduled_at": str | None,
        "sent_at": str | None,
        "html": str | None,
        "text": str | None,
        "topic_id": str | None,
        "counts": BroadcastCounts,
    },
)


class RecipientClickedLink(TypedDict):
    url: str
    clicks: int


class BroadcastRecipient(TypedDict):
    """One recipient an event type concerns. `id` is the row's cursor (its email's id, or
    its contact's for `sent`, `suppressed` and `unsubscribed`)."""

    id: str
    contact_id: str | None
    email: str
    count: NotRequired[int]  # opened and clicked
    bounce_type: NotRequired[Literal["permanent", "transient", "undetermined"]]  # bounced
    clicked_links: NotRequired[list[RecipientClickedLink]]  # clicked


class ClickedLinkObject(TypedDict):
    id: str  # the row's cursor
    url: str
    clicks: int
    unique_clicks: int


OPERATIONS: tuple[Operation, ...] = (
    Operation("post", "/broadcasts", "Create a broadcast (a draft, or sent with `send`)",
              Reference, 201, CreateBroadcastBody),
    Operation("get", "/broadcasts", "List broadcasts, newest first", ListBody,
              list_item=BroadcastSummary, query=PAGE_QUERY),
    Operation("get", "/broadcasts/{broadcast_id}", "Retrieve a broadcast with its counts",
              BroadcastObject),
    Operation("patch", "/broadcasts/{broadcast_id}", "Update a draft or scheduled broadcast",
              Reference, request=UpdateBroadcastBody),
    Operation("delete", "/broadcasts/{broadcast_id}", "Delete a draft or scheduled broadcast",
              DeletedReference),
    Operation("post", "/broadcasts/{broadcast_id}/send", "Send a broadcast now or at a time",
              IdOnly, request=SendBroadcastBody),
    Operation("post", "/broadcasts/{broadcast_id}/cancel",
              "Cancel a scheduled (back to draft) or queued/sending broadcast", Reference),
    Operation("post", "/broadcasts/{broadcast_id}/duplicate",
              "Copy a broadcast into a new draft", Reference, 201),
    Operation("get", "/broadcasts/{broadcast_id}/recipients",
              "List the recipients of one event type", ListBody,
              list_item=BroadcastRecipient, query=(*PAGE_QUERY, "type", "email", "bounce_type")),
    Operation("get", "/broadcasts/{broadcast_id}/clicked-links",
              "List the links clicked, most clicked first", ListBody,
              list_item=ClickedLinkObject, query=PAGE_QUERY),
)  # fmt: skip
