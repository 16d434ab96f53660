"""WebAuthn passkeys: the options the browser is given and the checks of its answers.

py_webauthn does the cryptography (attestation, signatures, client data); this module fixes
the relying party (the host of `dashboard.public_url`, and that URL's origin), asks for
discoverable credentials with user verification (a passkey, not only a security key), and
turns the library's errors into one `PasskeyError` a page can show.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlsplit

import webauthn
from webauthn.helpers import bytes_to_base64url, parse_registration_credential_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

# The browser has this long to answer (milliseconds); the server keeps the challenge as long.
TIMEOUT_MS = 120_000


class PasskeyError(Exception):
    """The browser's answer was refused; the message is fit to show."""


@dataclass(frozen=True, slots=True)
class RelyingParty:
    id: str  # a host name
    name: str
    origin: str  # scheme://host[:port]

    @classmethod
    def from_public_url(cls, public_url: str, name: str = "Postwire") -> RelyingParty:
        parts = urlsplit(public_url)
        if not parts.hostname:
            raise PasskeyError(f"dashboard.public_url {public_url!r} has no host")
        return cls(id=parts.hostname, name=name, origin=f"{parts.scheme}://{parts.netloc}")


@dataclass(frozen=True, slots=True)
class Options:
    json: str  # PublicKeyCredential{Creation,Request}Options, base64url fields, for the script
    challenge: str  # base64url, kept server-side until the answer comes


@dataclass(frozen=True, slots=True)
class NewPasskey:
    credential_id: str  # base64url
    public_key: str  # base64url COSE key
    sign_count: int
    transports: list[str]


def _descriptors(credential_ids: list[str]) -> list[PublicKeyCredentialDescriptor]:
    return [
        PublicKeyCredentialDescriptor(id=webauthn.base64url_to_bytes(cid)) for cid in credential_ids
    ]


def registration_options(
    rp: RelyingParty, user_id: str, user_name: str, display_name: str, existing: list[str]
) -> Options:
    """Options to create a passkey for the user; `existing` credential ids are excluded (an
    authenticator that holds one of them refuses to make a second)."""
    options = webauthn.generate_registration_options(
        rp_id=rp.id,
        rp_name=rp.name,
        user_id=user_id.encode(),
        user_name=user_name,
        user_display_name=display_name or user_name,
        timeout=TIMEOUT_MS,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=_descriptors(existing),
    )
    return Options(webauthn.options_to_json(options), bytes_to_base64url(options.challenge))


def verify_registration(rp: RelyingParty, credential_json: str, challenge: str) -> NewPasskey:
    try:
        verified = webauthn.verify_registration_response(
            credential=credential_json,
            expected_challenge=webauthn.base64url_to_bytes(challenge),
            expected_rp_id=rp.id,
            expected_origin=rp.origin,
            require_user_verification=True,
        )
        parsed = parse_registration_credential_json(credential_json)
    except (WebAuthnException, ValueError, KeyError, TypeError) as error:
        raise PasskeyError(f"The passkey could not be registered: {error}") from error
    transports = [str(t.value) for t in parsed.response.transports or []]
    return NewPasskey(
        credential_id=bytes_to_base64url(verified.credential_id),
        public_key=bytes_to_base64url(verified.credential_public_key),
        sign_count=verified.sign_count,
        transports=transports,
    )


def authentication_options(rp: RelyingParty, allowed: list[str]) -> Options:
    """Options to sign in with one of the `allowed` credentials; an empty list lets the
    browser offer any passkey of this site (a discoverable credential, no user named yet)."""
    options = webauthn.generate_authentication_options(
        rp_id=rp.id,
        timeout=TIMEOUT_MS,
        allow_credentials=_descriptors(allowed),
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return Options(webauthn.options_to_json(options), bytes_to_base64url(options.challenge))


def answered_credential_id(credential_json: str) -> str:
    """The credential id the browser says it used (to find its stored key); checked later."""
    try:
        value = json.loads(credential_json)["id"]
    except (ValueError, KeyError, TypeError) as error:
        raise PasskeyError("The browser's answer was not a passkey credential.") from error
    if not isinstance(value, str) or not value:
        raise PasskeyError("The browser's answer was not a passkey credential.")
    return value


def verify_authentication(
    rp: RelyingParty, credential_json: str, challenge: str, public_key: str, sign_count: int
) -> int:
    """Check the signature of the answer; returns the authenticator's new signature counter."""
    try:
        verified = webauthn.verify_authentication_response(
            credential=credential_json,
            expected_challenge=webauthn.base64url_to_bytes(challenge),
            expected_rp_id=rp.id,
            expected_origin=rp.origin,
            credential_public_key=webauthn.base64url_to_bytes(public_key),
            credential_current_sign_count=sign_count,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError) as error:
        raise PasskeyError(f"The passkey was refused: {error}") from error
    return verified.new_sign_count
