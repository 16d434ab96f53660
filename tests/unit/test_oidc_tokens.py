"""The checks of an ID token, with tokens signed by keys of the test's own: a signature by a
key the provider does not publish, another audience or issuer, an expired token, one issued
in the future, another login's nonce, several audiences without `azp`: each refused in words."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from postwire.accounts.oidc import authorization_url, pkce_challenge, verify_id_token
from postwire.accounts.provider_http import ProviderError

NOW = datetime(2026, 11, 25, 5, 0, tzinfo=UTC)
ISSUER = "https://idp.example"
CLIENT = "postwire"
PUBLISHED = RSAKey.generate_key(2048, auto_kid=True)
UNPUBLISHED = RSAKey.generate_key(2048, auto_kid=True)
KEYS = KeySet.import_key_set(KeySet([PUBLISHED]).as_dict(private=False))


def _claims(**changes: Any) -> dict[str, Any]:
    now = int(NOW.timestamp())
    claims = {
        "iss": ISSUER,
        "sub": "u1",
        "aud": CLIENT,
        "iat": now - 10,
        "exp": now + 300,
        "nonce": "n-1",
        "email": "Ann@Example.com",
        "email_verified": True,
        "name": "Ann",
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _token(key: RSAKey | OctKey = PUBLISHED, alg: str = "RS256", **changes: Any) -> str:
    header = {"alg": alg} if key.kid is None else {"alg": alg, "kid": key.kid}
    return jwt.encode(header, _claims(**changes), key)


def _verify(token: str, nonce: str = "n-1") -> Any:
    return verify_id_token(token, KEYS, issuer=ISSUER, client_id=CLIENT, nonce=nonce, now=NOW)


def test_a_valid_token_gives_the_identity() -> None:
    identity = _verify(_token())
    assert (identity.email, identity.email_verified, identity.name) == (
        "ann@example.com",
        True,
        "Ann",
    )


@pytest.mark.parametrize(
    ("token", "words"),
    [
        (_token(UNPUBLISHED), "signature"),
        (_token(aud="another-client"), "another client"),
        (_token(aud=["another-client", CLIENT]), r"another client \(azp\)"),
        (_token(iss="https://elsewhere.example"), "another issuer"),
        (_token(exp=int(NOW.timestamp()) - 120), "expired"),
        (_token(iat=int(NOW.timestamp()) + 600), "future"),
        (_token(nonce="n-0"), "nonce"),
        (_token(nonce=None), "nonce"),
        (_token(exp=None), "exp"),
        (_token(email=None), "email address"),
    ],
    ids=[
        "bad-signature",
        "wrong-audience",
        "several-audiences-without-azp",
        "wrong-issuer",
        "expired",
        "issued-in-the-future",
        "replayed-nonce",
        "no-nonce",
        "no-expiry",
        "no-email",
    ],
)
def test_a_token_failing_a_check_is_refused_in_words(token: str, words: str) -> None:
    with pytest.raises(ProviderError, match=words):
        _verify(token)


def test_a_token_signed_with_the_client_secret_is_refused() -> None:
    # HS256 with a secret the client knows proves nothing the client could not forge.
    secret = OctKey.import_key("s" * 32)
    token = jwt.encode({"alg": "HS256"}, _claims(), secret, algorithms=["HS256"])
    with pytest.raises(ProviderError, match="signature"):
        _verify(token)


def test_an_unsigned_token_is_refused() -> None:
    header = "eyJhbGciOiJub25lIn0"  # {"alg":"none"}
    body = _token().split(".")[1]
    with pytest.raises(ProviderError, match="signature"):
        _verify(f"{header}.{body}.")


def test_the_authorization_request_carries_state_nonce_and_an_s256_challenge() -> None:
    url = authorization_url(
        "https://idp.example/authorize?tenant=a",
        client_id=CLIENT,
        redirect_uri="http://localhost:3001/auth/callback/google",
        scope="openid email",
        state="st",
        code_verifier="dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        nonce="n-1",
    )
    assert url.startswith("https://idp.example/authorize?tenant=a&response_type=code&")
    # RFC 7636, appendix B.
    assert "code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" in url
    assert "code_challenge_method=S256" in url and "state=st" in url and "nonce=n-1" in url
    assert pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == (
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )
