"""Templates through the official `resend` SDK against a live server: every call of
`resend.Templates`, sending with `template` (single and batch), what the recipient receives,
and every refusal over raw HTTP in the contract's error shape. The tests share one server that
delivers example.org to a smtp-sink, each in a team of its own sending from a domain of its own."""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import resend

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import DOMAIN, LiveServer, verified_domain, wait_until

# The module's server delivers example.org to a smtp-sink keeping what it receives in `sink`.
from tests.e2e.test_broadcasts import shared_server, sink, sunk_from

__all__ = ["shared_server", "sink"]  # fixtures used here


ORDER_HTML = (
    "<p>Hi {{{NAME|there}}}, your {{{PRODUCT}}} costs {{{PRICE}}}.</p>"
    '<a href="{{{LINK}}}">Track</a>'
)


def api(live: LiveServer, key: str | None = None) -> httpx.Client:
    return httpx.Client(
        base_url=live.base_url,
        headers={"Authorization": f"Bearer {key or resend.api_key}"},
        timeout=10,
    )


def assert_error(response: httpx.Response, status: int, name: str, text: str = "") -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["statusCode"] == status and body["name"] == name, body
    assert text in body["message"], body


def order_template(domain: str = DOMAIN, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "name": "order-confirmation",
        "alias": "order",
        "from": f"Shop <shop@{domain}>",
        "subject": "Your {{{PRODUCT}}}",
        "reply_to": f"help@{domain}",
        "html": ORDER_HTML,
        "variables": [
            {"key": "PRODUCT", "type": "string", "fallback_value": "item"},
            {"key": "PRICE", "type": "number"},
            {"key": "LINK", "type": "string", "fallback_value": "https://example.com/t"},
        ],
    }
    params.update(extra)
    return params


def test_template_lifecycle_with_the_sdk(team_server: LiveServer) -> None:
    created = resend.Templates.create(order_template())  # type: ignore[arg-type]
    assert created["object"] == "template"
    template_id = created["id"]

    draft = resend.Templates.get("order")
    assert draft["id"] == template_id
    assert draft["status"] == "draft" and draft["published_at"] is None
    assert draft["has_unpublished_versions"] is True
    assert draft["from"] == f"Shop <shop@{DOMAIN}>"
    assert draft["reply_to"] == [f"help@{DOMAIN}"]
    assert draft["text"] is None
    assert [(v["key"], v["type"], v["fallback_value"]) for v in draft["variables"]] == [
        ("PRODUCT", "string", "item"),
        ("PRICE", "number", None),
        ("LINK", "string", "https://example.com/t"),
    ]
    first_version = draft["current_version_id"]

    assert resend.Templates.publish("order")["id"] == template_id
    published = resend.Templates.get(template_id)
    assert published["status"] == "published" and published["published_at"]
    assert published["has_unpublished_versions"] is False
    assert published["current_version_id"] == first_version

    # An edit of sent content opens a new version; a rename alone does not.
    resend.Templates.update({"id": template_id, "name": "Order confirmation"})
    assert resend.Templates.get(template_id)["has_unpublished_versions"] is False
    resend.Templates.update({"id": "order", "subject": "Your order of {{{PRODUCT}}}"})
    edited = resend.Templates.get(template_id)
    assert edited["has_unpublished_versions"] is True
    assert edited["status"] == "published"
    assert edited["current_version_id"] != first_version
    assert edited["name"] == "Order confirmation"

    copy = resend.Templates.duplicate("order")
    assert copy["id"] != template_id
    duplicated = resend.Templates.get(copy["id"])
    assert duplicated["name"] == "Order confirmation (copy)"
    assert duplicated["alias"] is None and duplicated["status"] == "draft"
    assert duplicated["subject"] == "Your order of {{{PRODUCT}}}"

    listed = resend.Templates.list()
    assert [item["id"] for item in listed["data"]] == [copy["id"], template_id]
    assert set(listed["data"][0]) == {
        "id", "name", "status", "published_at", "created_at", "updated_at", "alias"
    }  # fmt: skip
    page = resend.Templates.list({"limit": 1})
    assert page["has_more"] is True and page["data"][0]["id"] == copy["id"]
    older = resend.Templates.list({"limit": 1, "after": copy["id"]})
    assert [item["id"] for item in older["data"]] == [template_id] and not older["has_more"]

    resend.Templates.publish(template_id)
    with api(team_server) as client:
        versions = client.get(f"/templates/{template_id}/versions").json()
    assert [v["version_number"] for v in versions["data"]] == [2, 1]
    assert versions["data"][0]["subject"] == "Your order of {{{PRODUCT}}}"
    assert versions["data"][1]["subject"] == "Your {{{PRODUCT}}}"

    removed = resend.Templates.remove("order")
    assert (removed["object"], removed["id"], removed["deleted"]) == ("template", template_id, True)
    with api(team_server) as client:
        assert_error(client.get(f"/templates/{template_id}"), 404, "not_found")
        assert_error(client.get("/templates/order"), 404, "not_found")
    # The alias is free again.
    assert resend.Templates.create(order_template())["id"]  # type: ignore[arg-type]


