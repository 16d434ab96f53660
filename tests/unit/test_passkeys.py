"""Passkey registration and sign-in on a real spool, answered by a software authenticator (an
ES256 key, "none" attestation, as a platform authenticator answers): what is accepted, and
what is refused (a replayed challenge, another origin, another user's passkey as a second
factor, a signature counter that went back, a credential registered twice)."""

from __future__ import annotations

import hashlib
import json
import secrets
import struct
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import bytes_to_base64url, encode_cbor

from postwire.accounts import mfa
from postwire.accounts.passkeys import RelyingParty
from postwire.store.spool import Spool

NOW = datetime(2026, 11, 25, 4, 0, tzinfo=UTC)
RP = RelyingParty.from_public_url("http://localhost:3001")
UP_UV = 0x01 | 0x04
ATTESTED = 0x40


class SoftAuthenticator:
    """One credential on an authenticator that does what browsers ask of it."""

    def __init__(self, origin: str = RP.origin) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = secrets.token_bytes(16)
        self.sign_count = 0
        self.origin = origin
        self.user_handle = b""

    def _client_data(self, kind: str, challenge: str) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": self.origin}
        return json.dumps(data).encode()

    def _rp_hash(self) -> bytes:
        return hashlib.sha256(RP.id.encode()).digest()

    def create(self, options_json: str) -> str:
        options = json.loads(options_json)
        self.user_handle = options["user"]["id"].encode()
        numbers = self.key.public_key().public_numbers()
        cose = {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32), -3: numbers.y.to_bytes(32)}
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id
        auth_data = (
            self._rp_hash()
            + bytes([UP_UV | ATTESTED])
            + struct.pack(">I", self.sign_count)
            + attested
            + encode_cbor(cose)
        )
        attestation = encode_cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client_data = self._client_data("webauthn.create", options["challenge"])
        return json.dumps(
            {
                "id": bytes_to_base64url(self.credential_id),
                "rawId": bytes_to_base64url(self.credential_id),
                "type": "public-key",
                "response": {
                    "clientDataJSON": bytes_to_base64url(client_data),
                    "attestationObject": bytes_to_base64url(attestation),
                    "transports": ["internal"],
                },
                "clientExtensionResults": {},
            }
        )

    def get(self, options_json: str) -> str:
        options = json.loads(options_json)
        self.sign_count += 1
        auth_data = self._rp_hash() + bytes([UP_UV]) + struct.pack(">I", self.sign_count)
        client_data = self._client_data("webauthn.get", options["challenge"])
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return json.dumps(
            {
                "id": bytes_to_base64url(self.credential_id),
                "rawId": bytes_to_base64url(self.credential_id),
                "type": "public-key",
                "response": {
                    "clientDataJSON": bytes_to_base64url(client_data),
                    "authenticatorData": bytes_to_base64url(auth_data),
                    "signature": bytes_to_base64url(signature),
                    "userHandle": bytes_to_base64url(self.user_handle),
                },
                "clientExtensionResults": {},
            }
        )


async def register(spool: Spool, user_id: str, authenticator: SoftAuthenticator) -> list[str]:
    options = await mfa.begin_passkey_registration(spool, "s1", RP, user_id, "ada@x.org", NOW)
    device, codes = await mfa.finish_passkey_registration(
        spool, "s1", RP, user_id, authenticator.create(options), "Laptop", NOW
    )
    assert device.kind == "passkey" and device.name == "Laptop"
    return codes or []


async def test_register_then_sign_in_alone_and_as_second_factor(spool: Spool) -> None:
    authenticator = SoftAuthenticator()
    codes = await register(spool, "u1", authenticator)
    assert len(codes) == 10 and mfa.user_has_mfa(spool, "u1")

    options = await mfa.begin_passkey_login(spool, "browser-a", RP, None, NOW)
    assert json.loads(options)["allowCredentials"] == []
    login = await mfa.finish_passkey_login(spool, "browser-a", RP, authenticator.get(options), NOW)
    assert login.user_id == "u1"

    options = await mfa.begin_passkey_login(spool, "s2", RP, "u1", NOW)
    allowed = json.loads(options)["allowCredentials"]
    assert [c["id"] for c in allowed] == [bytes_to_base64url(authenticator.credential_id)]
    answer = authenticator.get(options)
    assert (await mfa.finish_passkey_login(spool, "s2", RP, answer, NOW)).user_id == "u1"
    # The same answer again: its challenge was used up.
    with pytest.raises(mfa.MfaError, match="expired"):
        await mfa.finish_passkey_login(spool, "s2", RP, answer, NOW)
    (device,) = mfa.confirmed_devices(spool, "u1")
    assert device.sign_count == 2 and device.last_used_at_ms is not None


async def test_refusals(spool: Spool) -> None:
    ada, bob = SoftAuthenticator(), SoftAuthenticator()
    await register(spool, "ada", ada)
    await register(spool, "bob", bob)

    # Bob's passkey does not pass Ada's second step.
    options = await mfa.begin_passkey_login(spool, "s", RP, "ada", NOW)
    with pytest.raises(mfa.MfaError, match="not registered"):
        await mfa.finish_passkey_login(spool, "s", RP, bob.get(options), NOW)

    # An answer made for another origin (a look-alike site relaying the challenge).
    phished = SoftAuthenticator(origin="http://localhost.evil.example")
    phished.key, phished.credential_id = ada.key, ada.credential_id
    options = await mfa.begin_passkey_login(spool, "s", RP, "ada", NOW)
    with pytest.raises(mfa.MfaError, match="refused"):
        await mfa.finish_passkey_login(spool, "s", RP, phished.get(options), NOW)

    # A cloned authenticator: its counter is behind the one last seen.
    options = await mfa.begin_passkey_login(spool, "s", RP, "ada", NOW)
    ada.sign_count = 10
    await mfa.finish_passkey_login(spool, "s", RP, ada.get(options), NOW)
    ada.sign_count = 3
    options = await mfa.begin_passkey_login(spool, "s", RP, "ada", NOW)
    with pytest.raises(mfa.MfaError, match="refused"):
        await mfa.finish_passkey_login(spool, "s", RP, ada.get(options), NOW)

    # A challenge that waited too long.
    options = await mfa.begin_passkey_login(spool, "s", RP, "ada", NOW)
    late = NOW + timedelta(minutes=3)
    with pytest.raises(mfa.MfaError, match="expired"):
        await mfa.finish_passkey_login(spool, "s", RP, ada.get(options), late)

    # The same credential registered again (for another user) is refused.
    options = await mfa.begin_passkey_registration(spool, "s", RP, "carol", "c@x.org", NOW)
    with pytest.raises(mfa.MfaError, match="already registered"):
        await mfa.finish_passkey_registration(spool, "s", RP, "carol", ada.create(options), "", NOW)
    # A registration answered for someone else's challenge is refused.
    options = await mfa.begin_passkey_registration(spool, "s", RP, "carol", "c@x.org", NOW)
    with pytest.raises(mfa.MfaError, match="expired"):
        await mfa.finish_passkey_registration(
            spool, "s", RP, "dave", SoftAuthenticator().create(options), "", NOW
        )
    assert not mfa.user_has_mfa(spool, "carol") and not mfa.user_has_mfa(spool, "dave")
