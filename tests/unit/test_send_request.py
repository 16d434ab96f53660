"""`parse_send_request`, `parse_batch_request` and `html_to_text`: the send body of the contract,
validated in Resend's order, with the contract's messages; then built into MIME."""

import email
import email.policy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from postwire import _core
from postwire.api.send_request import (
    BatchRequest,
    parse_batch_request,
    parse_batch_validation_header,
    parse_send_request,
    resolve_attachments,
)
from postwire.compose.addresses import ascii_domain, parse_mailbox
from postwire.compose.html_text import html_to_text
from postwire.compose.message import build_mime_message
from postwire.compose.request import SendRequest, Tag
from postwire.errors import ApiError

NOW = datetime(2026, 3, 6, 15, 0, tzinfo=UTC)
INVALID_TO = (
    "Invalid `to` field. The email address needs to follow the `email@example.com` or "
    "`Name <email@example.com>` format."
)
INVALID_FROM = INVALID_TO.replace("`to`", "`from`")


def minimal(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "from": "Acme <sender@example.com>",
        "to": "ann@example.org",
        "subject": "Hello",
        "html": "<p>Hi Ann</p>",
    }
    for key, value in changes.items():
        if value is ...:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def parse(body: object, **kwargs: Any) -> SendRequest:
    return parse_send_request(body, now=NOW, **kwargs)


