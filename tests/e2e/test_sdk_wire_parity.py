"""The requests the Go (v3.16), Node (v6.22) and Java (v4.20) SDKs send, byte for byte, against
one live server shared by the module (each test has a team of its own), and the answers held
to the types those SDKs declare.

- Go (`resend-go` `emails.go` `SendEmailRequest`, `templates.go` `UpdateTemplateRequest`,
  `broadcasts.go` `SendBroadcastRequest`): string fields without `omitempty` go out as `""`
  when unset; `encoding/json` escapes `<`, `>` and `&` and ends the body with a newline;
  `resend.go` sends `User-Agent: resend-go/3.12.0` (its `version` constant at v3.16.0).
- Java (`resend-java` `services/domains/model/Tls.java` has no `@JsonValue`, so Jackson writes
  the constant's name, `"tls": "ENFORCED"`; `HttpClient.java` sends `resend-java/4.20.0`).
- Node (`resend-node` `src/**/interfaces`): a field typed `name?: T` is absent or a T, never
  null; `name: T | null` may be null.
- Webhook email events carry `data.headers` (`[{name, value}]`) when the email set custom
  headers (the contract's 8.2, from Resend's OpenAPI document), over the API and SMTP.
"""

from __future__ import annotations

import json
import smtplib
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

import httpx
import pytest

from tests.dns_server import AuthoritativeDnsServer
from tests.e2e.conftest import LiveServer, publish_records, wait_until, write_config
from tests.peers import require_peer
from tests.ports import free_address
from tests.smtp_sink import running_smtp_sink, smtp_sink_binary
from tests.webhook_receiver import WebhookReceiver

GO_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "User-Agent": "resend-go/3.12.0",
}
JAVA_HEADERS = {
    "Accept": "application/json",
    "User-Agent": "resend-java/4.20.0",
    "Content-Type": "application/json; charset=utf-8",  # OkHttp's RequestBody.create
}
NODE_HEADERS = {"User-Agent": "resend-node:6.22.0", "Content-Type": "application/json"}


def go_json(value: Any) -> bytes:
    """What Go's `json.NewEncoder(buf).Encode(params)` writes (resend.go `NewRequest`)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    escaped = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (escaped + "\n").encode()


def compact_json(value: Any) -> bytes:
    """Jackson's `writeValueAsString` and Node's `JSON.stringify`: no spaces, no newline."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# --- declared types, as small checkers --------------------------------------------------------


@dataclass(frozen=True)
class Optional:
    """`name?: T`: absent or a T, never null."""

    kind: Any


@dataclass(frozen=True)
class Nullable:
    """`name: T | null`: always there, a T or null."""

    kind: Any


STR, BOOL, INT, LIST, DICT = str, bool, int, list, dict


def check_declared(body: dict[str, Any], declared: dict[str, Any], what: str) -> None:
    """`body` holds every required key of `declared` with its type, and an optional key only
    with a value (keys the type does not name are allowed: TypeScript's types are open)."""
    for key, kind in declared.items():
        if isinstance(kind, Optional):
            if key in body:
                assert isinstance(body[key], kind.kind), f"{what}.{key}: {body[key]!r}"
            continue
        assert key in body, f"{what}: no {key!r} in {body}"
        if isinstance(kind, Nullable):
            assert body[key] is None or isinstance(body[key], kind.kind), f"{what}.{key}"
        else:
            assert isinstance(body[key], kind), f"{what}.{key}: {body[key]!r}"


