"""SAML 2.0 sign-in for a team, as a service provider built with pysaml2 (signatures checked by
xmlsec1).

Each team is its own service provider: entity id `{dashboard}/auth/saml/{team}/metadata` (its
metadata document is served there), assertion consumer `{dashboard}/auth/saml/{team}/acs`
(HTTP-POST binding). The AuthnRequest goes out unsigned over the HTTP-Redirect binding (the
request proves nothing; what matters is the answer). The answer must be signed (the Response
or its Assertion) by a key of the team's IdP metadata, answer a request we sent
(`InResponseTo`, matched against the login kept in `sso_logins`: unsolicited answers are
refused), name us as its audience, and be within its NotBefore/NotOnOrAfter window; pysaml2
checks all of these. The address is the NameID when it is an email address, else the `email`
or `mail` attribute.

pysaml2 is synchronous and runs xmlsec1 as a process: callers run these functions in a
worker thread.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT  # type: ignore[import-untyped]
from saml2.saml import NAMEID_FORMAT_EMAILADDRESS  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from saml2.client import Saml2Client  # type: ignore[import-untyped]

XMLSEC_BINARY = "/usr/bin/xmlsec1"
_IN_RESPONSE_TO = re.compile(rb'InResponseTo="([^"]{1,200})"')
_ENTITY_ID = re.compile(r'entityID="([^"]{1,1000})"')
EMAIL_ATTRIBUTES = ("email", "mail", "emailAddress", "urn:oid:0.9.2342.19200300.100.1.3")


class SamlError(Exception):
    """The IdP's metadata or answer is refused; the text says why, in words for the page."""


@dataclass(frozen=True, slots=True)
class SamlIdentity:
    email: str
    name: str
    # The NameID (the address when no NameID text is given) under the IdP's entity id: what
    # links the person to an account, as `sub` and `iss` do in OpenID Connect.
    subject: str
    issuer: str


def service_provider_urls(public_url: str, team_id: str) -> tuple[str, str]:
    """(entity id, assertion consumer URL) of the team's service provider."""
    base = f"{public_url.rstrip('/')}/auth/saml/{team_id}"
    return f"{base}/metadata", f"{base}/acs"


def _client(public_url: str, team_id: str, idp_metadata_xml: str) -> Saml2Client:
    # Imported here, not with the module: pysaml2's client loads its XML schemas (over a second
    # of CPU), which every start of the service would pay for a sign-in few teams use.
    from saml2.client import Saml2Client
    from saml2.config import SPConfig  # type: ignore[import-untyped]

    entity_id, acs_url = service_provider_urls(public_url, team_id)
    settings: dict[str, Any] = {
        "entityid": entity_id,
        "xmlsec_binary": XMLSEC_BINARY,
        "allow_unknown_attributes": True,
        "service": {
            "sp": {
                "endpoints": {"assertion_consumer_service": [(acs_url, BINDING_HTTP_POST)]},
                "allow_unsolicited": False,
                "authn_requests_signed": False,
                "want_response_signed": False,
                "want_assertions_signed": False,
                "want_assertions_or_response_signed": True,
                "name_id_format": NAMEID_FORMAT_EMAILADDRESS,
            }
        },
        "metadata": {"inline": [idp_metadata_xml]} if idp_metadata_xml else {},
    }
    config = SPConfig()
    try:
        config.load(settings)
    except Exception as error:  # pysaml2 raises many kinds for unreadable metadata
        raise SamlError(f"The identity provider's metadata cannot be read ({error}).") from None
    return Saml2Client(config)


def sp_metadata(public_url: str, team_id: str) -> str:
    """The team's service provider metadata document, for the IdP's administrator."""
    from saml2.metadata import create_metadata_string  # type: ignore[import-untyped]

    client = _client(public_url, team_id, "")
    metadata: bytes | str = create_metadata_string(None, config=client.config, valid=None)
    return metadata.decode() if isinstance(metadata, bytes) else metadata


def idp_entity_id(metadata_xml: str) -> str:
    """The entity id an IdP metadata document describes; `SamlError` if there is none."""
    match = _ENTITY_ID.search(metadata_xml)
    if match is None or "IDPSSODescriptor" not in metadata_xml:
        raise SamlError("This is not SAML identity provider metadata (no IDPSSODescriptor).")
    return match.group(1)