def refusal(body: object, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(body, **kwargs)
    return caught.value


def refused_with(body: object) -> tuple[int, str, str]:
    error = refusal(body)
    return error.status, error.name, error.message


# --- a full request ------------------------------------------------------------------------


def test_a_full_request() -> None:
    body = {
        "from": '"Doe, John" <john@example.com>',
        "to": ["ann@example.org", "Bob Lee <bob@bücher.example>"],
        "cc": "carol@example.net",
        "bcc": ["<dave@example.net>"],
        "reply_to": ["support@example.com", "Help Desk <help@example.com>"],
        "subject": "Résumé — Q1",
        "html": "<p>Hello <a href='https://example.com/r'>report</a></p>",
        "text": "Hello, report at https://example.com/r",
        "headers": {"X-Entity-Ref-ID": "123", "List-Unsubscribe": "<https://example.com/u>"},
        "tags": [{"name": "category", "value": "confirm_email"}, {"name": "v-2"}],
        "scheduled_at": "in 1 hour",
        "react": None,  # unknown fields are ignored
        "topic_id": "t1",
    }
    request = parse(body)
    assert request.sender == ("Doe, John", "john@example.com")
    assert request.to == ((None, "ann@example.org"), ("Bob Lee", "bob@bücher.example"))
    assert request.cc == ((None, "carol@example.net"),)
    assert request.bcc == ((None, "dave@example.net"),)
    assert request.reply_to == (
        (None, "support@example.com"),
        ("Help Desk", "help@example.com"),
    )
    assert request.from_as_sent == '"Doe, John" <john@example.com>'
    assert request.to_as_sent == ("ann@example.org", "Bob Lee <bob@bücher.example>")
    assert request.cc_as_sent == ("carol@example.net",)
    assert request.bcc_as_sent == ("<dave@example.net>",)
    assert request.reply_to_as_sent == tuple(body["reply_to"])
    assert request.subject == "Résumé — Q1"
    assert request.text == body["text"]
    assert request.html == body["html"]
    assert request.headers == (
        ("X-Entity-Ref-ID", "123"),
        ("List-Unsubscribe", "<https://example.com/u>"),
    )
    assert request.tags == (Tag("category", "confirm_email"), Tag("v-2", ""))
    assert request.attachments == ()
    assert request.scheduled_at == NOW + timedelta(hours=1)


def test_the_result_builds_into_mime() -> None:
    request = parse(
        {
            "from": '"Doe, John" <john@example.com>',
            "to": ["Ann <ann@example.org>", "bob@bücher.example"],
            "bcc": "hidden@example.net",
            "replyTo": "help@example.com",
            "subject": "Résumé",
            "html": '<p>Hi</p><img src="cid:logo">',
            "headers": {"X-Entity-Ref-ID": "42"},
            "attachments": [
                {"content": "JVBERi0=", "filename": "report.pdf"},
                {"content": [137, 80, 78, 71], "filename": "logo.png", "content_id": "logo"},
            ],
        }
    )
    raw = build_mime_message(request, message_id="<m1@example.com>", date=1_700_000_000)
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert message["From"].addresses[0].display_name == "Doe, John"
    assert str(message["To"]) == "Ann <ann@example.org>, bob@xn--bcher-kva.example"
    assert message["Reply-To"] == "help@example.com"
    assert message["Bcc"] is None
    assert message["Subject"] == "Résumé"
    assert message["X-Entity-Ref-ID"] == "42"
    parts = {part.get_content_type(): part for part in message.walk()}
    assert parts["text/plain"].get_content().strip() == "Hi"
    assert parts["application/pdf"].get_content() == b"%PDF-"
    assert parts["image/png"]["Content-ID"] == "<logo>"


def test_build_needs_the_remote_attachments_fetched() -> None:
    request = parse(minimal(attachments=[{"path": "https://example.com/a.pdf"}]))
    with pytest.raises(ValueError, match="resolve_attachments"):
        build_mime_message(request)


async def test_resolving_without_remote_attachments_is_a_no_op() -> None:
    request = parse(minimal(attachments=[{"content": [1]}]))
    assert await resolve_attachments(request, allow_private=False) is request


def test_what_the_builder_still_refuses_becomes_a_422() -> None:
    # A word too long to fold into a header line: only the builder can tell.
    request = parse(minimal(headers={"X-Long": "x" * 3000}))
    with pytest.raises(ApiError) as caught:
        build_mime_message(request)
    assert (caught.value.status, caught.value.name) == (422, "validation_error")
    assert caught.value.message.startswith("The email cannot be built: ")


@pytest.mark.parametrize(
    "address",
    [
        "ann@\u037a.example",  # looks like a word, but IDNA 2008 refuses U+037A
        "ann@xn--zz.example",  # not a valid A-label
        "ann@xn--ab-.example",
        "ann@ä\u200d.example",  # a ZERO WIDTH JOINER out of its context (CONTEXTJ)
    ],
)
def test_an_invalid_idn_domain_is_refused_at_intake(address: str) -> None:
    assert refused_with(minimal(to=address)) == (422, "validation_error", INVALID_TO)


@pytest.mark.parametrize(
    ("address", "envelope"),
    [
        ("ann@exämple.org", "ann@xn--exmple-cua.org"),
        ("ann@EXÄMPLE.org", "ann@xn--exmple-cua.org"),  # UTS 46 maps case
        ("ann@ＥＸÄＭＰＬＥ.org", "ann@xn--exmple-cua.org"),  # and full-width forms
        ("jöse@bücher.example", "jöse@xn--bcher-kva.example"),  # the local part stays
        ("a@straße.de", "a@xn--strae-oqa.de"),  # not transitional: ß is kept, not "ss"
        ("a@例子.测试", "a@xn--fsqu00a.xn--0zwm56d"),
        ("Ann@Example.ORG", "Ann@Example.ORG"),  # ASCII as given
        ("a@xn--bcher-kva.example", "a@xn--bcher-kva.example"),
    ],
)
def test_ascii_domain_gives_the_a_label_the_header_shows(address: str, envelope: str) -> None:
    assert ascii_domain(address) == envelope
    # The envelope names the domain as the Rust builder writes it in To:.
    message = _core.build_message(sender=(None, "a@example.com"), to=[(None, address)])
    assert f"To: <{envelope}>".encode() in message


# --- validation order and required fields --------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ([], (422, "validation_error", "The request body must be a JSON object.")),
        ("hi", (422, "validation_error", "The request body must be a JSON object.")),
        ({}, (422, "missing_required_field", "Missing `to` field")),
        # `to` comes first: everything else is missing too
        ({"subject": "s"}, (422, "missing_required_field", "Missing `to` field")),
        (minimal(to=...), (422, "missing_required_field", "Missing `to` field")),
        (minimal(to=None), (422, "missing_required_field", "Missing `to` field")),
        (minimal(to=""), (422, "missing_required_field", "Missing `to` field")),
        (minimal(to=[]), (422, "missing_required_field", "Missing `to` field")),
        # then html/text, before subject and from
        (
            {"to": "a@example.com"},
            (422, "missing_required_field", "Missing `html` or `text` field"),
        ),
        (minimal(html=...), (422, "missing_required_field", "Missing `html` or `text` field")),
        (
            minimal(html="", text=""),
            (422, "missing_required_field", "Missing `html` or `text` field"),
        ),
        (
            {"to": "a@example.com", "text": "t"},
            (422, "missing_required_field", "Missing `subject` field"),
        ),
        (minimal(subject=None), (422, "missing_required_field", "Missing `subject` field")),
        (minimal(**{"from": ...}), (422, "missing_required_field", "Missing `from` field")),
        (minimal(**{"from": ""}), (422, "missing_required_field", "Missing `from` field")),
        # a bad `to` is reported before a missing subject or from
        (
            {"to": "not an address", "text": "t"},
            (422, "validation_error", INVALID_TO),
        ),
    ],
)
def test_required_fields_in_resends_order(body: object, expected: tuple[int, str, str]) -> None:
    assert refused_with(body) == expected