# resend-node src/domains/interfaces/domain.ts `Domain` + get-domain.interface.ts
NODE_GET_DOMAIN = {
    "object": STR, "id": STR, "name": STR, "status": STR, "created_at": STR, "region": STR,
    "capabilities": DICT, "open_tracking": Optional(BOOL), "click_tracking": Optional(BOOL),
    "tracking_subdomain": Optional(STR), "records": LIST,
}  # fmt: skip
# resend-node src/domains/interfaces/domain.ts `DomainSpfRecord`, `DomainDkimRecord`
NODE_DOMAIN_RECORD = {
    "record": STR, "name": STR, "value": STR, "type": STR, "ttl": STR, "status": STR,
    "routing_policy": Optional(STR), "priority": Optional(INT), "proxy_status": Optional(STR),
}  # fmt: skip
# resend-node src/topics/interfaces/topic.ts `Topic`
NODE_TOPIC = {
    "id": STR, "name": STR, "description": Optional(STR), "default_subscription": STR,
    "created_at": STR,
}  # fmt: skip
# resend-node src/contacts/topics/interfaces/list-contact-topics.interface.ts `ContactTopic`
NODE_CONTACT_TOPIC = {
    "id": STR, "name": STR, "description": Nullable(STR), "subscription": STR,
}  # fmt: skip
# resend-node src/emails/interfaces/get-email-options.interface.ts `GetEmailResponseSuccess`
NODE_GET_EMAIL = {
    "bcc": Nullable(LIST), "cc": Nullable(LIST), "created_at": STR, "from": STR,
    "html": Nullable(STR), "id": STR, "message_id": STR, "last_event": STR,
    "reply_to": Nullable(LIST), "subject": STR, "text": Nullable(STR), "tags": Optional(LIST),
    "to": LIST, "topic_id": Optional((str, type(None))), "scheduled_at": Nullable(STR),
    "object": STR,
}  # fmt: skip
# resend-node src/templates/interfaces/template.ts `Template` + get-template.interface.ts
NODE_GET_TEMPLATE = {
    "object": STR, "id": STR, "name": STR, "subject": Nullable(STR), "html": STR,
    "text": Nullable(STR), "status": STR, "variables": Nullable(LIST), "alias": Nullable(STR),
    "from": Nullable(STR), "reply_to": Nullable(LIST), "published_at": Nullable(STR),
    "created_at": STR, "updated_at": STR, "has_unpublished_versions": BOOL,
    "current_version_id": STR,
}  # fmt: skip
# resend-node src/webhooks/interfaces/webhook-event.interface.ts `ContactEventData`
NODE_CONTACT_EVENT = {
    "id": STR, "audience_id": STR, "segment_ids": LIST, "created_at": STR, "updated_at": STR,
    "email": STR, "first_name": Optional(STR), "last_name": Optional(STR), "unsubscribed": BOOL,
}  # fmt: skip
# resend-node src/webhooks/interfaces/webhook-event.interface.ts `BaseEmailEventData`; the
# `headers` item shape is the contract's (8.2), which Node's type does not name.
NODE_EMAIL_EVENT = {
    "broadcast_id": Optional(STR), "created_at": STR, "email_id": STR, "message_id": STR,
    "from": STR, "to": LIST, "subject": STR, "template_id": Optional(STR), "tags": Optional(DICT),
    "headers": Optional(LIST),
}  # fmt: skip


# --- the shared server ------------------------------------------------------------------------


@dataclass
class Parity:
    live: LiveServer
    hooks: WebhookReceiver
    dns: AuthoritativeDnsServer
    smtp: tuple[str, int]


@pytest.fixture(scope="module")
def parity(
    tmp_path_factory: pytest.TempPathFactory, knot: AuthoritativeDnsServer
) -> Iterator[Parity]:
    require_peer(smtp_sink_binary(), "Postfix's smtp-sink", "postfix")
    directory = tmp_path_factory.mktemp("sdk-wire-parity")
    hooks = WebhookReceiver()
    hooks.start()
    smtp_address = free_address()
    with running_smtp_sink() as (host, port):
        live = LiveServer(config_path=directory / "postwire.toml", data_dir=directory / "data")
        write_config(
            live.config_path,
            live.data_dir,
            nameservers=(knot.nameserver,),
            routes={"*": f"{host}:{port}"},
            allow_private_webhooks=True,
            starttls_listen=(smtp_address,),
        )
        live.start()
        smtp_host, smtp_port = smtp_address.rsplit(":", 1)
        try:
            yield Parity(live, hooks, knot, (smtp_host, int(smtp_port)))
        finally:
            if live.process is not None:
                live.stop()
            hooks.stop()


@dataclass
class Team:
    api: httpx.Client
    token: str
    domain: str


@contextmanager
def team_of(parity: Parity, name: str, *, domain: bool = True) -> Iterator[Team]:
    """A team of its own with an admin key, and with `domain`, its verified `<name>.test`."""
    token = parity.live.create_key("admin", new_team=name)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=parity.live.base_url, headers=headers) as api:
        domain_name = f"{name}.test"
        if domain:
            created = api.post("/domains", json={"name": domain_name}).json()
            publish_records(parity.dns, created)
            api.post(f"/domains/{created['id']}/verify")
            wait_until(
                lambda: api.get(f"/domains/{created['id']}").json()["status"] == "verified",
                f"{domain_name} verified",
            )
        yield Team(api, token, domain_name)


