"""Every refusal of the send endpoints, over raw HTTP, in the contract's error shape. The tests
share one server, each in a team of its own sending from a domain of its own."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, verified_domain

# Each test's own sending domain: the first team to verify a name owns it.
DOMAINS = {
    "test_send_refusals": "refusals.test",
    "test_oversize_bodies_are_refused": "oversize.test",
    "test_batch_strict_and_permissive": "batches.test",
    "test_unknown_email_and_reschedule_rules": "unknown-email.test",
}


def good_body(domain: str) -> dict[str, Any]:
    return {"from": f"a@{domain}", "to": "b@example.org", "subject": "s", "text": "t"}


def changed(good: dict[str, Any], **changes: Any) -> dict[str, Any]:
    body = {**good, **changes}
    return {k: v for k, v in body.items() if v is not None}


def refusals(
    good: dict[str, Any],
) -> list[tuple[str, bytes | dict[str, Any] | list[Any], int, str]]:
    """(what, body, status, error name) of each refused send, `good` changed to break it."""

    def with_fields(**changes: Any) -> dict[str, Any]:
        return changed(good, **changes)

    return [
        ("malformed JSON", b'{"from": ', 400, "validation_error"),
        ("nested 1,000 deep", b"[" * 1000 + b"]" * 1000, 422, "validation_error"),
        ("nested 33 deep", with_fields(headers={"X": json.loads("[" * 31 + "]" * 31)}), 422,
         "validation_error"),
        ("not an object", [1, 2], 422, "validation_error"),
        ("missing to", with_fields(to=None), 422, "missing_required_field"),
        ("missing subject", with_fields(subject=None), 422, "missing_required_field"),
        ("missing from", with_fields(**{"from": None}), 422, "missing_required_field"),
        ("to of the wrong type", with_fields(to=5), 422, "validation_error"),
        ("bad address", with_fields(to="not-an-address"), 422, "validation_error"),
        ("51 recipients", with_fields(to=[f"u{i}@example.org" for i in range(51)]), 422,
         "validation_error"),
        ("bad scheduled_at", with_fields(scheduled_at="someday maybe"), 422, "validation_error"),
        ("scheduled in the past", with_fields(scheduled_at="2001-01-01T00:00:00Z"), 422,
         "validation_error"),
        ("scheduled too far", with_fields(scheduled_at="in 40 days"), 422, "validation_error"),
        ("CRLF in subject", with_fields(subject="hi\r\nBcc: victim@example.org"), 422,
         "validation_error"),
        ("CRLF in header value", with_fields(headers={"X-Tag": "a\r\nBcc: v@example.org"}), 422,
         "validation_error"),
        ("CRLF in header name", with_fields(headers={"X-Tag\r\nBcc": "v@example.org"}), 422,
         "validation_error"),
        ("structural header", with_fields(headers={"Bcc": "v@example.org"}), 422,
         "validation_error"),
        ("bad tag", with_fields(tags=[{"name": "no spaces allowed", "value": "x"}]), 422,
         "validation_error"),
        ("attachment without content", with_fields(attachments=[{"filename": "a.txt"}]), 422,
         "invalid_attachment"),
        ("forbidden attachment type", with_fields(attachments=[{"filename": "x.exe",
         "content": "aGk="}]), 422, "invalid_attachment"),
        ("unverified domain", with_fields(**{"from": "a@unverified.test"}), 403,
         "validation_error"),
        ("address literal recipient", with_fields(to="b@[127.0.0.1]"), 422, "validation_error"),
        ("localhost recipient", with_fields(to="b@localhost"), 422, "validation_error"),
        ("internal cc", with_fields(cc="b@printer.local"), 422, "validation_error"),
        ("internal bcc", with_fields(bcc=["b@example.org", "c@db.internal"]), 422,
         "validation_error"),
        ("Sender of an unverified domain", with_fields(headers={"Sender": "a@unverified.test"}),
         403, "validation_error"),
        ("Sender not one address", with_fields(headers={"Sender": "a@x.test, b@x.test"}), 422,
         "validation_error"),
    ]  # fmt: skip


@pytest.fixture
def server(team_server: LiveServer) -> LiveServer:
    """The module's shared server, the `resend` SDK pointed at it with a team of the test's own."""
    return team_server


@pytest.fixture
def good(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A send the test's team may make: from its own domain (verified by `headers`)."""
    return good_body(DOMAINS[request.node.name])


@pytest.fixture
def headers(
    server: LiveServer, dns_server: AuthoritativeDnsServer, good: dict[str, Any]
) -> dict[str, str]:
    verified_domain(dns_server, good["from"].partition("@")[2])
    return {"Authorization": f"Bearer {resend.api_key}", "Content-Type": "application/json"}