def sent_email(email_id: str) -> dict[str, Any]:
    return dict(resend.Emails.get(email_id))


def test_sending_with_a_template(
    team_server: LiveServer, dns_server: AuthoritativeDnsServer, sink: Path
) -> None:
    domain = "templates-sending.test"
    verified_domain(dns_server, domain)
    template_id = resend.Templates.create(order_template(domain))["id"]  # type: ignore[arg-type]
    params: dict[str, Any] = {
        "to": "ann@example.org",
        "template": {
            "id": "order",
            "variables": {
                "PRICE": 499,
                "NAME": "Ann & <Bob>",
                "LINK": "https://x.test/?a=1&b=2",
            },
        },
    }
    with api(team_server) as client:
        # Only a published template can be sent.
        assert_error(client.post("/emails", json=params), 404, "not_found", "Template not found")
    resend.Templates.publish(template_id)
    # A draft change is not sent until published again.
    resend.Templates.update({"id": template_id, "html": "<p>unpublished {{{PRICE}}}</p>"})

    sent = resend.Emails.send(params)  # type: ignore[arg-type]
    record = sent_email(sent["id"])
    assert record["subject"] == "Your item"
    assert record["from"] == f"Shop <shop@{domain}>"
    assert record["reply_to"] == [f"help@{domain}"]
    assert record["html"] == (
        "<p>Hi Ann &amp; &lt;Bob&gt;, your item costs 499.</p>"
        '<a href="https://x.test/?a=1&amp;b=2">Track</a>'
    )
    assert record["text"].startswith("Hi Ann & <Bob>, your item costs 499.")

    # The payload's from, subject and reply_to win; a batch item renders its own values.
    overridden = resend.Emails.send(
        {
            "from": f"Sales <sales@{domain}>",
            "to": "bob@example.org",
            "subject": "Custom subject",
            "reply_to": [f"sales@{domain}"],
            "template": {"id": template_id, "variables": {"PRICE": 1.5, "PRODUCT": "lamp"}},
        }
    )
    batch = resend.Batch.send(
        [
            {"to": "cy@example.org", "template": {"id": "order", "variables": {"PRICE": 7}}},
            {"to": "di@example.org", "template": {"id": "order", "variables": {"PRICE": 8}}},
        ]  # type: ignore[list-item]
    )
    record = sent_email(overridden["id"])
    assert (record["from"], record["subject"], record["reply_to"]) == (
        f"Sales <sales@{domain}>",
        "Custom subject",
        [f"sales@{domain}"],
    )
    assert "your lamp costs 1.5." in record["html"]
    prices = [sent_email(item["id"])["html"] for item in batch["data"]]
    assert ["costs 7." in prices[0], "costs 8." in prices[1]] == [True, True]

    # Once delivery recorded each one, smtp-sink has written it whole.
    ids = [sent["id"], overridden["id"], *(item["id"] for item in batch["data"])]
    wait_until(
        lambda: all(sent_email(i)["last_event"] == "delivered" for i in ids),
        "the four emails are delivered",
    )
    received = {
        m.rcpt_tos[0]: email.message_from_bytes(m.content, policy=email.policy.default)
        for m in sunk_from(sink, domain)
    }
    assert len(received) == 4
    ann = received["ann@example.org"]
    assert isinstance(ann, EmailMessage)
    assert ann["Subject"] == "Your item"
    html_part = ann.get_body(("html",))
    text_part = ann.get_body(("plain",))
    assert html_part is not None and text_part is not None
    assert "Hi Ann &amp; &lt;Bob&gt;, your item costs 499." in html_part.get_content()
    assert 'href="https://x.test/?a=1&amp;b=2"' in html_part.get_content()
    assert "Hi Ann & <Bob>, your item costs 499." in text_part.get_content()