def hook_events(parity: Parity, api: httpx.Client, events: list[str]) -> str:
    """Register the receiver for `events`; the endpoint's URL path tells teams apart."""
    path = f"/hook/{time.monotonic_ns()}"
    endpoint = parity.hooks.url.replace("/hook", path)
    created = api.post("/webhooks", json={"endpoint": endpoint, "events": events})
    assert created.status_code == 201, created.text
    return path


def posted(parity: Parity, path: str, kind: str) -> dict[str, dict[str, Any]]:
    """The `data` of the `kind` events the receiver took at `path`, by email id (or id)."""
    bodies = [json.loads(p.body) for p in parity.hooks.posts() if p.path == path]
    return {
        b["data"].get("email_id", b["data"].get("id")): b["data"]
        for b in bodies
        if b["type"] == kind
    }


# --- item 1: Go's empty strings ---------------------------------------------------------------


def test_go_blank_subject_and_from_take_the_templates(parity: Parity) -> None:
    with team_of(parity, "go-blanks") as team:
        api = team.api
        # templates.go CreateTemplateRequest: name and html always, the rest omitempty.
        template = api.post(
            "/templates",
            content=go_json(
                {
                    "name": "Welcome",
                    "alias": "welcome",
                    "from": f"Shop <shop@{team.domain}>",
                    "subject": "Hello {{{NAME}}}",
                    "html": "<p>Hi {{{NAME}}} & co</p>",
                    "variables": [{"key": "NAME", "type": "string"}],
                }
            ),
            headers=GO_HEADERS,
        )
        assert template.status_code == 201, template.text
        template_id = template.json()["id"]
        assert api.post(f"/templates/{template_id}/publish", headers=GO_HEADERS).status_code == 200
        # emails.go SendEmailRequest: `from` and `subject` have no omitempty.
        go_send = {
            "from": "",
            "to": ["ann@example.org"],
            "subject": "",
            "template": {"id": "welcome", "variables": {"NAME": "Ann"}},
        }
        sent = api.post("/emails", content=go_json(go_send), headers=GO_HEADERS)
        assert sent.status_code == 200, sent.text
        batch = api.post(
            "/emails/batch",
            content=go_json([go_send, {**go_send, "to": ["bob@example.org"]}]),
            headers={**GO_HEADERS, "x-batch-validation": "strict"},
        )
        assert batch.status_code == 200, batch.text
        ids = [sent.json()["id"], *(item["id"] for item in batch.json()["data"])]
        for email_id in ids:
            email = api.get(f"/emails/{email_id}").json()
            check_declared(email, NODE_GET_EMAIL, "email")
            assert email["subject"] == "Hello Ann", email
            assert email["from"] == f"Shop <shop@{team.domain}>"
        # Without a template, "" is what it says: an empty `from` is a missing one.
        plain = {"from": "", "to": ["ann@example.org"], "subject": "", "text": "Hi"}
        refused = api.post("/emails", content=go_json(plain), headers=GO_HEADERS)
        assert refused.status_code == 422 and "`from`" in refused.json()["message"]

        # templates.go UpdateTemplateRequest: `name` and `html` go out as "" when unchanged.
        update = {"name": "", "subject": "Welcome, {{{NAME}}}", "html": ""}
        changed = api.patch(
            f"/templates/{template_id}", content=go_json(update), headers=GO_HEADERS
        )
        assert changed.status_code == 200, changed.text
        now = api.get(f"/templates/{template_id}").json()
        check_declared(now, NODE_GET_TEMPLATE, "template")
        assert (now["name"], now["subject"]) == ("Welcome", "Welcome, {{{NAME}}}")
        assert now["html"] == "<p>Hi {{{NAME}}} & co</p>"
        nothing = api.patch(
            f"/templates/{template_id}",
            content=go_json({"name": "", "html": ""}),
            headers=GO_HEADERS,
        )
        assert nothing.status_code == 422, nothing.text  # names nothing to change

        # broadcasts.go SendBroadcastRequest: `"scheduled_at": ""` means now.
        segment = api.post("/segments", content=go_json({"name": "All"}), headers=GO_HEADERS)
        broadcast = api.post(
            "/broadcasts",
            content=go_json(
                {
                    "segment_id": segment.json()["id"],
                    "from": f"shop@{team.domain}",
                    "subject": "News",
                    "html": "<p>News</p>",
                }
            ),
            headers=GO_HEADERS,
        ).json()
        started = api.post(
            f"/broadcasts/{broadcast['id']}/send",
            content=go_json({"broadcast_id": broadcast["id"], "scheduled_at": ""}),
            headers=GO_HEADERS,
        )
        assert started.status_code == 200, started.text
        status = api.get(f"/broadcasts/{broadcast['id']}").json()
        assert status["status"] != "scheduled" and status["scheduled_at"] is None, status


