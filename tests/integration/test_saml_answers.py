"""The SAML service provider against a pysaml2 IdP on loopback: a signed answer to our request
gives the address; an unsigned, tampered, expired or misaddressed answer, or one to a request
we did not send, is refused in words."""

from __future__ import annotations

import base64
import html
import re
import urllib.parse
from collections.abc import Iterator

import flask
import httpx
import pytest

from postwire.accounts import saml
from postwire.accounts.saml import SamlError, SamlIdentity
from tests.oidc_provider import serve_wsgi
from tests.saml_idp import SamlIdp, saml_idp

TEAM = "team-1"


@pytest.fixture(scope="module")
def idp() -> Iterator[SamlIdp]:
    """One IdP for the module; each test starts with it answering validly."""
    with saml_idp() as running:
        yield running


@pytest.fixture(autouse=True)
def idp_answers_validly(idp: SamlIdp) -> Iterator[None]:
    idp.mode = "valid"
    yield
    idp.mode = "valid"


@pytest.fixture(scope="module")
def sp_url() -> Iterator[str]:
    """A stand-in for the dashboard serving only the team's SP metadata (what the IdP reads)."""
    app = flask.Flask("sp")
    holder: dict[str, str] = {}

    @app.get(f"/auth/saml/{TEAM}/metadata")
    def metadata() -> str:
        return saml.sp_metadata(holder["url"], TEAM)

    with serve_wsgi(app) as url:
        holder["url"] = url
        yield url


def _answer(idp: SamlIdp, sp_url: str, email: str = "ann@example.com") -> tuple[str, str, str]:
    """(IdP metadata, our request id, the IdP's base64 Response to it)."""
    metadata = httpx.get(f"{idp.url}/idp/metadata").text
    request_id, location = saml.authn_request(sp_url, TEAM, metadata, "relay")
    query = urllib.parse.parse_qs(urllib.parse.urlparse(location).query)
    page = idp.answer_page(query["SAMLRequest"][0], query["RelayState"][0], email)
    match = re.search(r'name="SAMLResponse" value="([^"]+)"', page)
    assert match is not None
    return metadata, request_id, html.unescape(match.group(1))


def test_a_signed_answer_to_our_request_gives_the_address(idp: SamlIdp, sp_url: str) -> None:
    metadata, request_id, answer = _answer(idp, sp_url, "Ann@Example.com")
    assert saml.check_idp_metadata(sp_url, TEAM, metadata) == idp.entity_id
    assert saml.in_response_to(answer) == request_id
    identity = saml.verify_response(sp_url, TEAM, metadata, answer, request_id)
    # The NameID, as the IdP wrote it, under the IdP's entity id: what an SSO link is keyed by.
    assert identity == SamlIdentity(
        email="ann@example.com", name="Ann", subject="Ann@Example.com", issuer=idp.entity_id
    )


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("unsigned", "signature"),
        ("wrong_audience", "another service provider"),
        ("expired", "expired"),
    ],
)
def test_a_faulty_answer_is_refused(idp: SamlIdp, sp_url: str, mode: str, words: str) -> None:
    idp.mode = mode
    metadata, request_id, answer = _answer(idp, sp_url)
    with pytest.raises(SamlError, match=words):
        saml.verify_response(sp_url, TEAM, metadata, answer, request_id)


def test_a_tampered_answer_is_refused(idp: SamlIdp, sp_url: str) -> None:
    metadata, request_id, answer = _answer(idp, sp_url, "ann@example.com")
    xml = base64.b64decode(answer).replace(b"ann@example.com", b"eve@example.com")
    with pytest.raises(SamlError, match="signature"):
        saml.verify_response(sp_url, TEAM, metadata, base64.b64encode(xml).decode(), request_id)


def test_an_answer_to_a_request_we_did_not_send_is_refused(idp: SamlIdp, sp_url: str) -> None:
    metadata, _, answer = _answer(idp, sp_url)
    with pytest.raises(SamlError, match="no sign-in started here"):
        saml.verify_response(sp_url, TEAM, metadata, answer, "id-not-ours")


def test_metadata_that_is_not_an_idps_is_refused(sp_url: str) -> None:
    with pytest.raises(SamlError, match="IDPSSODescriptor"):
        saml.check_idp_metadata(sp_url, TEAM, saml.sp_metadata(sp_url, TEAM))
