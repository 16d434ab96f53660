"""The OpenAPI document covers exactly the routes the app serves, and says exactly what they
answer (tests/e2e/test_openapi_conformance.py holds a live server's answers to it)."""

from __future__ import annotations

import re
from pathlib import Path

from postwire import _core
from postwire.api.app import create_app
from postwire.api.context import ApiContext
from postwire.api.openapi import OPERATIONS, openapi_document
from postwire.config import load_config
from postwire.store.spool import TABLES, Spool

# The tracking routes are for recipients' mail clients, not API clients (docs/api.md).
UNDOCUMENTED = {
    "/openapi.json",
    "/health",
    "/static/<path:filename>",
    "/t/o/<token>",
    "/t/c/<token>",
    # The unsubscribe page, its one-click POST and its stylesheet: for recipients' browsers
    # and mailbox providers, not API clients.
    "/u/<token>",
    "/u/<token>/topics",
    "/u/assets/<name>",
    # Images uploaded for broadcasts, fetched by mail clients.
    "/images/<image_id>.<ext>",
    # Signed, expiring links handed out by the API: attachment downloads and shared emails.
    "/downloads/attachments/<token>",
    "/shared/<token>",
}


def test_every_route_is_documented_and_nothing_else(tmp_path: Path) -> None:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    app = create_app(ApiContext(config=config, spool=spool))
    served = {
        (method.lower(), re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule))
        for rule in app.url_map.iter_rules()
        if rule.rule not in UNDOCUMENTED
        for method in rule.methods or ()
        if method not in {"HEAD", "OPTIONS"}
    }
    documented = {(op.method, op.path) for op in OPERATIONS}
    assert served == documented
    spool.core.close()


def test_document_is_valid_enough_to_resolve_every_reference() -> None:
    document = openapi_document("http://127.0.0.1:3000")
    schemas = document["components"]["schemas"]
    text = repr(document)
    for name in re.findall(r"#/components/schemas/(\w+)", text):
        assert name in schemas
    assert document["paths"]["/emails"]["post"]["requestBody"]["required"] is True


def test_answers_are_exact_and_request_bodies_open() -> None:
    document = openapi_document("http://127.0.0.1:3000")
    schemas = document["components"]["schemas"]
    webhook = schemas["WebhookObject"]
    assert webhook["additionalProperties"] is False
    assert "disabled_reason" in webhook["properties"]
    assert "disabled_reason" not in webhook["required"]  # NotRequired, whatever Python 3.11 says
    assert "additionalProperties" not in schemas["SendEmailBody"]  # unknown fields are ignored
    # GET /domains items are summaries; a domain's records say `priority` on MX records only.
    listed = document["paths"]["/domains"]["get"]["responses"]["200"]["content"]
    items = listed["application/json"]["schema"]["allOf"][1]["properties"]["data"]["items"]
    assert items == {"$ref": "#/components/schemas/DomainSummary"}
    assert not {"object", "records"} & set(schemas["DomainSummary"]["properties"])
    assert {"object", "records"} <= set(schemas["DomainObject"]["required"])
    # Optional in the Node SDK's types, not nullable: there only when set.
    assert "tracking_subdomain" not in schemas["DomainObject"]["required"]
    assert schemas["DomainObject"]["properties"]["tracking_subdomain"] == {"type": "string"}
    assert "priority" in schemas["DomainMxRecord"]["required"]
    assert "priority" not in schemas["DomainTxtRecord"]["properties"]
    # An update names at least one thing to change.
    update = schemas["UpdateDomainBody"]
    assert update["required"] == []
    assert {"required": ["open_tracking"]} in update["anyOf"]
