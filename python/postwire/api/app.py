"""The REST API: a Quart-Trio app served by Hypercorn's trio worker inside the service tree.

Served at the root of its host (the Go and Rust SDKs drop any path prefix). Every response is
JSON in the contract's shapes; `errors.install_error_handlers` owns the error side.
"""

from __future__ import annotations

import logging
from typing import Any

import trio
from quart import Response, g, request
from quart_trio import QuartTrio

from postwire.api import (
    api_keys,
    broadcasts,
    contact_imports,
    contact_properties,
    contacts,
    domain_claims,
    domains,
    email_attachments,
    email_metrics,
    email_shares,
    emails,
    images,
    sandbox,
    segments,
    suppressions,
    templates,
    topics,
    tracking,
    unsubscribe,
    webhooks,
)
from postwire.api.auth import authenticate_caller
from postwire.api.context import ApiContext
from postwire.api.errors import install_error_handlers
from postwire.api.openapi import openapi_document
from postwire.api.resource_ids import install_id_converters
from postwire.config import Config
from postwire.errors import ApiError
from postwire.http_routing import route_without_redirects
from postwire.http_serving import HttpLimits, drain_request_body, serve_http
from postwire.rate_limit import RateLimiter
from postwire.services import ServiceDeps
from postwire.store import accounts

log = logging.getLogger("postwire.api")

# Paths served without an API key: recipients' mail clients and browsers use the prefixed ones.
PUBLIC_PATHS = frozenset({"/openapi.json", "/health"})
PUBLIC_PREFIXES = (
    tracking.PUBLIC_PREFIX,
    unsubscribe.PUBLIC_PREFIX,
    images.PUBLIC_PREFIX,
    # Signed, expiring links: attachment downloads and shared emails.
    email_attachments.PUBLIC_PREFIX,
    email_shares.PUBLIC_PREFIX,
)
# Whole-request cap: 40 MB of email after base64, plus JSON overhead.
MAX_BODY_BYTES = 48 * 1024 * 1024
# How often a key's last_used_at is written at most (it costs a commit).
KEY_USE_WRITE_INTERVAL = 60.0


def create_app(ctx: ApiContext) -> QuartTrio:
    app = QuartTrio("postwire")
    route_without_redirects(app)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.request_class = contact_imports.UploadCappedRequest  # CSV uploads: their own cap
    app.config["JSON_SORT_KEYS"] = False
    app.json.sort_keys = False  # type: ignore[attr-defined]
    # OPTIONS is a 405 like any other method a path does not serve: the automatic answer had
    # no JSON body, and answered before the request's body was read (see `drain_request_body`).
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False
    install_error_handlers(app)
    install_id_converters(app)
    limiter = RateLimiter(ctx.config.api.rate_limit)

    @app.before_request
    async def identify_caller() -> None:
        g.rate = None
        if request.path in PUBLIC_PATHS or request.path.startswith(PUBLIC_PREFIXES):
            return
        caller = await authenticate_caller(
            ctx.spool, request.headers.get("Authorization"), request.method, request.path
        )
        g.caller = caller
        g.rate = limiter.check(caller.team_id, ctx.monotonic())
        if g.rate is not None and not g.rate.allowed:
            raise ApiError(
                429,
                "rate_limit_exceeded",
                "Too many requests. Please limit the number of requests per second.",
            )
        await _note_key_use(ctx, app, caller.key)

    @app.after_request
    async def add_rate_headers(response: Response) -> Response:
        rate = g.get("rate")
        if rate is not None:
            response.headers.update(rate.headers())
        if response.status_code >= 400:
            await drain_request_body(response)
        return response

    @app.get("/health")
    async def health() -> dict[str, str]:
        """Liveness for load balancers; also the framework's floor in the API benchmark."""
        return {"status": "ok"}

    @app.get("/openapi.json")
    async def openapi_json() -> dict[str, Any]:
        return openapi_document(ctx.config.api.public_url)

    app.register_blueprint(api_keys.routes(ctx))
    app.register_blueprint(email_metrics.routes(ctx))
    app.register_blueprint(emails.routes(ctx))
    app.register_blueprint(email_attachments.routes(ctx))
    app.register_blueprint(email_shares.routes(ctx))
    app.register_blueprint(domains.routes(ctx))
    app.register_blueprint(domain_claims.routes(ctx))
    app.register_blueprint(suppressions.routes(ctx))
    app.register_blueprint(webhooks.routes(ctx))
    app.register_blueprint(sandbox.routes(ctx))
    app.register_blueprint(tracking.routes(ctx))
    app.register_blueprint(contacts.routes(ctx))
    app.register_blueprint(segments.routes(ctx))
    app.register_blueprint(topics.routes(ctx))
    app.register_blueprint(contact_properties.routes(ctx))
    app.register_blueprint(contact_imports.routes(ctx))
    app.register_blueprint(templates.routes(ctx))
    app.register_blueprint(broadcasts.routes(ctx))
    app.register_blueprint(images.routes(ctx))
    app.register_blueprint(unsubscribe.routes(ctx))
    return app


async def _note_key_use(ctx: ApiContext, app: QuartTrio, key: accounts.ApiKeyRecord) -> None:
    now = ctx.monotonic()
    last = ctx.key_use_written.get(key.id)
    if last is not None and now - last < KEY_USE_WRITE_INTERVAL:
        return
    ctx.key_use_written[key.id] = now
    # Off the request's path: the caller does not wait for this commit.
    app.nursery.start_soon(accounts.record_key_use, ctx.spool, key, ctx.now())


async def serve_api(
    config: Config,
    deps: ServiceDeps,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the REST API on `api.listen` until the stage's `stopping` event (`serve_http`);
    report the bound URLs once listening."""
    app = create_app(
        ApiContext(
            config=config,
            spool=deps.spool,
            domain_verifier=deps.domain_verifier,
            delivery=deps.delivery,
            webhooks=deps.webhooks,
        )
    )
    await serve_http(
        app,
        config.api.listen,
        deps.stopping,
        name="REST API",
        key="api.listen",
        limits=HttpLimits.of(config),
        task_status=task_status,
    )
