"""`/domains` (contract section 5): add, list, get, update, verify, delete."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from quart import Blueprint, request

from postwire.api.auth import current_caller
from postwire.api.context import ApiContext
from postwire.api.models import (
    DeletedReference,
    DomainHealth,
    DomainObject,
    DomainSummary,
    ListBody,
    Reference,
    UpdateDomainBody,
)
from postwire.api.pagination import list_response, parse_page_request
from postwire.api.request_body import json_body, json_object, require_a_change
from postwire.domains import store
from postwire.domains.verification_state import start_verification
from postwire.errors import ApiError
from postwire.metrics.health import RANK, threshold_of
from postwire.sandbox import SANDBOX_DOMAIN as SANDBOX
from postwire.store.accounts import contract_timestamp
from postwire.store.domain_health import DomainHealthRecord, get_domain_health_parked


def routes(ctx: ApiContext) -> Blueprint:
    blueprint = Blueprint("domains", __name__)

    def domain_json(domain: store.DomainRecord) -> DomainObject:
        return cast(DomainObject, store.to_json(domain, ctx.config))

    def health_json(record: DomainHealthRecord) -> DomainHealth:
        checks = []
        for check in record.checks:
            threshold = threshold_of(str(check["metric"]))
            state = check.get("state")
            checks.append({
                "window": check["window"], "metric": check["metric"],
                "rate": float(check["rate"]), "volume": int(check["volume"]),
                "state": state if state in RANK else None,
                "warning_at": threshold.warning, "critical_at": threshold.critical,
            })  # fmt: skip
        return cast(DomainHealth, {
            "state": record.state,
            "since": contract_timestamp(datetime.fromtimestamp(record.since_ms / 1000, UTC)),
            "evaluated_at": contract_timestamp(
                datetime.fromtimestamp(record.evaluated_at_ms / 1000, UTC)
            ),
            "checks": checks,
        })  # fmt: skip

    def domain_summary(domain: store.DomainRecord) -> DomainSummary:
        return cast(DomainSummary, store.to_json(domain, ctx.config, include_records=False))

    @blueprint.post("/domains")
    async def create_domain() -> tuple[DomainObject, int]:
        body = await json_object()
        if "name" not in body:
            raise ApiError(422, "missing_required_field", "Missing `name` field.")
        domain = await store.create_domain(
            ctx.spool,
            ctx.config,
            current_caller().team_id,
            body.get("name"),
            region=body.get("region"),
            custom_return_path=body.get("custom_return_path"),
            open_tracking=body.get("open_tracking"),
            click_tracking=body.get("click_tracking"),
            tls=body.get("tls"),
            capabilities=body.get("capabilities"),
            tracking_subdomain=body.get("tracking_subdomain"),
        )
        return domain_json(domain), 201

    @blueprint.get("/domains")
    async def list_domains() -> ListBody:
        page = parse_page_request(request.args, default_limit=None)
        domains, has_more = await store.list_domains_parked(
            ctx.spool, current_caller().team_id, limit=page.limit, after=page.after,
            before=page.before,
        )  # fmt: skip
        data: list[dict[str, Any]] = [dict(domain_summary(domain)) for domain in domains]
        return list_response(data, has_more)

    @blueprint.get("/domains/<id:domain_id>")
    async def get_domain(domain_id: str) -> DomainObject:
        domain = await store.get_domain_parked(ctx.spool, current_caller().team_id, domain_id)
        body = domain_json(domain)
        health = await get_domain_health_parked(ctx.spool, domain.team_id, domain.id)
        if health is not None:
            body["health"] = health_json(health)
        return body

    @blueprint.patch("/domains/<id:domain_id>")
    async def update_domain(domain_id: str) -> Reference:
        body = await json_object()
        require_a_change(body, UpdateDomainBody)
        domain = await store.update_domain(
            ctx.spool,
            current_caller().team_id,
            domain_id,
            open_tracking=body.get("open_tracking"),
            click_tracking=body.get("click_tracking"),
            tls=body.get("tls"),
            capabilities=body.get("capabilities"),
            tracking_subdomain=body.get("tracking_subdomain"),
        )
        return {"object": "domain", "id": domain.id}

    @blueprint.post("/domains/<id:domain_id>/verify")
    async def verify_domain(domain_id: str) -> Reference:
        await json_body()  # tolerated and ignored
        team_id = current_caller().team_id
        if (
            ctx.config.sandbox
            and (await store.get_domain_parked(ctx.spool, team_id, domain_id)).name == SANDBOX
        ):
            return {"object": "domain", "id": domain_id}  # verified as it is: no DNS to ask
        if ctx.domain_verifier is not None:
            domain = await ctx.domain_verifier.request_verification(team_id, domain_id)
        else:
            domain = await start_verification(ctx.spool, ctx.config, team_id, domain_id)
        return {"object": "domain", "id": domain.id}

    @blueprint.delete("/domains/<id:domain_id>")
    async def delete_domain(domain_id: str) -> DeletedReference:
        domain = await store.delete_domain(ctx.spool, current_caller().team_id, domain_id)
        return {"object": "domain", "id": domain.id, "deleted": True}

    return blueprint
