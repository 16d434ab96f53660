"""The shapes of the template API's bodies, as TypedDicts, and its documented routes."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from postwire.api import models
from postwire.api.operation import PAGE_QUERY, Operation
from postwire.api.request_rules import BlankIsAbsent

VariableType = Literal["string", "number", "boolean", "object", "list"]
TemplateStatus = Literal["draft", "published"]


class TemplateVariableBody(TypedDict):
    key: str
    type: VariableType
    fallback_value: NotRequired[Any]


# `from` is a Python keyword, hence the functional form.
CreateTemplateBody = TypedDict(
    "CreateTemplateBody",
    {
        "name": str,
        "html": str,
        "alias": NotRequired[str],
        "from": NotRequired[str],
        "subject": NotRequired[str],
        "reply_to": NotRequired[str | list[str]],
        "text": NotRequired[str],
        "variables": NotRequired[list[TemplateVariableBody]],
    },
)

# The Go SDK sends `name` and `html` in every update, "" when they stay as they are.
UpdateTemplateBody = TypedDict(
    "UpdateTemplateBody",
    {
        "name": NotRequired[Annotated[str, BlankIsAbsent()]],
        "html": NotRequired[Annotated[str, BlankIsAbsent()]],
        "alias": NotRequired[str | None],
        "from": NotRequired[str | None],
        "subject": NotRequired[str | None],
        "reply_to": NotRequired[str | list[str] | None],
        "text": NotRequired[str | None],
        "variables": NotRequired[list[TemplateVariableBody] | None],
    },
)


class TemplateVariableObject(TypedDict):
    id: str
    key: str
    type: VariableType
    fallback_value: Any
    created_at: str
    updated_at: str


TemplateObject = TypedDict(
    "TemplateObject",
    {
        "object": Literal["template"],
        "id": str,
        "current_version_id": str,
        "alias": str | None,
        "name": str,
        "created_at": str,
        "updated_at": str,
        "status": TemplateStatus,
        "published_at": str | None,
        "from": str | None,
        "subject": str | None,
        "reply_to": list[str] | None,
        "html": str,
        "text": str | None,
        "variables": list[TemplateVariableObject],
        "has_unpublished_versions": bool,
    },
)


class TemplateSummary(TypedDict):
    id: str
    name: str
    status: TemplateStatus
    published_at: str | None
    created_at: str
    updated_at: str
    alias: str | None


TemplateVersionObject = TypedDict(
    "TemplateVersionObject",
    {
        "object": Literal["template_version"],
        "id": str,
        "template_id": str,
        "version_number": int,
        "published_at": str,
        "from": str | None,
        "subject": str | None,
        "reply_to": list[str] | None,
        "html": str,
        "text": str | None,
        "variables": list[TemplateVariableObject],
    },
)

OPERATIONS: tuple[Operation, ...] = (
    Operation("post", "/templates", "Create a template (a draft)", models.Reference, 201,
              CreateTemplateBody),
    Operation("get", "/templates", "List templates, newest first", models.ListBody,
              list_item=TemplateSummary, query=PAGE_QUERY),
    Operation("get", "/templates/{id_or_alias}", "Retrieve a template's working copy",
              TemplateObject),
    Operation("patch", "/templates/{id_or_alias}", "Update a template's working copy",
              models.Reference, request=UpdateTemplateBody),
    Operation("delete", "/templates/{id_or_alias}", "Delete a template and its versions",
              models.DeletedReference),
    Operation("post", "/templates/{id_or_alias}/publish",
              "Publish the working copy: sends use it from now on", models.Reference),
    Operation("post", "/templates/{id_or_alias}/duplicate",
              "Copy a template's working copy into a new draft", models.Reference, 201),
    Operation("get", "/templates/{id_or_alias}/versions",
              "List a template's published versions, newest first (Postwire)", models.ListBody,
              list_item=TemplateVersionObject, query=PAGE_QUERY),
)  # fmt: skip