# --- types ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"to": 42}, "The `to` field must be a string or an array of strings."),
        ({"to": {"email": "a@b.com"}}, "The `to` field must be a string or an array of strings."),
        ({"to": ["a@example.com", 1]}, "The `to` field must be a string or an array of strings."),
        ({"cc": 1}, "The `cc` field must be a string or an array of strings."),
        ({"bcc": [None]}, "The `bcc` field must be a string or an array of strings."),
        ({"reply_to": True}, "The `reply_to` field must be a string or an array of strings."),
        ({"replyTo": 5}, "The `replyTo` field must be a string or an array of strings."),
        ({"html": 1}, "The `html` field must be a string."),
        ({"text": ["a"]}, "The `text` field must be a string."),
        ({"subject": 1}, "The `subject` field must be a string."),
        ({"from": ["a@example.com"]}, "The `from` field must be a string."),
        ({"headers": ["X-A: 1"]}, "The `headers` field must be an object of string values."),
        ({"headers": {"X-Count": 1}}, "The `headers` value of `X-Count` must be a string."),
        ({"headers": {"X-Flag": None}}, "The `headers` value of `X-Flag` must be a string."),
        ({"tags": {"name": "a"}}, "The `tags` field must be an array of `{name, value}` objects."),
        ({"tags": ["a"]}, "The `tags[0]` field must be a `{name, value}` object."),
        ({"scheduled_at": 1700000000}, "The `scheduled_at` field must be a string."),
        (
            {"attachments": "a.pdf"},
            "The `attachments` field must be an array of attachment objects.",
        ),
    ],
)
def test_wrong_json_types_name_the_field(changes: dict[str, Any], message: str) -> None:
    assert refused_with(minimal(**changes)) == (422, "validation_error", message)


