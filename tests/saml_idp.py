"""A SAML 2.0 identity provider on loopback for sign-in tests, built with pysaml2 (signing by
xmlsec1, as a real IdP would).

Its metadata is at `{url}/idp/metadata`. An AuthnRequest arrives at `{url}/idp/sso`
(HTTP-Redirect binding); the IdP reads the service provider's metadata from the request's
issuer (Postwire's SP entity id is its metadata URL), asks which address signs in, and answers
with a page whose button POSTs the signed Response to the SP's assertion consumer (HTTP-POST
binding, as browsers do it). `mode` makes the answer unsigned, for another audience, or
expired, for the refusal tests.
"""

from __future__ import annotations

import datetime
import html
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import flask
import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.config import IdPConfig, SPConfig
from saml2.metadata import create_metadata_string
from saml2.saml import AUTHN_PASSWORD_PROTECTED, NAME_FORMAT_URI, NAMEID_FORMAT_EMAILADDRESS, NameID
from saml2.server import Server

from tests.oidc_provider import serve_wsgi

XMLSEC = "/usr/bin/xmlsec1"
OTHER_SP = "https://another-service.example/metadata"


def write_key_pair(directory: Path) -> tuple[Path, Path]:
    """A self-signed RSA certificate and its key, as PEM files (the IdP's signing pair)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test IdP")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = directory / "idp.key", directory / "idp.crt"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


@dataclass
class SamlIdp:
    """The IdP's state: its URL once serving, and how it answers (`mode`)."""

    directory: Path
    url: str = ""
    mode: str = "valid"  # "valid", "unsigned", "wrong_audience", "expired"
    key_file: Path = field(init=False)
    cert_file: Path = field(init=False)
    answers: int = 0

    def __post_init__(self) -> None:
        self.key_file, self.cert_file = write_key_pair(self.directory)

    @property
    def entity_id(self) -> str:
        return f"{self.url}/idp/metadata"

    def config(self, sp_metadata: list[str] | None) -> IdPConfig:
        # An expired answer: its validity window ended before it was made (and it is signed).
        lifetime = {"minutes": -30} if self.mode == "expired" else {"minutes": 5}
        settings: dict[str, Any] = {
            "entityid": self.entity_id,
            "xmlsec_binary": XMLSEC,
            "key_file": str(self.key_file),
            "cert_file": str(self.cert_file),
            "service": {
                "idp": {
                    "endpoints": {
                        "single_sign_on_service": [(f"{self.url}/idp/sso", BINDING_HTTP_REDIRECT)]
                    },
                    "name_id_format": [NAMEID_FORMAT_EMAILADDRESS],
                    "want_authn_requests_signed": False,
                    "policy": {
                        "default": {
                            "lifetime": lifetime,
                            "attribute_restrictions": None,
                            "name_form": NAME_FORMAT_URI,
                        }
                    },
                }
            },
            "metadata": {"inline": sp_metadata} if sp_metadata else {},
        }
        config = IdPConfig()
        config.load(settings)
        return config

    def metadata(self) -> str:
        document = create_metadata_string(None, config=self.config(None), valid=None)
        return document.decode() if isinstance(document, bytes) else str(document)

    def app(self) -> flask.Flask:
        app = flask.Flask("saml_idp")

        @app.get("/idp/metadata")
        def metadata() -> Any:
            return flask.Response(self.metadata(), mimetype="application/samlmetadata+xml")

        @app.get("/idp/sso")
        def sso() -> Any:
            # The sign-in form: which address signs in (what a password form would decide).
            request = html.escape(flask.request.args["SAMLRequest"])
            relay_state = html.escape(flask.request.args.get("RelayState", ""))
            return (
                "<!doctype html><title>Test IdP</title><h1>Test IdP</h1>"
                '<form method="post" action="/idp/answer">'
                f'<input type="hidden" name="SAMLRequest" value="{request}">'
                f'<input type="hidden" name="RelayState" value="{relay_state}">'
                '<label>Email <input name="email" type="email" required></label>'
                '<button type="submit">Sign in</button></form>'
            )

        @app.post("/idp/answer")
        def answer() -> Any:
            form = flask.request.form
            return self.answer_page(form["SAMLRequest"], form.get("RelayState", ""), form["email"])

        return app

    def answer_page(self, saml_request: str, relay_state: str, email: str) -> str:
        bare = Server(config=self.config(None))
        issuer = bare.parse_authn_request(saml_request, BINDING_HTTP_REDIRECT).message.issuer.text
        sp_metadata = [httpx.get(issuer).text]
        audience = issuer
        if self.mode == "wrong_audience":
            audience = OTHER_SP
            sp_metadata.append(_other_sp_metadata())
        server = Server(config=self.config(sp_metadata))
        request = server.parse_authn_request(saml_request, BINDING_HTTP_REDIRECT).message
        acs = request.assertion_consumer_service_url
        signed = self.mode != "unsigned"
        response = server.create_authn_response(
            identity={"mail": [email], "displayName": [email.partition("@")[0].title()]},
            in_response_to=request.id,
            destination=acs,
            sp_entity_id=audience,
            name_id=NameID(format=NAMEID_FORMAT_EMAILADDRESS, text=email),
            authn={"class_ref": AUTHN_PASSWORD_PROTECTED},
            sign_response=signed,
            sign_assertion=signed,
        )
        self.answers += 1
        info = server.apply_binding(
            BINDING_HTTP_POST, str(response), acs, relay_state, response=True
        )
        # pysaml2's POST page submits itself with an inline script; tests click instead.
        encoded = _saml_response_value(info["data"])
        return (
            "<!doctype html><title>Test IdP</title>"
            f'<form method="post" action="{html.escape(acs)}">'
            f'<input type="hidden" name="SAMLResponse" value="{encoded}">'
            f'<input type="hidden" name="RelayState" value="{html.escape(relay_state)}">'
            '<button type="submit">Continue</button></form>'
        )


def _other_sp_metadata() -> str:
    """Metadata of another service provider, for an answer meant for it."""
    config = SPConfig()
    config.load(
        {
            "entityid": OTHER_SP,
            "xmlsec_binary": XMLSEC,
            "service": {
                "sp": {
                    "endpoints": {
                        "assertion_consumer_service": [
                            ("https://another-service.example/acs", BINDING_HTTP_POST)
                        ]
                    }
                }
            },
        }
    )
    document = create_metadata_string(None, config=config, valid=None)
    return document.decode() if isinstance(document, bytes) else str(document)


def _saml_response_value(page: str) -> str:
    match = re.search(r'name="SAMLResponse" value="([^"]+)"', page)
    assert match is not None, page
    return match.group(1)


@contextmanager
def saml_idp() -> Iterator[SamlIdp]:
    with tempfile.TemporaryDirectory() as directory:
        idp = SamlIdp(Path(directory))
        with serve_wsgi(idp.app()) as url:
            idp.url = url
            yield idp
