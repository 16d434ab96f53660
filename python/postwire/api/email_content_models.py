"""The JSON of a sent email's attachments and of its shared links (contract section 3.6 and
`POST /emails/{id}/share`), and their routes for `GET /openapi.json`.

Shapes follow the SDKs: resend-node `src/common/interfaces/attachment.interface.ts` and
`src/emails/interfaces/share-email-options.interface.ts`, resend-go `emails.go`
(`EmailAttachment`, `ShareEmailResponse`).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from postwire.api.models import ListBody
from postwire.api.operation import PAGE_QUERY, Operation


class AttachmentItem(TypedDict):
    id: str
    filename: NotRequired[str]  # left out when the part has no name (Node: optional string)
    size: int
    content_type: str
    content_disposition: Literal["inline", "attachment"]
    content_id: NotRequired[str]  # inline parts only
    download_url: str  # signed, served by Postwire without an API key, until `expires_at`
    expires_at: str  # ISO 8601 with Z


class AttachmentObject(AttachmentItem):
    object: Literal["attachment"]


class ShareEmailBody(TypedDict):
    expires_in: NotRequired[str]  # "10m", "2 hours", "1 day"; default and at most 48 hours


class SharedEmail(TypedDict):
    object: Literal["email"]
    id: str
    url: str
    expires_at: str  # ISO 8601 with Z (beyond the contract: when the link stops working)


class RevokedShares(TypedDict):
    object: Literal["email"]
    id: str
    revoked: int  # how many links stopped working


OPERATIONS: tuple[Operation, ...] = (
    Operation("get", "/emails/{email_id}/attachments",
              "List a sent email's attachments, while its source is kept", ListBody,
              list_item=AttachmentItem, query=PAGE_QUERY),
    Operation("get", "/emails/{email_id}/attachments/{attachment_id}",
              "Retrieve a sent email's attachment with a signed download URL", AttachmentObject),
    Operation("post", "/emails/{email_id}/share",
              "Make a signed, expiring public link that shows the email", SharedEmail,
              request=ShareEmailBody),
    Operation("delete", "/emails/{email_id}/share", "Revoke every shared link of the email",
              RevokedShares),
)  # fmt: skip