# --- addresses -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "mailbox"),
    [
        ("a@example.com", (None, "a@example.com")),
        ("  a@example.com ", (None, "a@example.com")),
        ("A.B+tag@sub.example.co.uk", (None, "A.B+tag@sub.example.co.uk")),
        ("o'brien@example.ie", (None, "o'brien@example.ie")),
        ("Acme <sender@example.com>", ("Acme", "sender@example.com")),
        ("Acme<sender@example.com>", ("Acme", "sender@example.com")),
        ("<sender@example.com>", (None, "sender@example.com")),
        ("J. R. Smith <jr@example.com>", ("J. R. Smith", "jr@example.com")),
        ("Support (EU) <eu@example.com>", ("Support (EU)", "eu@example.com")),
        ("a@example.com <a@example.com>", ("a@example.com", "a@example.com")),
        ('"Last, First" <lf@example.com>', ("Last, First", "lf@example.com")),
        ('"Say \\"hi\\"" <hi@example.com>', ('Say "hi"', "hi@example.com")),
        ('"" <empty@example.com>', (None, "empty@example.com")),
        ("José Pérez <jose@example.com>", ("José Pérez", "jose@example.com")),
        ("山田 <taro@例え.jp>", ("山田", "taro@例え.jp")),
        ("jöse@bücher.example", (None, "jöse@bücher.example")),
        ("x@xn--bcher-kva.example", (None, "x@xn--bcher-kva.example")),
        ("José\u00a0Pérez <jose@example.com>", ("José\u00a0Pérez", "jose@example.com")),
        (
            "\u0645\u06cc\u200c\u0631\u0632\u0627 <m@example.ir>",
            ("\u0645\u06cc\u200c\u0631\u0632\u0627", "m@example.ir"),
        ),
    ],
)
def test_valid_mailboxes(value: str, mailbox: tuple[str | None, str]) -> None:
    assert parse_mailbox(value) == mailbox


@pytest.mark.parametrize(
    "value",
    [
        "",
        "plainaddress",
        "@example.com",
        "a@",
        "a@example",  # one label
        "a@example.123",
        "a@-example.com",
        "a@example-.com",
        "a@exa_mple.com",
        "a@example..com",
        ".a@example.com",
        "a.@example.com",
        "a..b@example.com",
        "a b@example.com",
        '"quoted"@example.com',
        "a@b@example.com",
        "a@example.com, b@example.com",  # two addresses in one string
        "a@example.com; b@example.com",
        "Doe, John <john@example.com>",  # unquoted comma: a list
        "Name <a@example.com> <b@example.com>",
        "Name <a@example.com",
        "Name a@example.com>",
        "<>",
        'Bad "quote <a@example.com>',
        '"unterminated <a@example.com>',
        '"A" B <a@example.com>',
        "Name < a@example.com>",
        "a@[192.0.2.1]",
        "x" * 65 + "@example.com",
        "a@" + "b" * 64 + ".com",
        "a@" + ("b" * 60 + ".") * 5 + "com",
        # header injection
        "a@example.com\r\nBcc: victim@example.com",
        "a@example.com\nBcc: victim@example.com",
        "Name\r\nBcc: victim@example.com <a@example.com>",
        '"Name\r\nBcc: v@example.com" <a@example.com>',
        "a@example.com\x00",
        "Name\x00 <a@example.com>",
        "Name\x1b <a@example.com>",
        "a\u2028b@example.com",
        "a\u00a0b@example.com",
        "\ud800 <a@example.com>",
        "a\ud800@example.com",
    ],
)
def test_invalid_mailboxes(value: str) -> None:
    assert parse_mailbox(value) is None


@pytest.mark.parametrize("field", ["to", "cc", "bcc", "reply_to", "replyTo"])
def test_an_invalid_address_is_refused_with_the_contracts_message(field: str) -> None:
    body = minimal(**{field: ["ok@example.com", "Eve\r\nBcc: victim@example.com <e@example.com>"]})
    assert refused_with(body) == (
        422,
        "validation_error",
        INVALID_TO.replace("`to`", f"`{field}`"),
    )


@pytest.mark.parametrize(
    "sender",
    ["sender@example.com\r\nBcc: v@example.com", "a@example.com, b@example.com", "Acme", "Acme <>"],
)
def test_an_invalid_sender(sender: str) -> None:
    assert refused_with(minimal(**{"from": sender})) == (422, "validation_error", INVALID_FROM)


# Recipients that would make Postwire talk SMTP to a host of its own network.
NOT_PUBLIC_RECIPIENTS = [
    "a@[127.0.0.1]",
    "a@[IPv6:::1]",
    "a@localhost",
    "a@host",
    "a@mail.localhost",
    "a@printer.local",
    "a@db.internal",
    "a@box.localdomain",
    "a@nas.home.arpa",
    "a@router.lan",
    "a@files.corp",
    "a@pc.home",
    "a@hidden.onion",
    "a@nowhere.invalid",
    "a@PRINTER.LOCAL",
]


