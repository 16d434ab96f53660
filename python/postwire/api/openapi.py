"""`GET /openapi.json`: the OpenAPI 3.1 document of the REST API, built from `models.py`.

`OPERATIONS` names, for every route, the TypedDicts its handler reads and returns; a test checks
that it covers exactly the routes the app serves, and schemathesis checks a live server's
answers against the document. So that check can see drift, answers are described exactly:
their objects are closed (`additionalProperties: false`) and say which keys are always there.
Request bodies stay open, as the contract ignores unknown fields.
"""

from __future__ import annotations

import types
import typing
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
)

import postwire
from postwire.api import (
    audience_models,
    broadcast_models,
    domain_claim_models,
    email_content_models,
    metrics_models,
    models,
    template_models,
)
from postwire.api.operation import PAGE_QUERY, Operation

CORE_OPERATIONS: tuple[Operation, ...] = (
    Operation("post", "/api-keys", "Create an API key", models.CreatedApiKey, 201,
              models.CreateApiKeyBody),
    Operation("get", "/api-keys", "List API keys", models.ListBody, list_item=models.ApiKeySummary,
              query=PAGE_QUERY),
    Operation("patch", "/api-keys/{key_id}", "Rename an API key", models.Reference,
              request=models.RenameApiKeyBody),
    Operation("delete", "/api-keys/{key_id}", "Delete an API key", models.DeletedReference),
    Operation("post", "/emails", "Send an email", models.IdOnly, request=models.SendEmailBody),
    Operation("post", "/emails/batch", "Send up to 100 emails", models.BatchResult,
              request=models.SendEmailBody, request_array=True),
    Operation("get", "/emails", "List emails, newest first", models.ListBody,
              list_item=models.EmailObject, query=PAGE_QUERY),
    Operation("get", "/emails/{email_id}", "Retrieve an email", models.EmailObject),
    Operation("patch", "/emails/{email_id}", "Reschedule a scheduled email", models.Reference,
              request=models.RescheduleBody),
    Operation("post", "/emails/{email_id}/cancel", "Cancel a scheduled email", models.Reference),
    Operation("post", "/domains", "Add a domain", models.DomainObject, 201,
              models.CreateDomainBody),
    Operation("get", "/domains", "List domains", models.ListBody, list_item=models.DomainSummary,
              query=PAGE_QUERY),
    Operation("get", "/domains/{domain_id}", "Retrieve a domain with its DNS records",
              models.DomainObject),
    Operation("patch", "/domains/{domain_id}", "Update a domain", models.Reference,
              request=models.UpdateDomainBody),
    Operation("post", "/domains/{domain_id}/verify", "Verify a domain's DNS records",
              models.Reference),
    Operation("delete", "/domains/{domain_id}", "Delete a domain", models.DeletedReference),
    Operation("post", "/suppressions", "Add an address to the suppression list",
              models.SuppressionObject, 201, models.AddSuppressionBody),
    Operation("post", "/suppressions/batch/add", "Add up to 100 addresses to the list at once",
              models.AddedSuppressions, 201, models.AddSuppressionsBody),
    Operation("post", "/suppressions/batch/remove",
              "Remove up to 100 suppressions at once, by address or by id",
              models.RemovedSuppressions, request=models.RemoveSuppressionsBody),
    Operation("get", "/suppressions", "List suppressed addresses (filter with `origin`)",
              models.ListBody, list_item=models.SuppressionObject,
              query=(*PAGE_QUERY, "origin")),
    Operation("get", "/suppressions/{id_or_email}", "Retrieve a suppression",
              models.SuppressionObject),
    Operation("delete", "/suppressions/{id_or_email}", "Remove an address from the list",
              models.DeletedReference),
    Operation("post", "/webhooks", "Register a webhook endpoint", models.CreatedWebhook, 201,
              models.CreateWebhookBody),
    Operation("get", "/webhooks", "List webhook endpoints, newest first", models.ListBody,
              list_item=models.WebhookObject, query=PAGE_QUERY),
    Operation("get", "/webhooks/{webhook_id}", "Retrieve a webhook endpoint",
              models.WebhookObject),
    Operation("patch", "/webhooks/{webhook_id}", "Update a webhook endpoint", models.Reference,
              request=models.UpdateWebhookBody),
    Operation("delete", "/webhooks/{webhook_id}", "Delete a webhook endpoint and its events",
              models.DeletedReference),
    Operation("post", "/webhooks/{webhook_id}/signing-secret/rotate",
              "Replace the endpoint's signing secret", models.CreatedWebhook),
    Operation("get", "/webhooks/{webhook_id}/events", "List the endpoint's events, newest first",
              models.ListBody, list_item=models.WebhookEventSummary, query=PAGE_QUERY),
    Operation("get", "/webhooks/{webhook_id}/events/{event_id}",
              "Retrieve an event with its payload and attempts", models.WebhookEventObject),
    Operation("post", "/webhooks/{webhook_id}/events/{event_id}/replay",
              "Send an event to the endpoint again", models.ReplayedWebhookEvent),
    Operation("get", "/sandbox/messages", "List the sandbox inbox, newest first",
              models.ListBody, list_item=models.SandboxMessageObject, query=PAGE_QUERY),
    Operation("get", "/sandbox/messages/{message_id}",
              "Retrieve a message the sandbox held, with its raw source",
              models.SandboxMessageObject),
)  # fmt: skip

