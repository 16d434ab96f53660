"""The shapes of the REST API's bodies, as TypedDicts.

Handlers are typed with these (mypy holds them to it), and `openapi.py` turns the same classes
into the JSON schemas of `GET /openapi.json`, so the document cannot drift from the code.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from postwire.api.request_rules import BlankIsAbsent
from postwire.store.deliveries import DeliveryAttempt

# --- shared ------------------------------------------------------------------------------------


class ErrorBody(TypedDict):
    statusCode: int
    name: str
    message: str


class Reference(TypedDict):
    object: str
    id: str


class DeletedReference(TypedDict):
    object: str
    id: str
    deleted: bool


class IdOnly(TypedDict):
    id: str


class ListBody(TypedDict):
    object: Literal["list"]
    has_more: bool
    data: list[dict[str, Any]]


# --- API keys ----------------------------------------------------------------------------------


class CreateApiKeyBody(TypedDict):
    name: str
    permission: NotRequired[Literal["full_access", "sending_access"]]
    domain_id: NotRequired[str]


class RenameApiKeyBody(TypedDict):
    name: str


class CreatedApiKey(TypedDict):
    object: Literal["api_key"]
    id: str
    token: str


class ApiKeySummary(TypedDict):
    id: str
    name: str
    created_at: str
    last_used_at: str | None
    permission: str
    domain_id: str | None


# --- emails ------------------------------------------------------------------------------------


class AttachmentBody(TypedDict):
    content: NotRequired[str | list[int] | dict[str, Any]]
    path: NotRequired[str]
    filename: NotRequired[str]
    content_type: NotRequired[str]
    contentType: NotRequired[str]
    content_id: NotRequired[str]
    inline_content_id: NotRequired[str]


class TagBody(TypedDict):
    name: str
    value: NotRequired[str]


class SendTemplateBody(TypedDict):
    id: str  # a published template's id or alias
    variables: NotRequired[dict[str, Any]]


# A template supplies from and subject when the send leaves them out; the Go SDK always sends
# both, "" when unset. `from` is a Python keyword, hence the functional form.
TemplateSupplied = Annotated[str, BlankIsAbsent(when_given="template")]
SendEmailBody = TypedDict(
    "SendEmailBody",
    {
        "from": NotRequired[TemplateSupplied],
        "to": str | list[str],
        "subject": NotRequired[TemplateSupplied],
        "cc": NotRequired[str | list[str]],
        "bcc": NotRequired[str | list[str]],
        "reply_to": NotRequired[str | list[str]],
        "replyTo": NotRequired[str | list[str]],
        "html": NotRequired[str],
        "text": NotRequired[str],
        "headers": NotRequired[dict[str, str]],
        "tags": NotRequired[list[TagBody]],
        "attachments": NotRequired[list[AttachmentBody]],
        "scheduled_at": NotRequired[str],
        "template": NotRequired[SendTemplateBody],
    },
)


class BatchError(TypedDict):
    index: int
    message: str


class BatchResult(TypedDict):
    data: list[IdOnly]
    errors: NotRequired[list[BatchError]]


class RescheduleBody(TypedDict):
    scheduled_at: str


class InsightObject(TypedDict):
    """One deliverability finding about the email (a Postwire extension of the Email object;
    SDKs ignore it): a stable `code` listed in docs/insights.md, how much it matters, what was
    found, and what to do ("" when nothing)."""

    code: str
    severity: Literal["error", "warning", "info", "ok"]
    message: str
    fix: str


EmailObject = TypedDict(
    "EmailObject",
    {
        "object": Literal["email"],
        "id": str,
        "to": list[str],
        "from": str,
        "created_at": str,
        "subject": str,
        "bcc": list[str],
        "cc": list[str],
        "reply_to": list[str],
        "last_event": str,
        "scheduled_at": str | None,
        "message_id": str,
        "html": NotRequired[str | None],
        "text": NotRequired[str | None],
        "tags": NotRequired[list[dict[str, str]]],
        "attempts": NotRequired[list[DeliveryAttempt]],
        # Absent until the insights service has computed them (or with insights off).
        "insights": NotRequired[list[InsightObject]],
    },
)


# --- domains -----------------------------------------------------------------------------------


class CreateDomainBody(TypedDict):
    name: str
    region: NotRequired[Literal["us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"]]
    custom_return_path: NotRequired[str]
    open_tracking: NotRequired[bool]
    click_tracking: NotRequired[bool]
    tracking_subdomain: NotRequired[str]
    tls: NotRequired[Literal["opportunistic", "enforced"]]
    capabilities: NotRequired[dict[str, Literal["enabled", "disabled"]]]


class UpdateDomainBody(TypedDict):
    open_tracking: NotRequired[bool]
    click_tracking: NotRequired[bool]
    tracking_subdomain: NotRequired[str]
    tls: NotRequired[Literal["opportunistic", "enforced"]]
    capabilities: NotRequired[dict[str, Literal["enabled", "disabled"]]]


DomainStatus = Literal[
    "not_started", "pending", "verified", "failed", "partially_verified", "partially_failed"
]
RecordStatus = Literal["not_started", "pending", "verified", "failed", "temporary_failure"]


class DomainMxRecord(TypedDict):
    record: Literal["SPF"]
    name: str
    type: Literal["MX"]
    ttl: str
    status: RecordStatus
    value: str
    priority: int  # MX records only (contract 5.3)


class DomainTxtRecord(TypedDict):
    record: Literal["SPF", "DKIM"]
    name: str
    type: Literal["TXT"]
    ttl: str
    status: RecordStatus
    value: str


class DomainCapabilities(TypedDict):
    sending: Literal["enabled", "disabled"]
    receiving: Literal["enabled", "disabled"]


class DomainSummary(TypedDict):
    """A `GET /domains` item: no `object`, `tracking_subdomain` or `records` (contract 5.1)."""

    id: str
    name: str
    status: DomainStatus
    created_at: str
    region: str
    open_tracking: bool
    click_tracking: bool
    capabilities: DomainCapabilities
    # Not in the contract (SDKs ignore it): why a `failed` domain cannot be verified.
    failure_reason: NotRequired[str]


class DomainWarning(TypedDict):
    """Not in the contract (SDKs ignore it): a setting that keeps the domain's records or its
    tracking from working outside this machine, and the config key that fixes it."""

    setting: str
    message: str


class DomainHealthCheck(TypedDict):
    window: Literal["24h", "7d"]
    metric: Literal["complaint_rate", "hard_bounce_rate"]
    rate: float  # percent, two decimals
    volume: int  # the messages it is a share of
    state: Literal["ok", "warning", "critical"] | None  # None: too few messages to judge
    warning_at: float  # percent
    critical_at: float


class DomainHealth(TypedDict):
    """The domain's last health verdict (a Postwire extension of the Domain object; SDKs ignore
    it): judged every 30 s from its complaint and hard bounce rates (docs/domain-health.md)."""

    state: Literal["ok", "warning", "critical"]
    since: str
    evaluated_at: str
    checks: list[DomainHealthCheck]


class DomainObject(TypedDict):
    object: Literal["domain"]
    id: str
    name: str
    status: DomainStatus
    created_at: str
    region: str
    open_tracking: bool
    click_tracking: bool
    tracking_subdomain: NotRequired[str]  # only when one is set
    capabilities: DomainCapabilities
    records: list[DomainMxRecord | DomainTxtRecord]
    failure_reason: NotRequired[str]
    warnings: NotRequired[list[DomainWarning]]
    # Absent until the domain is first judged, and with `metrics.count_events = false`.
    health: NotRequired[DomainHealth]


# --- suppressions ------------------------------------------------------------------------------


class AddSuppressionBody(TypedDict):
    email: str


class SuppressionObject(TypedDict):
    object: Literal["suppression"]
    id: str
    email: str
    origin: str
    source_id: str | None
    created_at: str


class AddSuppressionsBody(TypedDict):
    emails: list[str]  # 1 to 100


class RemoveSuppressionsBody(TypedDict):  # one of the two, never both
    emails: NotRequired[list[str]]
    ids: NotRequired[list[str]]


class SuppressionReference(TypedDict):
    object: Literal["suppression"]
    id: str


class RemovedSuppression(SuppressionReference):
    deleted: bool


class AddedSuppressions(TypedDict):
    data: list[SuppressionReference]


class RemovedSuppressions(TypedDict):
    data: list[RemovedSuppression]


# --- webhooks ----------------------------------------------------------------------------------


class CreateWebhookBody(TypedDict):
    endpoint: str
    events: list[str]


class UpdateWebhookBody(TypedDict):
    endpoint: NotRequired[str]
    events: NotRequired[list[str]]
    status: NotRequired[Literal["enabled", "disabled"]]


class CreatedWebhook(TypedDict):
    object: Literal["webhook"]
    id: str
    signing_secret: str


class WebhookObject(TypedDict):
    object: Literal["webhook"]
    id: str
    endpoint: str
    events: list[str]
    status: str
    created_at: str
    signing_secret: str
    disabled_reason: NotRequired[str]  # only when Postwire disabled it (failing for days)


class WebhookEventSummary(TypedDict):
    object: Literal["webhook_event"]
    id: str
    type: str
    status: str  # pending | success | failed
    created_at: str
    attempts: int
    next_attempt_at: str | None


class WebhookAttemptObject(TypedDict):
    attempted_at: str
    status_code: int | None  # None: no HTTP response
    error: str | None
    duration_ms: int


class WebhookEventObject(TypedDict):
    object: Literal["webhook_event"]
    id: str
    type: str
    status: str
    created_at: str
    attempts: list[WebhookAttemptObject]
    next_attempt_at: str | None
    payload: dict[str, Any]


class ReplayedWebhookEvent(TypedDict):
    object: Literal["webhook_event"]
    id: str
    status: Literal["pending"]


# --- sandbox -----------------------------------------------------------------------------------

SandboxMessageObject = TypedDict(
    "SandboxMessageObject",
    {
        "object": Literal["sandbox_message"],
        "id": str,  # the email's id
        "from": str,
        "to": list[str],
        "subject": str,
        "message_id": str,
        "envelope_from": str,
        "recipients": list[str],
        "created_at": str,  # when the inbox took it
        "size": int,
        "raw": NotRequired[str],  # GET /sandbox/messages/{id} only
    },
)
