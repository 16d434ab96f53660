"""Webhook signatures verify with the `svix` package and the `resend` SDK's verifier."""

from __future__ import annotations

import time

import pytest
import resend
from svix.webhooks import Webhook, WebhookVerificationError

from postwire.webhooks.signing import new_signing_secret, signed_headers


def test_svix_verifies_what_postwire_signs() -> None:
    secret = new_signing_secret()
    assert secret.startswith("whsec_")
    body = b'{"type":"email.delivered","created_at":"2026-11-23T10:00:00.000Z","data":{}}'
    headers = signed_headers(secret, "msg_2p5jXN8AQM9LWM0D4loKWxJek", int(time.time()), body)
    Webhook(secret).verify(body, headers)  # raises unless the signature is right
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace(b"delivered", b"bounced"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_signing_secret()).verify(body, headers)


def test_the_resend_sdk_verifies_what_postwire_signs() -> None:
    secret = new_signing_secret()
    body = '{"type":"email.sent","created_at":"2026-11-23T10:00:00.000Z","data":{}}'
    headers = signed_headers(secret, "msg_1", int(time.time()), body.encode())
    resend.Webhooks.verify(
        {
            "payload": body,
            "headers": {
                "id": headers["svix-id"],
                "timestamp": headers["svix-timestamp"],
                "signature": headers["svix-signature"],
            },
            "webhook_secret": secret,
        }
    )
