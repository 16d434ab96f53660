"""Domain claims (contract section 5.1; resend-node `src/domains/claims/`): take over a name
another team verified by proving it in DNS. The rules are `postwire.domains.claims`'.

The PHP SDK (v1.10, `src/Service/Domains/Claim.php`) calls the same endpoints with `claims`
in the plural (`/domains/claims`, `/domains/{id}/claims`, `.../claims/verify`): both spellings
are served.
"""

from __future__ import annotations

from typing import cast

from quart import Blueprint

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.domain_claim_models import DomainClaimObject
from postwire.api.request_body import json_body, json_object
from postwire.domains.claims import claim_json, get_claim, start_claim, verify_claim
from postwire.domains.verification import build_resolver
from postwire.errors import ApiError


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("domain_claims", __name__)
    resolver = build_resolver(ctx.config)

    def answer(claim_object: dict[str, object]) -> DomainClaimObject:
        return cast(DomainClaimObject, claim_object)

    @blueprint.post("/domains/claim")
    @blueprint.post("/domains/claims")
    async def create_claim() -> tuple[DomainClaimObject, int]:
        body = await json_object()
        if "name" not in body:
            raise ApiError(422, "missing_required_field", "Missing `name` field.")
        claim, created = await start_claim(ctx.spool, ctx.config, current_caller().team_id, body)
        return answer(claim_json(claim, ctx.now_ms())), 201 if created else 200

    @blueprint.get("/domains/<id:domain_id>/claim")
    @blueprint.get("/domains/<id:domain_id>/claims")
    async def get_domain_claim(domain_id: str) -> DomainClaimObject:
        claim = get_claim(ctx.spool, current_caller().team_id, domain_id)
        return answer(claim_json(claim, ctx.now_ms()))

    @blueprint.post("/domains/<id:domain_id>/claim/verify")
    @blueprint.post("/domains/<id:domain_id>/claims/verify")
    async def verify_domain_claim(domain_id: str) -> DomainClaimObject:
        await json_body()  # tolerated and ignored
        claim = await verify_claim(
            ctx.spool, ctx.config, current_caller().team_id, domain_id, resolver
        )
        return answer(claim_json(claim, ctx.now_ms()))

    return blueprint