@pytest.mark.parametrize("address", NOT_PUBLIC_RECIPIENTS)
@pytest.mark.parametrize("field", ["to", "cc", "bcc"])
def test_recipients_must_be_public_addresses(field: str, address: str) -> None:
    status, name, message = refused_with(minimal(**{field: ["ok@example.org", address]}))
    assert (status, name) == (422, "validation_error")
    assert message.startswith(f"Invalid `{field}` field")


@pytest.mark.parametrize("address", ["a@mail.example.org", "a@x.test", "a@localhost.example"])
def test_public_recipients_and_an_internal_reply_to_pass(address: str) -> None:
    request = parse(minimal(to=address, reply_to="desk@helpdesk.internal"))
    assert request.to == ((None, address),)


def test_a_sender_header_must_be_one_address() -> None:
    request = parse(minimal(headers={"Sender": "Desk <desk@example.com>"}))
    assert request.headers == (("Sender", "Desk <desk@example.com>"),)
    for value in ["nobody", "a@example.com, b@example.com", "<>"]:
        status, name, message = refused_with(minimal(headers={"sender": value}))
        assert (status, name) == (422, "validation_error")
        assert message.startswith("The `sender` header must be one email address")


@pytest.mark.parametrize("field", ["to", "cc", "bcc", "reply_to"])
def test_at_most_50_addresses(field: str) -> None:
    addresses = [f"user{i}@example.com" for i in range(51)]
    assert len(parse(minimal(**{field: addresses[:50]})).to_as_sent) >= 1
    assert refused_with(minimal(**{field: addresses})) == (
        422,
        "validation_error",
        f"The `{field}` field can have at most 50 email addresses.",
    )


def test_reply_to_wins_over_the_camel_case_alias() -> None:
    request = parse(minimal(reply_to="a@example.com", replyTo="b@example.com"))
    assert request.reply_to_as_sent == ("a@example.com",)
    request = parse(minimal(reply_to=None, replyTo=["b@example.com"]))
    assert request.reply_to == ((None, "b@example.com"),)


# --- subject, html, text -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "message"),
    [
        (
            "Hi\r\nBcc: victim@example.com",
            "The `subject` field must not contain line breaks or NUL characters.",
        ),
        ("Hi\nthere", "The `subject` field must not contain line breaks or NUL characters."),
        ("Hi\x00", "The `subject` field must not contain line breaks or NUL characters."),
        ("Hi\x07", "The `subject` field must not contain control characters."),
        ("Hi\x7f", "The `subject` field must not contain control characters."),
        ("Hi\x85", "The `subject` field must not contain control characters."),
    ],
)
def test_subject_injection_is_refused(subject: str, message: str) -> None:
    assert refused_with(minimal(subject=subject)) == (422, "validation_error", message)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"subject": "\ud83d"}, "The `subject` field must be valid Unicode text."),
        ({"html": "<p>\udc00</p>"}, "The `html` field must be valid Unicode text."),
        ({"text": "\ud800"}, "The `text` field must be valid Unicode text."),
        (
            {"headers": {"X-A": "\ud800"}},
            "The `headers` value of `X-A` must be valid Unicode text.",
        ),
        ({"from": "\ud800 <a@example.com>"}, INVALID_FROM),
    ],
)
def test_unpaired_surrogates_are_refused(changes: dict[str, Any], message: str) -> None:
    # Valid JSON (`"\\ud800"`), but no UTF-8 encoder takes it: a 422, not a 500 in the builder.
    assert refused_with(minimal(**changes)) == (422, "validation_error", message)


def test_subject_may_be_empty_or_hold_a_tab() -> None:
    assert parse(minimal(subject="")).subject == ""
    assert parse(minimal(subject="a\tb")).subject == "a\tb"