def post(server: LiveServer, path: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.base_url + path, content=content, headers=headers, timeout=60)


def assert_error(response: httpx.Response, status: int, name: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    payload: dict[str, Any] = response.json()
    assert set(payload) == {"statusCode", "name", "message"}
    assert (payload["statusCode"], payload["name"]) == (status, name), payload
    return payload


def test_send_refusals(server: LiveServer, headers: dict[str, str], good: dict[str, Any]) -> None:
    for label, body, status, name in refusals(good):
        response = post(server, "/emails", body, headers)
        assert response.status_code == status, (label, response.text)
        assert_error(response, status, name)
    # Nothing refused was accepted.
    assert httpx.get(f"{server.base_url}/emails", headers=headers).json()["data"] == []


def test_oversize_bodies_are_refused(
    server: LiveServer, headers: dict[str, str], good: dict[str, Any]
) -> None:
    big_text = changed(good, text="x" * (41 * 1024 * 1024))
    assert_error(post(server, "/emails", big_text, headers), 422, "validation_error")
    huge = b'{"text": "' + b"x" * (49 * 1024 * 1024) + b'"}'
    assert_error(post(server, "/emails", huge, headers), 413, "validation_error")


def test_batch_strict_and_permissive(
    server: LiveServer, headers: dict[str, str], good: dict[str, Any]
) -> None:
    items = [good, changed(good, to="broken"), changed(good, subject="third")]
    strict = assert_error(post(server, "/emails/batch", items, headers), 422, "validation_error")
    assert "1" in strict["message"]
    assert httpx.get(f"{server.base_url}/emails", headers=headers).json()["data"] == []

    permissive = post(
        server, "/emails/batch", items, {**headers, "x-batch-validation": "permissive"}
    )
    assert permissive.status_code == 200, permissive.text
    result = permissive.json()
    assert len(result["data"]) == 2
    assert [e["index"] for e in result["errors"]] == [1]

    for body, name in [
        ([], "validation_error"),
        ([good] * 101, "validation_error"),
        ({"not": "a list"}, "validation_error"),
        (
            [changed(good, attachments=[{"filename": "a.txt", "content": "aGk="}])],
            "validation_error",
        ),
    ]:
        assert_error(post(server, "/emails/batch", body, headers), 422, name)
    bad_mode = post(server, "/emails/batch", [good], {**headers, "x-batch-validation": "lenient"})
    assert bad_mode.status_code in (400, 422)


def test_unknown_email_and_reschedule_rules(
    server: LiveServer, headers: dict[str, str], good: dict[str, Any]
) -> None:
    assert_error(httpx.get(f"{server.base_url}/emails/nope", headers=headers), 404, "not_found")
    # A Resend product Postwire leaves out (receiving), called as the SDK calls it.
    for call in (resend.Emails.Receiving.list,):
        with pytest.raises(resend.exceptions.ResendError) as unknown:
            call()
        assert unknown.value.code == 404 and unknown.value.error_type == "not_found"
        assert str(unknown.value) == "The requested endpoint does not exist."
    with pytest.raises(resend.exceptions.ResendError, match="cursor") as cursor:
        resend.Emails.list({"after": "zzz"})
    assert cursor.value.code == 422
    wrong = httpx.request("PUT", f"{server.base_url}/domains", headers=headers)
    assert_error(wrong, 405, "method_not_allowed")
    assert wrong.headers["allow"] == "GET, HEAD, POST"
    sent = post(server, "/emails", good, headers).json()
    # A queued (not scheduled) email can neither be rescheduled nor canceled.
    reschedule = httpx.patch(
        f"{server.base_url}/emails/{sent['id']}",
        headers=headers,
        json={"scheduled_at": "in 1 hour"},
    )
    assert_error(reschedule, 422, "validation_error")
    cancel = httpx.post(f"{server.base_url}/emails/{sent['id']}/cancel", headers=headers)
    assert_error(cancel, 422, "validation_error")


def test_openapi_document_is_served(server: LiveServer) -> None:
    document = httpx.get(f"{server.base_url}/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    assert {"/emails", "/emails/batch", "/domains/{domain_id}/verify", "/api-keys"} <= set(
        document["paths"]
    )
    schemas = document["components"]["schemas"]
    # `from` and `subject` may come from a template, so only `to` is always required.
    assert schemas["SendEmailBody"]["required"] == ["to"]
    assert {"from", "subject", "template"} <= set(schemas["SendEmailBody"]["properties"])
