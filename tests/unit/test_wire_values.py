"""`wire_values.normalize_body`: the contract's enums in any case, blanks that mean "not given",
along the request types of the routes (tests/e2e/test_sdk_wire_parity.py sends the SDKs'
requests to a live server)."""

from __future__ import annotations

from postwire.api.wire_values import normalize_body, request_type_of


def test_enum_values_take_the_contracts_case_wherever_they_nest() -> None:
    domain, _ = request_type_of("POST", "/domains")
    body = {"name": "x.test", "region": "EU-West-1", "capabilities": {"receiving": "ENABLED"}}
    assert normalize_body(body, domain) == {
        "name": "x.test",
        "region": "eu-west-1",
        "capabilities": {"receiving": "enabled"},
    }
    # Not one of the values in any case: left for the handler to refuse; other strings untouched.
    assert normalize_body({"name": "X.TEST", "tls": "ENFORCE"}, domain) == {
        "name": "X.TEST",
        "tls": "ENFORCE",
    }
    topics, _ = request_type_of("PATCH", "/contacts/<id_or_address:contact_id_or_email>/topics")
    wrapped = {"topics": [{"id": "t", "subscription": "OPT_OUT"}]}
    assert normalize_body(wrapped, topics) == {"topics": [{"id": "t", "subscription": "opt_out"}]}
    # The bare array the Python and Rust SDKs send is read as the `topics` field.
    bare = [{"id": "t", "subscription": "Opt_In"}]
    assert normalize_body(bare, topics) == [{"id": "t", "subscription": "opt_in"}]


def test_blank_means_absent_only_where_declared() -> None:
    send, array = request_type_of("POST", "/emails")
    assert not array
    go = {"from": "", "to": ["a@x.test"], "subject": "", "template": {"id": "welcome"}}
    assert normalize_body(go, send) == {"to": ["a@x.test"], "template": {"id": "welcome"}}
    # Without a template nothing stands in for them: "" stays what the client said.
    plain = {"from": "", "to": ["a@x.test"], "subject": "", "text": ""}
    assert normalize_body(plain, send) == plain
    batch, array = request_type_of("POST", "/emails/batch")
    assert array and normalize_body([go, plain], batch, array=True) == [
        {"to": ["a@x.test"], "template": {"id": "welcome"}},
        plain,
    ]
    update, _ = request_type_of("PATCH", "/templates/<id_or_alias>")
    assert normalize_body({"name": "", "html": "", "text": ""}, update) == {"text": ""}


def test_values_without_rules_are_not_walked() -> None:
    send, _ = request_type_of("POST", "/emails")
    content = list(range(256)) * 1000  # an attachment as the Go SDK sends it, a byte array
    body = {"to": "a@x.test", "attachments": [{"content": content, "filename": "a.bin"}]}
    assert normalize_body(body, send)["attachments"][0]["content"] is content
    assert normalize_body({"any": "BODY"}, None) == {"any": "BODY"}