def check_idp_metadata(public_url: str, team_id: str, metadata_xml: str) -> str:
    """The IdP's entity id if pysaml2 reads the metadata and finds a sign-in endpoint."""
    entity_id = idp_entity_id(metadata_xml)
    client = _client(public_url, team_id, metadata_xml)
    try:
        client.metadata.single_sign_on_service(entity_id, BINDING_HTTP_REDIRECT)
        certificates = client.metadata.certs(entity_id, "idpsso", use="signing")
    except Exception:
        raise SamlError(
            "The identity provider's metadata names no sign-in endpoint for the"
            " HTTP-Redirect binding."
        ) from None
    if not certificates:
        raise SamlError("The identity provider's metadata has no signing certificate.")
    return entity_id


def authn_request(
    public_url: str, team_id: str, metadata_xml: str, relay_state: str
) -> tuple[str, str]:
    """(request id, URL sending the browser to the IdP with the AuthnRequest)."""
    client = _client(public_url, team_id, metadata_xml)
    entity_id = idp_entity_id(metadata_xml)
    try:
        request_id, info = client.prepare_for_authenticate(
            entityid=entity_id, relay_state=relay_state, binding=BINDING_HTTP_REDIRECT
        )
    except Exception as error:
        raise SamlError(f"The sign-in request could not be made ({error}).") from None
    location = str(dict(info["headers"])["Location"])
    # The metadata's endpoint becomes a Location header: an http(s) URL, no control characters.
    if not location.startswith(("https://", "http://")) or any(
        ord(c) < 0x20 or c == "\x7f" for c in location
    ):
        raise SamlError("The identity provider's sign-in endpoint is not a URL.")
    return str(request_id), location


def in_response_to(saml_response: str) -> str | None:
    """The request id an answer claims to answer, read before any check so the pending
    login can be found (the checks then hold the answer to exactly that request)."""
    try:
        xml = base64.b64decode(saml_response, validate=False)
    except (binascii.Error, ValueError):
        return None
    match = _IN_RESPONSE_TO.search(xml)
    return None if match is None else match.group(1).decode("ascii", "replace")


def verify_response(
    public_url: str, team_id: str, metadata_xml: str, saml_response: str, request_id: str
) -> SamlIdentity:
    """Who the IdP's answer to `request_id` says signed in, after pysaml2's checks."""
    client = _client(public_url, team_id, metadata_xml)
    try:
        response = client.parse_authn_request_response(
            saml_response, BINDING_HTTP_POST, outstanding={request_id: "/"}
        )
    except Exception as error:
        raise SamlError(f"The identity provider's answer was refused: {_reason(error)}.") from None
    if response is None:
        raise SamlError("The identity provider's answer was refused: it could not be read.")
    return _identity(response, idp_entity_id(metadata_xml))


def _identity(response: Any, issuer: str) -> SamlIdentity:
    attributes: dict[str, list[str]] = response.ava or {}
    subject = response.get_subject()
    email = ""
    if subject is not None and subject.format == NAMEID_FORMAT_EMAILADDRESS and subject.text:
        email = subject.text
    for name in EMAIL_ATTRIBUTES:
        if not email and attributes.get(name):
            email = attributes[name][0]
    if "@" not in email:
        raise SamlError("The identity provider's answer gives no email address.")
    names = attributes.get("displayName") or attributes.get("cn") or attributes.get("name")
    email = email.strip().lower()
    name_id = subject.text.strip() if subject is not None and subject.text else ""
    return SamlIdentity(
        email=email, name=names[0] if names else "", subject=name_id or email, issuer=issuer
    )


def _reason(error: Exception) -> str:
    text = f"{type(error).__name__}: {error}".lower()
    for words, reason in (
        ("signature", "its signature is missing or not valid"),
        ("sigver", "its signature is missing or not valid"),
        ("not signed", "its signature is missing or not valid"),
        ("condition not ok", "it has expired or is not meant for this service (conditions)"),
        ("audience", "it is meant for another service provider (audience)"),
        ("notonorafter", "it has expired"),
        ("too old", "it has expired"),
        ("unsolicited", "it answers no sign-in started here"),
        ("inresponseto", "it answers no sign-in started here"),
    ):
        if words in text:
            return reason
    return type(error).__name__