# Each resource area documents its own routes beside its models.
OPERATIONS: tuple[Operation, ...] = (
    CORE_OPERATIONS
    + audience_models.OPERATIONS
    + template_models.OPERATIONS
    + broadcast_models.OPERATIONS
    + metrics_models.OPERATIONS
    + email_content_models.OPERATIONS
    + domain_claim_models.OPERATIONS
)

# Update bodies whose every field is optional, but one of which must be there.
PARTIAL_UPDATES: tuple[type, ...] = (
    models.UpdateDomainBody,
    models.UpdateWebhookBody,
    template_models.UpdateTemplateBody,
)


class SchemaBuilder:
    """JSON Schema (OpenAPI 3.1 flavour) of Python annotations; TypedDicts become components,
    closed ones (answers) or open ones (request bodies), never both."""

    def __init__(self) -> None:
        self.components: dict[str, dict[str, Any]] = {}
        self.closed: dict[str, bool] = {}

    def of(self, annotation: Any, *, closed: bool = False) -> dict[str, Any]:
        origin = get_origin(annotation)
        if annotation is type(None):
            return {"type": "null"}
        if annotation in (str, int, bool, float):
            return {
                "type": {str: "string", int: "integer", bool: "boolean", float: "number"}[
                    annotation
                ]
            }
        if annotation is Any:
            return {}
        if annotation is bytes:  # a file in a multipart/form-data body
            return {"type": "string", "format": "binary"}
        if origin in (NotRequired, Required, Annotated):
            return self.of(get_args(annotation)[0], closed=closed)
        if origin is Literal:
            return {"enum": list(get_args(annotation))}
        if origin in (Union, types.UnionType):
            return {"anyOf": [self.of(arg, closed=closed) for arg in get_args(annotation)]}
        if origin is list:
            return {"type": "array", "items": self.of(get_args(annotation)[0], closed=closed)}
        if origin is dict:
            values = self.of(get_args(annotation)[1], closed=closed)
            return {"type": "object", "additionalProperties": values}
        if typing.is_typeddict(annotation):
            return self.typed_dict(annotation, closed=closed)
        raise TypeError(f"no schema for {annotation!r}")

    def typed_dict(self, cls: type, *, closed: bool) -> dict[str, Any]:
        name = cls.__name__
        if self.closed.setdefault(name, closed) != closed:
            raise TypeError(f"{name} describes both a request body and an answer")
        if name not in self.components:
            self.components[name] = {}  # placeholder against recursion
            hints = typing.get_type_hints(cls, include_extras=True)
            properties = {key: self.of(hint, closed=closed) for key, hint in hints.items()}
            schema: dict[str, Any] = {
                "type": "object",
                "properties": properties,
                "required": [key for key, hint in hints.items() if _is_required(cls, hint)],
            }
            if closed:
                schema["additionalProperties"] = False
            if cls in PARTIAL_UPDATES:
                schema["anyOf"] = [{"required": [key]} for key in hints]
            self.components[name] = schema
        return {"$ref": f"#/components/schemas/{name}"}


def _is_required(cls: type, hint: Any) -> bool:
    """From the hint itself: on Python 3.11, a class-syntax TypedDict under `from __future__
    import annotations` counts its `NotRequired` keys among `__required_keys__`."""
    if get_origin(hint) is NotRequired:
        return False
    return get_origin(hint) is Required or bool(getattr(cls, "__total__", True))


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def openapi_document(server_url: str) -> dict[str, Any]:
    schemas = SchemaBuilder()
    error = schemas.of(models.ErrorBody, closed=True)
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        response = schemas.of(op.response, closed=True) if op.response else {}
        if op.list_item is not None:
            items = schemas.of(op.list_item, closed=True)
            response = {
                "allOf": [response, {"properties": {"data": {"type": "array", "items": items}}}]
            }
        operation: dict[str, Any] = {
            "summary": op.summary,
            "operationId": f"{op.method}_{op.path.strip('/').replace('/', '_')}",
            "responses": {
                str(op.status): {"description": "Success", "content": _json_content(response)},
                "default": {"description": "Error", "content": _json_content(error)},
            },
        }
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _path_parameters(op.path)
        ] + [
            {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
            for name in op.query
        ]
        if op.path in ("/emails", "/emails/batch") and op.method == "post":
            parameters.append(
                {"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}
            )
        if op.path == "/emails/batch":
            parameters.append(
                {
                    "name": "x-batch-validation",
                    "in": "header",
                    "schema": {"enum": ["strict", "permissive"]},
                }
            )
        if op.request is not None and op.request_array:
            operation["requestBody"] = {
                "required": True,
                "content": _json_content(
                    {"type": "array", "maxItems": 100, "items": schemas.of(op.request)}
                ),
            }
        elif op.request is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {op.request_media: {"schema": schemas.of(op.request)}},
            }
        if parameters:
            operation["parameters"] = parameters
        paths.setdefault(op.path, {})[op.method] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Postwire REST API",
            "version": postwire.__version__,
            "description": "Resend-compatible email sending API. Authenticate with "
            "`Authorization: Bearer <API key>`.",
        },
        "servers": [{"url": server_url}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": schemas.components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _path_parameters(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]
