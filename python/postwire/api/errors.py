"""Every refusal and failure of the REST API leaves as the contract's JSON error body.

`install_error_handlers` is the one place where lower errors become HTTP: `ApiError` as it is,
routing errors (404, 405, 413) in the contract's words, anything unexpected as a 500 with no
detail leaked (it is logged instead).

A path no route matches (ids included: see `resource_ids`) is an unknown endpoint, 404; a path
a route matches, asked with a method it does not serve, is 405 with an `Allow` header.
"""

from __future__ import annotations

import logging

from quart import Quart, Response, jsonify, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from postwire.errors import ApiError, SpoolFullError, StoreUnavailableError
from postwire.store.outages import Outage

log = logging.getLogger("postwire.api")

# Said once a minute at most while the database is unreachable.
REFUSING = Outage("the REST API (answering 503)")
DATABASE_UNREACHABLE = "Postwire's database is unreachable; nothing was changed. Retry shortly."


def error_response(error: ApiError) -> Response:
    response = jsonify(error.to_json())
    response.status_code = error.status
    return response


def _from_http_exception(exc: HTTPException) -> ApiError:
    status = exc.code or 500
    if status == 404:
        return ApiError(404, "not_found", "The requested endpoint does not exist.")
    if status == 405:
        return ApiError(
            405, "method_not_allowed", f"This endpoint does not accept the {request.method} method."
        )
    if status == 413:
        return ApiError(413, "validation_error", "The request body is too large.")
    if status == 400:
        return ApiError(400, "validation_error", "The request could not be understood.")
    return ApiError(status, "application_error", exc.description or "Request failed.")


def install_error_handlers(app: Quart) -> None:
    @app.errorhandler(ApiError)
    async def on_api_error(error: ApiError) -> Response:
        return error_response(error)

    @app.errorhandler(HTTPException)
    async def on_http_exception(exc: HTTPException) -> Response:
        response = error_response(_from_http_exception(exc))
        if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
            response.headers["Allow"] = ", ".join(sorted(exc.valid_methods))
        return response

    @app.errorhandler(SpoolFullError)
    async def on_spool_full(_: SpoolFullError) -> Response:
        return error_response(
            ApiError(503, "service_unavailable", "Postwire's spool is full; retry later.")
        )

    @app.errorhandler(StoreUnavailableError)
    async def on_store_unavailable(error: StoreUnavailableError) -> Response:
        # Nothing of the request was acknowledged: a write it began is undone or never landed.
        REFUSING.failed(error)
        response = error_response(ApiError(503, "service_unavailable", DATABASE_UNREACHABLE))
        response.headers["Retry-After"] = "1"
        return response

    @app.errorhandler(Exception)
    async def on_unexpected(exc: Exception) -> Response:
        log.exception("unexpected error while handling a request", exc_info=exc)
        return error_response(ApiError(500, "application_error", "An unexpected error occurred."))