def test_text_is_generated_from_html_unless_given_or_turned_off() -> None:
    assert parse(minimal(html="<p>Hi <b>Ann</b></p>")).text == "Hi Ann"
    assert parse(minimal(text="Own text")).text == "Own text"
    turned_off = parse(minimal(text=""))
    assert (turned_off.text, turned_off.html) == (None, "<p>Hi Ann</p>")
    text_only = parse(minimal(html=..., text="Only text"))
    assert (text_only.text, text_only.html) == ("Only text", None)
    assert parse(minimal(html='<img src="x.png">')).text is None  # nothing to read


@pytest.mark.parametrize("field", ["html", "text"])
def test_nul_in_bodies_is_refused(field: str) -> None:
    assert refused_with(minimal(**{field: "a\x00b"})) == (
        422,
        "validation_error",
        f"The `{field}` field must not contain NUL characters.",
    )


# --- headers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        (
            {"X-Evil": "1\r\nBcc: victim@example.com"},
            "The `headers` value of `X-Evil` must not contain line breaks or NUL characters.",
        ),
        (
            {"X-Evil": "1\nBcc: victim@example.com"},
            "The `headers` value of `X-Evil` must not contain line breaks or NUL characters.",
        ),
        (
            {"X-Evil": "a\x00"},
            "The `headers` value of `X-Evil` must not contain line breaks or NUL characters.",
        ),
        (
            {"X-Bell": "a\x07"},
            "The `headers` value of `X-Bell` must not contain control characters.",
        ),
        (
            {"X-Evil\r\nBcc": "v@example.com"},
            "The `headers` field has an invalid header name: names are printable ASCII without "
            "spaces or colons.",
        ),
        (
            {"X Space": "1"},
            "The `headers` field has an invalid header name: names are printable ASCII without "
            "spaces or colons.",
        ),
        (
            {"X-Colon:": "1"},
            "The `headers` field has an invalid header name: names are printable ASCII without "
            "spaces or colons.",
        ),
        (
            {"": "1"},
            "The `headers` field has an invalid header name: names are printable ASCII without "
            "spaces or colons.",
        ),
        (
            {"X-Ünicode": "1"},
            "The `headers` field has an invalid header name: names are printable ASCII without "
            "spaces or colons.",
        ),
        (
            {"Bcc": "v@example.com"},
            "The `Bcc` header cannot be set in `headers`; use the `bcc` field.",
        ),
        (
            {"from": "x@example.com"},
            "The `from` header cannot be set in `headers`; use the `from` field.",
        ),
        (
            {"Reply-To": "x@example.com"},
            "The `Reply-To` header cannot be set in `headers`; use the `reply_to` field.",
        ),
        (
            {"Content-Type": "text/html"},
            "The `Content-Type` header is written by Postwire and cannot be set in `headers`.",
        ),
        (
            {"MESSAGE-ID": "<a@b>"},
            "The `MESSAGE-ID` header is written by Postwire and cannot be set in `headers`.",
        ),
    ],
)  # fmt: skip
def test_refused_headers(headers: dict[str, Any], message: str) -> None:
    assert refused_with(minimal(headers=headers)) == (422, "validation_error", message)


def test_headers_keep_their_order_and_may_be_empty_or_folded_with_tabs() -> None:
    headers = {"X-B": "2", "X-A": "", "List-Unsubscribe": "<mailto:u@example.com>,\t<https://u>"}
    assert parse(minimal(headers=headers)).headers == tuple(headers.items())
    assert parse(minimal(headers=None)).headers == ()


