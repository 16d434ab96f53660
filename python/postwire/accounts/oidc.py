"""OpenID Connect for sign-in with Google and with a team's own provider: discovery, the
authorization request, the token exchange and the ID token's checks.

The signature is checked by joserfc against the provider's published key set (asymmetric
algorithms only: a token signed with the client secret proves nothing the secret's holder
could not forge); then `iss` must be the discovered issuer, `aud` must name our client id (and
`azp` too when there are several audiences), `exp` in the future, `iat` not in the future, and
`nonce` the one kept with this login. The login record is consumed before the token is even
requested, so a replayed callback (and its nonce) finds nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from joserfc import jwt
from joserfc.errors import ExpiredTokenError, JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry

from postwire.accounts.provider_http import ProviderError, ProviderHttp
from postwire.outbound_http import parse_http_url

ID_TOKEN_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384")
# Clocks of the provider and ours may differ a little.
LEEWAY_SECONDS = 60


@dataclass(frozen=True, slots=True)
class ProviderMetadata:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the provider says signed in: an address it vouches for, a display name, and the
    provider's own name for the person (`subject`, stable where the address may change) under
    its `issuer`."""

    email: str
    email_verified: bool
    name: str
    subject: str
    issuer: str = ""


def pkce_challenge(verifier: str) -> str:
    """RFC 7636 S256: BASE64URL(SHA256(verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


async def discover(http: ProviderHttp, issuer: str, *, require_https: bool) -> ProviderMetadata:
    """The issuer's endpoints from `{issuer}/.well-known/openid-configuration`; the document
    must name the same issuer (OpenID Connect Discovery 4.3)."""
    issuer = issuer.rstrip("/")
    if require_https and not issuer.startswith("https://"):
        raise ProviderError("The SSO issuer must be an https:// URL.")
    document = await http.get_json(f"{issuer}/.well-known/openid-configuration")
    if not isinstance(document, dict):
        raise ProviderError("The identity provider's discovery document is not a JSON object.")
    fields = ("authorization_endpoint", "token_endpoint", "jwks_uri")
    values = {name: document.get(name) for name in ("issuer", *fields)}
    if not all(isinstance(value, str) and value for value in values.values()):
        raise ProviderError("The identity provider's discovery document lacks an endpoint.")
    for name in fields:
        # The browser is sent to one of them: a URL of the right scheme, nothing that could
        # split a Location header.
        endpoint = str(values[name])
        if parse_http_url(endpoint) is None or any(ord(c) <= 0x20 or c == "\x7f" for c in endpoint):
            raise ProviderError(f"The discovery document's {name} is not a URL.")
        if require_https and not endpoint.startswith("https://"):
            raise ProviderError(f"The discovery document's {name} must be an https:// URL.")
    if str(values["issuer"]).rstrip("/") != issuer:
        raise ProviderError(
            f"The discovery document names the issuer {values['issuer']}, not {issuer}."
        )
    return ProviderMetadata(
        issuer=str(values["issuer"]),
        authorization_endpoint=str(values["authorization_endpoint"]),
        token_endpoint=str(values["token_endpoint"]),
        jwks_uri=str(values["jwks_uri"]),
    )


def authorization_url(
    endpoint: str,
    *,
    client_id: str,
    redirect_uri: str,
    scope: str,
    state: str,
    code_verifier: str,
    nonce: str | None,
) -> str:
    """The authorization request (code flow with PKCE S256) to send the browser to."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": scope,
        "state": state,
        "code_challenge": pkce_challenge(code_verifier),
        "code_challenge_method": "S256",
    }
    if nonce is not None:
        params["nonce"] = nonce
    separator = "&" if "?" in endpoint else "?"
    return f"{endpoint}{separator}{urlencode(params)}"


async def exchange_code(
    http: ProviderHttp,
    token_endpoint: str,
    *,
    code: str,
    redirect_uri: str,
    client_id: str,
    client_secret: str,
    code_verifier: str,
) -> dict[str, Any]:
    """The token response for an authorization code (client_secret_post, with the PKCE
    verifier)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
        "code_verifier": code_verifier,
    }
    if client_secret:  # else a public client: PKCE alone binds the code to this login
        form["client_secret"] = client_secret
    tokens = await http.post_form(token_endpoint, form)
    if not isinstance(tokens, dict):
        raise ProviderError("The identity provider's token response is not a JSON object.")
    if isinstance(tokens.get("error"), str):
        raise ProviderError(f"The identity provider refused the code ({tokens['error']}).")
    return tokens


async def fetch_key_set(http: ProviderHttp, jwks_uri: str) -> KeySet:
    document = await http.get_json(jwks_uri)
    try:
        return KeySet.import_key_set(document)
    except (JoseError, ValueError, TypeError, KeyError):
        raise ProviderError("The identity provider's key set cannot be read.") from None


def verify_id_token(
    id_token: str,
    keys: KeySet,
    *,
    issuer: str,
    client_id: str,
    nonce: str,
    now: datetime,
) -> Identity:
    """The identity in a signed ID token, after every check in the module docstring; a
    failed check raises `ProviderError` saying which."""
    try:
        token = jwt.decode(id_token, keys, algorithms=list(ID_TOKEN_ALGORITHMS))
    except (JoseError, ValueError):
        raise ProviderError("The ID token's signature is not valid.") from None
    claims = token.claims
    registry = JWTClaimsRegistry(
        now=int(now.timestamp()),
        leeway=LEEWAY_SECONDS,
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": client_id},
        exp={"essential": True},
        iat={"essential": True},
        sub={"essential": True},
    )
    try:
        registry.validate(claims)
    except JoseError as error:
        raise ProviderError(f"The ID token was refused: {_claim_problem(error)}.") from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise ProviderError("The ID token was refused: it was issued to another client (azp).")
    token_nonce = claims.get("nonce")
    if not isinstance(token_nonce, str) or not hmac.compare_digest(token_nonce, nonce):
        raise ProviderError("The ID token was refused: its nonce is not this sign-in's.")
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise ProviderError("The identity provider did not give an email address.")
    name = claims.get("name")
    return Identity(
        email=email.strip().lower(),
        email_verified=claims.get("email_verified") is True,
        name=name if isinstance(name, str) else "",
        subject=str(claims["sub"]),
        issuer=issuer,
    )


def _claim_problem(error: JoseError) -> str:
    # joserfc's errors carry the claim's name: say it in words.
    if isinstance(error, ExpiredTokenError):
        return "it has expired"
    text = str(error)
    for claim, words in (
        ("aud", "it was issued to another client (audience)"),
        ("iss", "it comes from another issuer"),
        ("exp", "it has expired"),
        ("iat", "it was issued in the future"),
        ("nbf", "it is not valid yet"),
        ("sub", "it names no subject"),
    ):
        if f"'{claim}'" in text:
            return words
    return text
