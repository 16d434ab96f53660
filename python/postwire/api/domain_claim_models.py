"""The JSON of domain claims (resend-node `src/domains/claims/interfaces/domain-claim.ts`,
resend-go `domain_claims.go`) and their routes for `GET /openapi.json`."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from postwire.api.operation import Operation

Region = Literal["us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"]


class ClaimDomainBody(TypedDict):  # the body of POST /domains, less `tls` and `capabilities`
    name: str
    region: NotRequired[Region]
    custom_return_path: NotRequired[str]
    open_tracking: NotRequired[bool]
    click_tracking: NotRequired[bool]
    tracking_subdomain: NotRequired[str]


class DomainClaimRecord(TypedDict):
    type: Literal["TXT"]
    name: str  # the domain's name: the record sits at its apex
    value: str  # postwire-domain-verification=<token>
    ttl: Literal["Auto"]


class DomainClaimObject(TypedDict):
    object: Literal["domain_claim"]
    id: str
    name: str
    # Postwire sets pending, completed and expired; the others are the contract's.
    status: Literal[
        "pending", "verified", "completed", "blocked", "expired", "superseded", "canceled",
        "failed",
    ]  # fmt: skip
    domain_id: str | None
    region: Region | None
    record: DomainClaimRecord
    blocked_reason: (
        Literal["grace_period", "recent_owner_activity", "pending_scheduled_emails"] | None
    )
    failure_reason: str | None
    created_at: str
    expires_at: str


OPERATIONS: tuple[Operation, ...] = tuple(
    operation
    for plural in ("claim", "claims")  # the PHP SDK's spelling too
    for operation in (
        Operation("post", f"/domains/{plural}",
                  "Claim a domain another team verified (201; 200 for a pending claim)",
                  DomainClaimObject, 201, ClaimDomainBody),
        Operation("get", f"/domains/{{domain_id}}/{plural}",
                  "Retrieve the latest claim of the claiming team's domain", DomainClaimObject),
        Operation("post", f"/domains/{{domain_id}}/{plural}/verify",
                  "Look the claim's TXT record up now; found, take the name over",
                  DomainClaimObject),
    )
)  # fmt: skip