# --- tags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        (
            [{"value": "x"}],
            "The `tags[0].name` field must be 1 to 256 ASCII letters, numbers, underscores or "
            "dashes.",
        ),
        (
            [{"name": "ok"}, {"name": ""}],
            "The `tags[1].name` field must be 1 to 256 ASCII letters, numbers, underscores or "
            "dashes.",
        ),
        (
            [{"name": "has space"}],
            "The `tags[0].name` field must be 1 to 256 ASCII letters, numbers, underscores or "
            "dashes.",
        ),
        (
            [{"name": "n" * 257}],
            "The `tags[0].name` field must be 1 to 256 ASCII letters, numbers, underscores or "
            "dashes.",
        ),
        (
            [{"name": "ünï"}],
            "The `tags[0].name` field must be 1 to 256 ASCII letters, numbers, underscores or "
            "dashes.",
        ),
        (
            [{"name": 5}],
            "The `tags[0].name` field must be 1 to 256 ASCII letters, numbers, underscores or "
            "dashes.",
        ),
        (
            [{"name": "a", "value": "x.y"}],
            "The `tags[0].value` field must be at most 256 ASCII letters, numbers, underscores "
            "or dashes.",
        ),
        (
            [{"name": "a", "value": "v" * 257}],
            "The `tags[0].value` field must be at most 256 ASCII letters, numbers, underscores "
            "or dashes.",
        ),
        (
            [{"name": "a", "value": 1}],
            "The `tags[0].value` field must be at most 256 ASCII letters, numbers, underscores "
            "or dashes.",
        ),
        (
            [{"name": "a\r\nBcc: v@example.com", "value": "x"}],
            "The `tags[0].name` field must be 1 to 256 ASCII letters, numbers, underscores or "
            "dashes.",
        ),
    ],
)
def test_refused_tags(tags: object, message: str) -> None:
    assert refused_with(minimal(tags=tags)) == (422, "validation_error", message)


def test_tags_at_the_length_limit() -> None:
    tags = [{"name": "N" * 256, "value": "v_-9" * 64}]
    assert parse(minimal(tags=tags)).tags == (Tag("N" * 256, "v_-9" * 64),)


# --- scheduled_at --------------------------------------------------------------------------


def test_scheduled_at_is_parsed_against_now() -> None:
    assert parse(minimal(scheduled_at="2026-03-07T10:00:00Z")).scheduled_at == datetime(
        2026, 3, 7, 10, tzinfo=UTC
    )
    assert parse(minimal(scheduled_at=None)).scheduled_at is None
    error = refusal(minimal(scheduled_at="in 40 days"))
    assert (error.status, error.message) == (
        422,
        "The `scheduled_at` date must be within the next 30 days.",
    )


# --- batch ---------------------------------------------------------------------------------


def test_a_strict_batch() -> None:
    items = [minimal(to=f"user{i}@example.com", scheduled_at="in 1 hour") for i in range(3)]
    batch = parse_batch_request(items, now=NOW, mode="strict")
    assert isinstance(batch, BatchRequest)
    assert [index for index, _ in batch.valid] == [0, 1, 2]
    assert batch.errors == []
    assert [r.to_as_sent for _, r in batch.valid] == [(f"user{i}@example.com",) for i in range(3)]
    assert all(r.scheduled_at == NOW + timedelta(hours=1) for _, r in batch.valid)


def test_strict_mode_raises_the_first_invalid_email_with_its_index() -> None:
    items = [minimal(), minimal(to=...), minimal(subject=...)]
    with pytest.raises(ApiError) as caught:
        parse_batch_request(items, now=NOW, mode="strict")
    assert (caught.value.status, caught.value.name, caught.value.message) == (
        422,
        "missing_required_field",
        "Email at index 1: Missing `to` field",
    )


def test_permissive_mode_keeps_valid_emails_and_returns_errors_by_index() -> None:
    items = [minimal(), "not an object", minimal(to="bad"), minimal(to="ok@example.com")]
    batch = parse_batch_request(items, now=NOW, mode="permissive")
    assert [index for index, _ in batch.valid] == [0, 3]
    assert [(index, error.message) for index, error in batch.errors] == [
        (1, "Each email must be a JSON object."),
        (2, INVALID_TO),
    ]
    assert [index for index, _ in batch.entries] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"emails": []}, "The `request.body` field must be an `array`."),
        (minimal(), "The `request.body` field must be an `array`."),
        ([], "The batch must contain between 1 and 100 emails, not 0."),
        ([minimal()] * 101, "The batch must contain between 1 and 100 emails, not 101."),
    ],
)
@pytest.mark.parametrize("mode", ["strict", "permissive"])
def test_batch_shape_errors_refuse_the_whole_request(body: object, message: str, mode: Any) -> None:
    with pytest.raises(ApiError) as caught:
        parse_batch_request(body, now=NOW, mode=mode)
    assert (caught.value.status, caught.value.name, caught.value.message) == (
        422,
        "validation_error",
        message,
    )