def test_template_refusals_over_raw_http(
    team_server: LiveServer, dns_server: AuthoritativeDnsServer
) -> None:
    server, domain = team_server, "templates-refusals.test"
    verified_domain(dns_server, domain)
    template_id = resend.Templates.create(order_template(domain))["id"]  # type: ignore[arg-type]
    resend.Templates.publish(template_id)
    send = {"to": "ann@example.org", "template": {"id": "order", "variables": {"PRICE": 5}}}
    with api(server) as client:
        # Create and update.
        assert_error(
            client.post("/templates", json={"html": "<p/>"}),
            422,
            "missing_required_field",
            "`name`",
        )
        assert_error(
            client.post("/templates", json={"name": "x"}), 422, "missing_required_field", "`html`"
        )
        assert_error(
            client.post("/templates", json=order_template(domain)),
            422,
            "validation_error",
            "alias `order`",
        )
        for bad, text in [
            ({"alias": "a/b"}, "`alias`"),
            ({"alias": template_id}, "`alias`"),
            ({"from": "not an address"}, "`from`"),
            ({"reply_to": ["x"]}, "`reply_to`"),
            ({"subject": "a\r\nBcc: x@y.z"}, "`subject`"),
            ({"variables": [{"key": "FIRST_NAME", "type": "string"}]}, "reserved"),
            ({"variables": [{"key": "bad key", "type": "string"}]}, "letters, digits"),
            ({"variables": [{"key": "A", "type": "date"}]}, "must be one of"),
            ({"variables": [{"key": "A", "type": "number", "fallback_value": "1"}]}, "number"),
            (
                {"variables": [{"key": "A", "type": "string"}, {"key": "A", "type": "string"}]},
                "twice",
            ),
            ({"variables": [{"key": f"K{i}", "type": "string"} for i in range(51)]}, "at most 50"),
        ]:
            body = order_template(domain, alias=None) | bad
            assert_error(client.post("/templates", json=body), 422, "validation_error", text)
        assert_error(client.patch("/templates/order", json={}), 422, "missing_required_field")
        assert_error(client.patch("/templates/order", json={"html": None}), 422, "validation_error")
        assert_error(client.get("/templates?limit=0"), 422, "validation_error")
        # A field given as null is cleared; a cleared alias names nothing any more.
        copy_id = client.post("/templates/order/duplicate").json()["id"]
        changed = client.patch(f"/templates/{copy_id}", json={"alias": "spare", "text": "t"})
        assert changed.json() == {"object": "template", "id": copy_id}
        assert client.get("/templates/spare").json()["text"] == "t"
        assert client.patch("/templates/spare", json={"alias": None, "text": None}).is_success
        assert_error(client.get("/templates/spare"), 404, "not_found")
        assert client.get(f"/templates/{copy_id}").json()["text"] is None

        # Sending.
        for extra, status, name, text in [
            ({"html": "<p>x</p>"}, 422, "validation_error", "cannot be used with `template`"),
            ({"text": "x"}, 422, "validation_error", "cannot be used with `template`"),
            ({"template": {"variables": {}}}, 422, "missing_required_field", "template.id"),
            ({"template": "order"}, 422, "validation_error", "`template`"),
            ({"template": {"id": "nope"}}, 404, "not_found", "Template not found"),
            ({"template": {"id": "order"}}, 422, "validation_error", "`PRICE`"),
            ({"template": {"id": "order", "variables": {"PRICE": "5"}}}, 422, "validation_error",
             "must be a number"),
            ({"template": {"id": "order", "variables": {"PRICE": 2**53}}}, 422, "validation_error",
             "between"),
            ({"template": {"id": "order", "variables": {"PRICE": 5, "X": "y" * 2001}}}, 422,
             "validation_error", "2000"),
            ({"template": {"id": "order", "variables": {"PRICE": 5, "X": True}}}, 422,
             "validation_error", "string or a number"),
            ({"template": {"id": "order", "variables": {"PRICE": 5, "EMAIL": "a@b.c"}}}, 422,
             "validation_error", "reserved"),
            ({"template": {"id": "order", "variables": {"PRICE": 5, "a-b": "x"}}}, 422,
             "validation_error", "letters, digits"),
        ]:  # fmt: skip
            assert_error(client.post("/emails", json=send | extra), status, name, text)

        # A batch: strict fails whole with the item's error; permissive keeps the good ones.
        items = [send, send | {"template": {"id": "missing"}}]
        assert_error(client.post("/emails/batch", json=items), 404, "not_found", "index 1")
        answer = client.post(
            "/emails/batch", json=items, headers={"x-batch-validation": "permissive"}
        ).json()
        assert len(answer["data"]) == 1
        assert answer["errors"] == [{"index": 1, "message": "Template not found"}]

    # Another team sees none of it, by id or alias.
    other = server.create_key("other", new_team="template refusals: another team")
    with api(server, other) as client:
        for path in (f"/templates/{template_id}", "/templates/order"):
            assert_error(client.get(path), 404, "not_found")
            assert_error(client.patch(path, json={"name": "x"}), 404, "not_found")
            assert_error(client.post(f"{path}/publish"), 404, "not_found")
            assert_error(client.post(f"{path}/duplicate"), 404, "not_found")
            assert_error(client.get(f"{path}/versions"), 404, "not_found")
            assert_error(client.delete(path), 404, "not_found")
        assert client.get("/templates").json()["data"] == []
        assert_error(client.post("/emails", json=send), 404, "not_found")
        # The other team may use the same alias for its own template.
        assert client.post("/templates", json=order_template(domain)).status_code == 201
