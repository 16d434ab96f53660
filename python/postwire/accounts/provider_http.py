"""HTTP calls to identity providers: discovery documents, key sets, token endpoints, GitHub's
user API.

A team's SSO issuer and SAML metadata URL are a team owner's choice, so they (and every
endpoint their documents name) go through the SSRF guard of `postwire.outbound_http` unless
`auth.allow_private_issuers` is set: the host is resolved once, every address vetted, and the
connection made to a vetted address while Host and the TLS server name keep the URL's host.
Google's and GitHub's URLs are the operator's configuration and are called as they are.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson

from postwire.outbound_http import RefusedTarget, parse_http_url, vetted_addresses

TIMEOUT_SECONDS = 15.0
# Discovery documents, key sets and tokens are small; a provider sending more is refused.
MAX_RESPONSE_BYTES = 1024 * 1024


class ProviderError(Exception):
    """An identity provider could not be reached or answered something unusable; the text
    says what, in words for the person signing in."""


class ProviderHttp:
    """Calls to providers through one connection pool; with `vet`, https only and through
    the SSRF guard."""

    def __init__(self, client: httpx.AsyncClient, *, vet: bool) -> None:
        self._client = client
        self._vet = vet

    async def get_json(self, url: str, *, headers: Mapping[str, str] | None = None) -> Any:
        status, body = await self._send("GET", url, headers=headers, form=None)
        return _json(url, status, body)

    async def post_form(
        self, url: str, form: Mapping[str, str], *, headers: Mapping[str, str] | None = None
    ) -> Any:
        status, body = await self._send("POST", url, headers=headers, form=form)
        return _json(url, status, body)

    async def get_text(self, url: str) -> str:
        """A document (SAML metadata) as text; an error status is refused."""
        status, body = await self._send("GET", url, headers={"Accept": "*/*"}, form=None)
        if status >= 400:
            raise ProviderError(f"The identity provider answered {status} at {url}.")
        return body.decode("utf-8", "replace")

    async def _send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None,
        form: Mapping[str, str] | None,
    ) -> tuple[int, bytes]:
        target = parse_http_url(url)
        if target is None:
            raise ProviderError(f"The identity provider gave an address that is not a URL: {url}")
        all_headers = {"Accept": "application/json", **(headers or {})}
        extensions: dict[str, str] = {}
        if self._vet and target.scheme != "https":
            raise ProviderError(f"The identity provider's address must use https: {url}")
        if self._vet:
            host = target.raw_host.decode("ascii")
            try:
                addresses = await vetted_addresses(
                    host,
                    target.port or (443 if target.scheme == "https" else 80),
                    allow_private=False,
                )
            except RefusedTarget as refused:
                raise ProviderError(
                    f"The identity provider cannot be reached: {refused}."
                ) from None
            all_headers["Host"] = target.netloc.decode("ascii")
            extensions["sni_hostname"] = host
            target = target.copy_with(host=str(addresses[0]))
        request = self._client.build_request(
            method, target, headers=all_headers, data=form, extensions=extensions
        )
        try:
            response = await self._client.send(request, stream=True)
            try:
                body = await _read_capped(response)
            finally:
                await response.aclose()
        except httpx.HTTPError as error:
            raise ProviderError(
                f"The identity provider at {url} could not be reached ({type(error).__name__})."
            ) from None
        return response.status_code, body


def _json(url: str, status: int, body: bytes) -> Any:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ProviderError(
            f"The identity provider answered {status} with something other than JSON at {url}."
        ) from None
    if status >= 400:
        raise ProviderError(_error_text(url, status, document))
    return document


@functools.cache
def _provider_tls() -> ssl.SSLContext:
    """One verifying TLS context for every call to providers: httpx would make one per
    client, loading the CA bundle each time (tens of milliseconds of CPU on every sign-in
    step)."""
    return httpx.create_ssl_context()


@asynccontextmanager
async def open_provider_http(*, vet: bool) -> AsyncIterator[ProviderHttp]:
    """Calls to providers for one page's work, on a connection pool closed after it."""
    async with httpx.AsyncClient(
        timeout=TIMEOUT_SECONDS, follow_redirects=False, verify=_provider_tls()
    ) as client:
        yield ProviderHttp(client, vet=vet)


async def _read_capped(response: httpx.Response) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_RESPONSE_BYTES:
            raise ProviderError("The identity provider's answer is too large.")
    return bytes(body)


def _error_text(url: str, status: int, document: Any) -> str:
    # OAuth errors are {"error": "invalid_grant", "error_description": "..."} (RFC 6749 5.2).
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        description = document.get("error_description")
        detail = f": {description}" if isinstance(description, str) else ""
        return f"The identity provider refused the request ({document['error']}{detail})."
    return f"The identity provider answered {status} at {url}."