def test_a_batch_of_100() -> None:
    assert len(parse_batch_request([minimal()] * 100, now=NOW, mode="strict").entries) == 100


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (None, "strict"),
        ("", "strict"),
        ("strict", "strict"),
        ("permissive", "permissive"),
        (" Permissive ", "permissive"),
        ("STRICT", "strict"),
    ],
)
def test_batch_validation_header(value: str | None, mode: str) -> None:
    assert parse_batch_validation_header(value) == mode


def test_an_unknown_batch_validation_mode() -> None:
    with pytest.raises(ApiError) as caught:
        parse_batch_validation_header("lenient")
    assert (caught.value.status, caught.value.message) == (
        422,
        "The `x-batch-validation` header must be `strict` or `permissive`.",
    )


# --- html to text --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("<p>Hello <b>Ann</b>,</p><p>Bye</p>", "Hello Ann,\n\nBye"),
        ("line 1<br>line 2<br/>line 3", "line 1\nline 2\nline 3"),
        ("a<br><br>b", "a\n\nb"),
        ("<ul><li>One</li><li>Two</li></ul><p>After</p>", "- One\n- Two\n\nAfter"),
        ("<ol>\n  <li>One</li>\n  <li>Two</li>\n</ol>", "- One\n- Two"),
        ("<div>a</div><div>b</div>", "a\nb"),
        ("<div><div><p>nested</p></div></div>tail", "nested\n\ntail"),
        ("<h1>Title</h1>Body", "Title\n\nBody"),
        ('See <a href="https://example.com/r?a=1&amp;b=2">the report</a>.',
         "See the report (https://example.com/r?a=1&b=2)."),
        ('<a href="https://example.com">https://example.com</a>', "https://example.com"),
        ('<a href="mailto:a@example.com">a@example.com</a>', "a@example.com"),
        ('<a href="mailto:a@example.com">Write us</a>', "Write us (mailto:a@example.com)"),
        ('<a href="https://example.com/x"><img src="logo.png"></a>', "https://example.com/x"),
        ('<a href="#top">Top</a> <a href="javascript:alert(1)">x</a>', "Top x"),
        ("<html><head><title>T</title><style>p {color: red}</style></head>"
         "<body><p>Visible</p><script>var x = '<p>no</p>';</script></body></html>", "Visible"),
        ("<head><title>unclosed head<body>shown", "shown"),
        ("<noscript>Enable JS</noscript><template><p>t</p></template>ok", "ok"),
        ("  lots   of\n\n  space\t here  ", "lots of space here"),
        ("a&nbsp;&amp;&lt;b&gt; &#8364; &eacute;", "a &<b> € é"),
        ("<pre>  indented\n    code</pre>after", "  indented\n    code\n\nafter"),
        ("<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>",
         "a b\nc d"),
        ("<p>unclosed <b>bold", "unclosed bold"),
        ("<p>broken <a href='https://x.example'>link", "broken link"),
        ("x < y and y > z", "x < y and y > z"),
        ("", ""),
        ("<img src=a.png>", ""),
    ],
)  # fmt: skip
def test_html_to_text(html: str, text: str) -> None:
    assert html_to_text(html) == text


def test_html_to_text_handles_deep_nesting() -> None:
    assert html_to_text("<div>" * 5000 + "deep" + "</div>" * 5000) == "deep"


def test_attachment_objects_are_core_attachments() -> None:
    (attachment,) = parse(
        minimal(attachments=[{"content": "aGk=", "filename": "hi.txt"}])
    ).attachments
    assert isinstance(attachment, _core.Attachment)
    assert attachment.content == b"hi"