# --- item 2: Java's enum names ----------------------------------------------------------------


def test_java_enum_names_are_read_and_answered_in_the_contracts_case(parity: Parity) -> None:
    with team_of(parity, "java-enums", domain=False) as team:
        api = team.api
        # CreateDomainOptions.java takes the region as the caller writes it.
        domain = api.post(
            "/domains",
            content=compact_json({"name": "java-enums.test", "region": "EU-WEST-1"}),
            headers=JAVA_HEADERS,
        )
        assert domain.status_code == 201, domain.text
        assert domain.json()["region"] == "eu-west-1"
        domain_id = domain.json()["id"]
        # UpdateDomainOptions.java with Tls.ENFORCED (no @JsonValue): the constant's name.
        update = {"id": domain_id, "click_tracking": True, "tls": "ENFORCED"}
        changed = api.patch(
            f"/domains/{domain_id}", content=compact_json(update), headers=JAVA_HEADERS
        )
        assert changed.status_code == 200, changed.text
        assert api.get(f"/domains/{domain_id}").json()["click_tracking"] is True
        wrong = api.patch(
            f"/domains/{domain_id}", content=compact_json({"tls": "ENFORCE"}), headers=JAVA_HEADERS
        )
        assert wrong.status_code == 422, wrong.text  # any case, but still the contract's values

        # The same reading everywhere a body holds one of the contract's enums.
        key = api.post("/api-keys", json={"name": "sender", "permission": "Sending_Access"})
        assert key.status_code == 201, key.text
        listed = {k["name"]: k for k in api.get("/api-keys").json()["data"]}
        assert listed["sender"]["permission"] == "sending_access"
        topic = api.post(
            "/topics",
            json={"name": "News", "default_subscription": "OPT_IN", "visibility": "Public"},
        )
        assert topic.status_code == 201, topic.text
        got = api.get(f"/topics/{topic.json()['id']}").json()
        assert (got["default_subscription"], got["visibility"]) == ("opt_in", "public")
        hook = api.post("/webhooks", json={"endpoint": parity.hooks.url, "events": ["email.sent"]})
        hook_id = hook.json()["id"]
        assert api.patch(f"/webhooks/{hook_id}", json={"status": "DISABLED"}).status_code == 200
        assert api.get(f"/webhooks/{hook_id}").json()["status"] == "disabled"
        # Variable.java's VariableType has @JsonValue; a hand-written client may not.
        template = api.post(
            "/templates",
            json={
                "name": "T",
                "html": "<p>{{{N}}}</p>",
                "variables": [{"key": "N", "type": "STRING", "fallback_value": "x"}],
            },
        )
        assert template.status_code == 201, template.text
        variables = api.get(f"/templates/{template.json()['id']}").json()["variables"]
        assert [v["type"] for v in variables] == ["string"]


# --- item 3: Node's declared types ------------------------------------------------------------


def test_optional_fields_without_a_value_are_left_out(parity: Parity) -> None:
    with team_of(parity, "node-types", domain=False) as team:
        api = team.api
        path = hook_events(parity, api, ["contact.created"])
        created = api.post(
            "/domains", content=compact_json({"name": "node-types.test"}), headers=NODE_HEADERS
        )
        domain_id = created.json()["id"]
        for body in (created.json(), api.get(f"/domains/{domain_id}").json()):
            check_declared(body, NODE_GET_DOMAIN, "domain")
            assert "tracking_subdomain" not in body
            for record in body["records"]:
                check_declared(record, NODE_DOMAIN_RECORD, "record")
        # update-domain.interface.ts sends `tracking_subdomain` (from trackingSubdomain).
        api.patch(
            f"/domains/{domain_id}",
            content=compact_json({"tracking_subdomain": "links"}),
            headers=NODE_HEADERS,
        )
        tracked = api.get(f"/domains/{domain_id}").json()
        check_declared(tracked, NODE_GET_DOMAIN, "domain")
        assert tracked["tracking_subdomain"] == "links"

        topic_id = api.post(
            "/topics",
            content=compact_json({"name": "Plain", "default_subscription": "opt_in"}),
            headers=NODE_HEADERS,
        ).json()["id"]
        topic = api.get(f"/topics/{topic_id}").json()
        check_declared(topic, NODE_TOPIC, "topic")
        assert "description" not in topic
        for item in api.get("/topics").json()["data"]:
            check_declared(item, NODE_TOPIC, "topics item")

        contact = api.post(
            "/contacts", content=compact_json({"email": "ann@example.org"}), headers=NODE_HEADERS
        ).json()
        topics = api.get(f"/contacts/{contact['id']}/topics").json()["data"]
        for item in topics:  # declared `string | null` here: null stays
            check_declared(item, NODE_CONTACT_TOPIC, "contact topic")
        assert [item["description"] for item in topics] == [None]

        wait_until(lambda: contact["id"] in posted(parity, path, "contact.created"), "the hook")
        data = posted(parity, path, "contact.created")[contact["id"]]
        check_declared(data, NODE_CONTACT_EVENT, "contact.created data")
        assert "first_name" not in data and "last_name" not in data


