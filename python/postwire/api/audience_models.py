"""The shapes of the audience API's bodies, as TypedDicts, and its documented routes."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from postwire.api.models import DeletedReference, ListBody, Reference
from postwire.api.operation import PAGE_QUERY, Operation

PropertyValue = str | int | float

# --- contacts ----------------------------------------------------------------------------------


class SegmentRefBody(TypedDict):
    id: str


class TopicChoiceBody(TypedDict):
    id: str
    subscription: Literal["opt_in", "opt_out"]


class CreateContactBody(TypedDict):
    email: str
    first_name: NotRequired[str | None]
    last_name: NotRequired[str | None]
    unsubscribed: NotRequired[bool]
    properties: NotRequired[dict[str, PropertyValue | None]]
    segments: NotRequired[list[str | SegmentRefBody]]
    topics: NotRequired[list[TopicChoiceBody]]
    audience_id: NotRequired[str]


class UpdateContactBody(TypedDict):
    email: NotRequired[str]
    first_name: NotRequired[str | None]
    last_name: NotRequired[str | None]
    unsubscribed: NotRequired[bool]
    properties: NotRequired[dict[str, PropertyValue | None]]


class ContactPropertyValue(TypedDict):
    value: str  # a number as its JSON text: the Rust SDK reads a string
    type: Literal["string", "number"]


class ContactSummary(TypedDict):
    id: str
    email: str
    first_name: str | None
    last_name: str | None
    created_at: str
    unsubscribed: bool


class ContactObject(TypedDict):
    object: Literal["contact"]
    id: str
    email: str
    first_name: str | None
    last_name: str | None
    created_at: str
    unsubscribed: bool
    properties: dict[str, ContactPropertyValue]


class DeletedContact(TypedDict):
    object: Literal["contact"]
    id: str
    contact: str
    deleted: bool


# --- segments and audiences --------------------------------------------------------------------


class CreateSegmentBody(TypedDict):
    name: str


class UpdateSegmentBody(TypedDict):
    name: str


class CreatedSegment(TypedDict):
    object: Literal["segment", "audience"]
    id: str
    name: str


class SegmentSummary(TypedDict):
    id: str
    name: str
    created_at: str


class SegmentObject(TypedDict):
    object: Literal["segment", "audience"]
    id: str
    name: str
    created_at: str


class ContactSegmentAdded(TypedDict):
    object: Literal["contact_segment"]
    id: str  # the segment's id (the Rust SDK reads `id`)
    contact_id: str
    segment_id: str


class ContactSegmentRemoved(TypedDict):
    object: Literal["contact_segment"]
    id: str
    contact_id: str
    segment_id: str
    deleted: bool


# --- topics ------------------------------------------------------------------------------------


class CreateTopicBody(TypedDict):
    name: str
    default_subscription: Literal["opt_in", "opt_out"]
    description: NotRequired[str | None]
    visibility: NotRequired[Literal["public", "private"]]


class UpdateTopicBody(TypedDict):
    name: NotRequired[str | None]
    description: NotRequired[str | None]
    visibility: NotRequired[Literal["public", "private"] | None]


class TopicSummary(TypedDict):
    id: str
    name: str
    description: NotRequired[str]
    default_subscription: Literal["opt_in", "opt_out"]
    visibility: Literal["public", "private"]
    created_at: str


class TopicObject(TypedDict):
    object: Literal["topic"]
    id: str
    name: str
    description: NotRequired[str]
    default_subscription: Literal["opt_in", "opt_out"]
    visibility: Literal["public", "private"]
    created_at: str


class ContactTopicItem(TypedDict):
    id: str
    name: str
    description: str | None
    subscription: Literal["opt_in", "opt_out"]
    created_at: str


class UpdateContactTopicsBody(TypedDict):
    """Also accepted: the array alone, as the Python and Rust SDKs send it."""

    topics: list[TopicChoiceBody]


class TopicSubscription(TypedDict):
    id: str
    subscription: Literal["opt_in", "opt_out"]


class ContactTopicsUpdated(TypedDict):
    object: Literal["contact_topics"]
    id: str  # the contact's id (the SDKs read `id`)
    contact_id: str
    topics: list[TopicSubscription]


# --- contact properties ------------------------------------------------------------------------


class CreateContactPropertyBody(TypedDict):
    key: str
    type: Literal["string", "number"]
    fallback_value: NotRequired[PropertyValue | None]


class UpdateContactPropertyBody(TypedDict):
    fallback_value: PropertyValue | None


class ContactPropertyObject(TypedDict):
    object: Literal["contact_property"]
    id: str
    key: str
    type: Literal["string", "number"]
    fallback_value: PropertyValue | None
    created_at: str


CONTACT = "/contacts/{contact_id_or_email}"
LEGACY_CONTACTS = "/audiences/{audience_id}/contacts"

OPERATIONS: tuple[Operation, ...] = (
    Operation("post", "/contacts", "Create a contact", Reference, 201, CreateContactBody),
    Operation("get", "/contacts", "List contacts, newest first (filter with `segment_id`)",
              ListBody, list_item=ContactSummary, query=(*PAGE_QUERY, "segment_id")),
    Operation("get", CONTACT, "Retrieve a contact by id or address", ContactObject),
    Operation("patch", CONTACT, "Update a contact", Reference, request=UpdateContactBody),
    Operation("delete", CONTACT, "Delete a contact", DeletedContact),
    Operation("post", LEGACY_CONTACTS, "Create a contact in an audience (legacy)", Reference,
              201, CreateContactBody),
    Operation("get", LEGACY_CONTACTS, "List an audience's contacts (legacy)", ListBody,
              list_item=ContactSummary, query=PAGE_QUERY),
    Operation("get", LEGACY_CONTACTS + "/{contact_id_or_email}",
              "Retrieve a contact of an audience (legacy)", ContactObject),
    Operation("patch", LEGACY_CONTACTS + "/{contact_id_or_email}",
              "Update a contact of an audience (legacy)", Reference, request=UpdateContactBody),
    Operation("delete", LEGACY_CONTACTS + "/{contact_id_or_email}",
              "Delete a contact of an audience (legacy)", DeletedContact),
    Operation("get", CONTACT + "/segments", "List the contact's segments", ListBody,
              list_item=SegmentSummary, query=PAGE_QUERY),
    Operation("post", CONTACT + "/segments/{segment_id}", "Add the contact to a segment",
              ContactSegmentAdded, 201),
    Operation("delete", CONTACT + "/segments/{segment_id}", "Remove the contact from a segment",
              ContactSegmentRemoved),
    Operation("get", CONTACT + "/topics", "List topics with the contact's subscription",
              ListBody, list_item=ContactTopicItem, query=PAGE_QUERY),
    Operation("patch", CONTACT + "/topics", "Change the contact's topic subscriptions",
              ContactTopicsUpdated, request=UpdateContactTopicsBody),
    Operation("post", "/segments", "Create a segment", CreatedSegment, 201, CreateSegmentBody),
    Operation("get", "/segments", "List segments, newest first", ListBody,
              list_item=SegmentSummary, query=PAGE_QUERY),
    Operation("get", "/segments/{segment_id}", "Retrieve a segment", SegmentObject),
    Operation("patch", "/segments/{segment_id}", "Rename a segment", Reference,
              request=UpdateSegmentBody),
    Operation("delete", "/segments/{segment_id}", "Delete a segment", DeletedReference),
    Operation("get", "/segments/{segment_id}/contacts", "List a segment's contacts", ListBody,
              list_item=ContactSummary, query=PAGE_QUERY),
    Operation("post", "/audiences", "Create an audience (a segment; deprecated)",
              CreatedSegment, 201, CreateSegmentBody),
    Operation("get", "/audiences", "List audiences (deprecated)", ListBody,
              list_item=SegmentSummary, query=PAGE_QUERY),
    Operation("get", "/audiences/{audience_id}", "Retrieve an audience (deprecated)",
              SegmentObject),
    Operation("delete", "/audiences/{audience_id}", "Delete an audience (deprecated)",
              DeletedReference),
    Operation("post", "/topics", "Create a topic", Reference, 201, CreateTopicBody),
    Operation("get", "/topics", "List topics, newest first", ListBody, list_item=TopicSummary,
              query=PAGE_QUERY),
    Operation("get", "/topics/{topic_id}", "Retrieve a topic", TopicObject),
    Operation("patch", "/topics/{topic_id}", "Update a topic's name, description or visibility",
              Reference, request=UpdateTopicBody),
    Operation("delete", "/topics/{topic_id}", "Delete a topic", DeletedReference),
    Operation("post", "/contact-properties", "Create a contact property", Reference, 201,
              CreateContactPropertyBody),
    Operation("get", "/contact-properties", "List contact properties, newest first", ListBody,
              list_item=ContactPropertyObject, query=PAGE_QUERY),
    Operation("get", "/contact-properties/{property_id}", "Retrieve a contact property",
              ContactPropertyObject),
    Operation("patch", "/contact-properties/{property_id}",
              "Change a contact property's fallback value", Reference,
              request=UpdateContactPropertyBody),
    Operation("delete", "/contact-properties/{property_id}", "Delete a contact property",
              DeletedReference),
)  # fmt: skip

# --- contact imports (CSV): their models, and `OPERATIONS += (...)` for their routes ----------


class ContactImportCounts(TypedDict):
    total: int
    created: int
    updated: int
    skipped: int
    failed: int


class ContactImportSummary(TypedDict):
    object: Literal["contact_import"]
    id: str
    status: Literal["queued", "in_progress", "completed", "failed"]
    created_at: str
    completed_at: str | None
    counts: ContactImportCounts  # so far, while the import runs
    failure_reason: NotRequired[str]  # why a failed import stopped


class ContactImportFailedRow(TypedDict):
    row: int  # the header is row 1
    email: str | None
    reason: str


class ContactImportObject(ContactImportSummary):
    failed_rows: list[ContactImportFailedRow]  # the first 1,000, in row order


class ContactImportCreated(TypedDict):
    object: Literal["contact_import"]
    id: str


class CreateContactImportBody(TypedDict):
    """The multipart/form-data fields; the last three hold JSON."""

    file: bytes
    on_conflict: NotRequired[Literal["upsert", "skip"]]
    column_map: NotRequired[str]
    segments: NotRequired[str]
    topics: NotRequired[str]


IMPORTS = "/contacts/imports"
IMPORT_OPERATIONS: tuple[Operation, ...] = (
    Operation("post", IMPORTS, "Import contacts from a CSV file, as a background job",
              ContactImportCreated, 201, CreateContactImportBody,
              request_media="multipart/form-data"),
    Operation("get", IMPORTS, "List contact imports, newest first (filter with `status`)",
              ListBody, list_item=ContactImportSummary, query=(*PAGE_QUERY, "status")),
    Operation("get", IMPORTS + "/{import_id}",
              "Retrieve a contact import: status, counts and the rows refused",
              ContactImportObject),
)  # fmt: skip
OPERATIONS = OPERATIONS + IMPORT_OPERATIONS
