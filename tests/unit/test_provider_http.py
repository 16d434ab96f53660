"""Calls to identity providers: a team's provider (vetted) must be https and public; answers
are capped; OAuth error answers and non-JSON answers become readable refusals; a discovery
document must name its own issuer and endpoints that are URLs (https when required)."""

from __future__ import annotations

import re

import httpx
import pytest

from postwire.accounts.oidc import discover
from postwire.accounts.provider_http import MAX_RESPONSE_BYTES, ProviderError, ProviderHttp


def _http(handler: httpx.MockTransport | None = None, *, vet: bool) -> ProviderHttp:
    transport = handler or httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    return ProviderHttp(httpx.AsyncClient(transport=transport), vet=vet)


async def test_a_vetted_provider_must_use_https() -> None:
    with pytest.raises(ProviderError, match="must use https"):
        await _http(vet=True).get_json("http://idp.example/.well-known/openid-configuration")


async def test_a_vetted_provider_on_loopback_is_refused() -> None:
    with pytest.raises(ProviderError, match="private, loopback or reserved"):
        await _http(vet=True).get_json("https://127.0.0.1/.well-known/openid-configuration")


async def test_an_oauth_error_answer_is_said_in_words() -> None:
    refuse = httpx.MockTransport(
        lambda request: httpx.Response(
            400, json={"error": "invalid_grant", "error_description": "code expired"}
        )
    )
    with pytest.raises(ProviderError, match=r"refused the request \(invalid_grant: code expired\)"):
        await _http(refuse, vet=False).post_form("https://idp.example/token", {"code": "c"})


async def test_an_answer_that_is_not_json_or_too_large_is_refused() -> None:
    page = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>login</html>"))
    with pytest.raises(ProviderError, match="something other than JSON"):
        await _http(page, vet=False).get_json("https://idp.example/jwks")
    huge = httpx.MockTransport(
        lambda request: httpx.Response(200, content=b" " * (MAX_RESPONSE_BYTES + 1))
    )
    with pytest.raises(ProviderError, match="too large"):
        await _http(huge, vet=False).get_json("https://idp.example/jwks")


def _discovery(**changes: str) -> httpx.MockTransport:
    document = {
        "issuer": "https://idp.example",
        "authorization_endpoint": "https://idp.example/authorize",
        "token_endpoint": "https://idp.example/token",
        "jwks_uri": "https://idp.example/jwks",
    }
    document.update(changes)
    return httpx.MockTransport(lambda request: httpx.Response(200, json=document))


async def test_discovery_gives_the_issuers_endpoints() -> None:
    http = _http(_discovery(), vet=False)
    metadata = await discover(http, "https://idp.example/", require_https=True)
    assert metadata.token_endpoint == "https://idp.example/token"


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"issuer": "https://other.example"}, "names the issuer https://other.example"),
        ({"authorization_endpoint": "https://idp.example/a\r\nSet-Cookie: x=1"}, "not a URL"),
        ({"token_endpoint": "javascript:alert(1)"}, "not a URL"),
        ({"jwks_uri": "http://idp.example/jwks"}, "must be an https:// URL"),
    ],
)
async def test_a_discovery_document_that_does_not_hold_together_is_refused(
    changes: dict[str, str], words: str
) -> None:
    with pytest.raises(ProviderError, match=re.escape(words)):
        http = _http(_discovery(**changes), vet=False)
        await discover(http, "https://idp.example", require_https=True)