def test_openapi_document_says_the_same(parity: Parity) -> None:
    schemas = httpx.get(f"{parity.live.base_url}/openapi.json").json()["components"]["schemas"]
    for name in ("DomainObject", "TopicObject", "TopicSummary"):
        required = schemas[name]["required"]
        assert "tracking_subdomain" not in required and "description" not in required, name
    assert schemas["DomainObject"]["properties"]["tracking_subdomain"] == {"type": "string"}
    assert schemas["TopicObject"]["properties"]["description"] == {"type": "string"}
    assert "description" in schemas["ContactTopicItem"]["required"]


# --- item 5: custom headers in webhook payloads -----------------------------------------------


def test_webhooks_carry_the_emails_custom_headers(parity: Parity) -> None:
    with team_of(parity, "hook-headers") as team:
        api = team.api
        path = hook_events(parity, api, ["email.sent"])
        shop = f"Shop <shop@{team.domain}>"
        custom = {"X-Entity-Ref-ID": "order-42", "List-Unsubscribe": "<mailto:u@example.org>"}
        # Node's `emails.send` body (create-email-options.interface.ts `headers`).
        one = api.post(
            "/emails",
            content=compact_json(
                {
                    "from": shop,
                    "to": "ann@example.org",
                    "subject": "One",
                    "text": "1",
                    "headers": custom,
                }
            ),
            headers=NODE_HEADERS,
        ).json()["id"]
        plain = api.post(
            "/emails",
            content=compact_json(
                {"from": shop, "to": "ann@example.org", "subject": "Plain", "text": "2"}
            ),
            headers=NODE_HEADERS,
        ).json()["id"]
        batch = api.post(
            "/emails/batch",
            content=go_json(
                [
                    {
                        "from": shop,
                        "to": ["bob@example.org"],
                        "subject": "Two",
                        "text": "3",
                        "headers": {"X-Campaign": "spring"},
                    }
                ]
            ),
            headers=GO_HEADERS,
        ).json()["data"][0]["id"]
        mail = EmailMessage()
        mail["From"] = shop
        mail["To"] = "cid@example.org"
        mail["Subject"] = "Three"
        mail["X-Mailgun-Tag"] = "welcome"
        mail["List-Id"] = "News <news.example.org>"
        mail["Resend-Idempotency-Key"] = "smtp-headers-1"  # Postwire's, never passed on
        mail["In-Reply-To"] = "<earlier@example.org>"  # RFC 5322's own
        mail.set_content("Over SMTP.")
        cert = parity.live.data_dir / "tls" / "smtp-cert.pem"
        wait_until(lambda: cert.exists(), "the SMTP certificate")
        with smtplib.SMTP(*parity.smtp, timeout=30) as client:
            client.starttls(context=ssl.create_default_context(cafile=str(cert)))
            client.login("postwire", team.token)
            reply = client.send_message(mail)
        assert reply == {}

        wait_until(lambda: len(posted(parity, path, "email.sent")) == 4, "every email.sent")
        events = posted(parity, path, "email.sent")
        for data in events.values():
            check_declared(data, NODE_EMAIL_EVENT, "email.sent data")
        assert events[one]["headers"] == [{"name": k, "value": v} for k, v in custom.items()]
        assert "headers" not in events[plain]
        assert events[batch]["headers"] == [{"name": "X-Campaign", "value": "spring"}]
        (smtp_id,) = set(events) - {one, plain, batch}
        assert events[smtp_id]["headers"] == [
            {"name": "X-Mailgun-Tag", "value": "welcome"},
            {"name": "List-Id", "value": "News <news.example.org>"},
        ]
