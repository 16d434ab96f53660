"""OpenID Connect providers on loopback for sign-in tests.

`OidcProvider` is a real provider from PyPI (`oidc-provider-mock`: Flask and authlib; it signs
ID tokens with its own RSA key, publishes them in its JWKS, and asks on its authorization page
which user signs in). It also answers as GitHub's API (`/github/user`, `/github/user/emails`)
for the access tokens it issued, so Google, GitHub and a team's SSO all sign in through it.

`ForgingProvider` is a provider of our own for the refusals: it keeps the authorization
request's nonce and PKCE challenge, refuses a token request whose verifier does not match
(S256), and signs the ID token as the test asks (`mode`): valid, with a key it does not
publish, for another audience, expired, or with the nonce of an earlier login.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import flask
import httpx
import werkzeug.serving
from authlib.integrations import flask_oauth2
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from oidc_provider_mock import User
from oidc_provider_mock import _app as provider_app
from oidc_provider_mock import app as provider_flask_app


@dataclass(frozen=True)
class Person:
    """A user of the provider: `sub` is what is typed (or clicked) on its authorization page."""

    sub: str
    email: str
    name: str
    email_verified: bool = True

    def as_user(self) -> User:
        claims = {"email": self.email, "email_verified": self.email_verified, "name": self.name}
        return User(sub=self.sub, claims=claims)


@contextmanager
def serve_wsgi(app: flask.Flask) -> Iterator[str]:
    """Serve `app` on a free loopback port in a thread; yields its URL (`http://localhost:N`:
    the host name the dashboard's configuration names)."""
    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield f"http://localhost:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)
        server.server_close()


def _add_github_api(app: flask.Flask) -> None:
    """GitHub's user API over the provider's own access tokens."""

    def signed_in_user() -> User:
        token = flask_oauth2.current_token
        user = token.get_user()
        assert isinstance(user, User)
        return user

    @app.get("/github/user")
    @provider_app.require_oauth()
    def github_user() -> Any:
        user = signed_in_user()
        number = int(hashlib.sha256(user.sub.encode()).hexdigest()[:8], 16)
        return {"id": number, "login": user.sub, "name": user.claims.get("name")}

    @app.get("/github/user/emails")
    @provider_app.require_oauth()
    def github_emails() -> Any:
        claims = signed_in_user().claims
        return [
            {"email": "noreply@users.github.invalid", "primary": False, "verified": True},
            {
                "email": claims.get("email"),
                "primary": True,
                "verified": claims.get("email_verified") is True,
                "visibility": "private",
            },
        ]


@contextmanager
def oidc_provider(people: Sequence[Person]) -> Iterator[str]:
    """The real provider with `people` (one button each on its authorization page); yields
    its issuer URL. GitHub's API is under `{issuer}/github`."""
    app = provider_flask_app(require_nonce=True, user_claims=[p.as_user() for p in people])
    _add_github_api(app)
    with serve_wsgi(app) as url:
        yield url


def register_client(issuer: str, redirect_uri: str, scope: str) -> tuple[str, str]:
    """A client registered with the real provider (RFC 7591): only `redirect_uri` is accepted
    for it, and only `scope`. Returns (client id, secret)."""
    response = httpx.post(
        f"{issuer}/oauth2/clients",
        json={
            "redirect_uris": [redirect_uri],
            "scope": scope,
            "token_endpoint_auth_method": "client_secret_post",
        },
    )
    response.raise_for_status()
    body = response.json()
    return body["client_id"], body["client_secret"]


def _new_key() -> RSAKey:
    return RSAKey.generate_key(2048, auto_kid=True)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class ForgingProvider:
    """A provider whose ID tokens say what the test wants (see the module docstring)."""

    client_id: str = "postwire-test"
    email: str = "forged@example.com"
    mode: str = "valid"
    issuer: str = ""
    signing_key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, auto_kid=True))
    unpublished_key: RSAKey = field(
        default_factory=lambda: RSAKey.generate_key(2048, auto_kid=True)
    )
    # code -> (nonce, PKCE challenge, redirect URI)
    codes: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    nonces: list[str] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    # When set, the authorization endpoint keeps its answer (the callback URL, in
    # `callbacks`) instead of redirecting: a test decides where the callback goes.
    hold_callbacks: bool = False
    callbacks: list[str] = field(default_factory=list)

    def app(self) -> flask.Flask:
        app = flask.Flask("forging_provider")

        @app.get("/.well-known/openid-configuration")
        def discovery() -> Any:
            return {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
            }

        @app.get("/jwks")
        def jwks() -> Any:
            return KeySet([self.signing_key]).as_dict(private=False)

        @app.get("/authorize")
        def authorize() -> Any:
            args = flask.request.args
            if args.get("code_challenge_method") != "S256" or not args.get("code_challenge"):
                return "PKCE S256 required", 400
            code = secrets.token_urlsafe(16)
            self.codes[code] = (args["nonce"], args["code_challenge"], args["redirect_uri"])
            self.nonces.append(args["nonce"])
            query = urlencode({"code": code, "state": args["state"]})
            callback = f"{args['redirect_uri']}?{query}"
            self.callbacks.append(callback)
            if self.hold_callbacks:
                return "held"
            return flask.redirect(callback)

        @app.post("/token")
        def token() -> Any:
            form = flask.request.form.to_dict()
            self.token_requests.append(form)
            found = self.codes.pop(form.get("code", ""), None)
            if found is None:
                return {"error": "invalid_grant", "error_description": "unknown code"}, 400
            nonce, challenge, redirect_uri = found
            verifier = form.get("code_verifier", "")
            if _b64url(hashlib.sha256(verifier.encode()).digest()) != challenge:
                return {"error": "invalid_grant", "error_description": "PKCE check failed"}, 400
            if form.get("redirect_uri") != redirect_uri:
                return {"error": "invalid_grant", "error_description": "redirect_uri"}, 400
            return {"access_token": "at", "token_type": "Bearer", "id_token": self.id_token(nonce)}

        return app

    def id_token(self, nonce: str) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "forged-1",
            "aud": self.client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            "email": self.email,
            "email_verified": True,
            "name": "Forged Person",
        }
        key = self.signing_key
        if self.mode == "bad_signature":
            key = self.unpublished_key
        elif self.mode == "wrong_audience":
            claims["aud"] = "another-client"
        elif self.mode == "expired":
            claims["iat"], claims["exp"] = now - 7200, now - 3600
        elif self.mode == "replayed_nonce":
            claims["nonce"] = self.nonces[0]
        elif self.mode == "wrong_issuer":
            claims["iss"] = "https://elsewhere.example"
        elif self.mode == "unverified_email":
            claims["email_verified"] = False
        header = {"alg": "RS256", "kid": key.kid}
        return jwt.encode(header, claims, key)


@contextmanager
def forging_provider(**settings: Any) -> Iterator[ForgingProvider]:
    provider = ForgingProvider(**settings)
    with serve_wsgi(provider.app()) as url:
        provider.issuer = url
        yield provider
