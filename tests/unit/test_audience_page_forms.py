"""The Audience pages' pure parts: the Contacts page's query string as a filter, a contact's
form as the rules' bodies and memberships, and the refused rows' CSV download."""

from __future__ import annotations

from werkzeug.datastructures import MultiDict

from postwire.dashboard.pages.audience_contact_form import contact_body, with_memberships
from postwire.dashboard.pages.audience_contact_query import parse_contact_query
from postwire.dashboard.pages.contact_imports import errors_csv
from postwire.store.contact_imports import BadRow, ImportRecord
from postwire.store.contact_properties import ContactPropertyRecord
from postwire.store.contacts import ContactRecord
from postwire.store.segments import SegmentRecord
from postwire.store.topics import TopicRecord

STAMP = "2026-11-25 10:00:00.000000+00"
SEGMENTS = {s: SegmentRecord(s, "t", s, STAMP) for s in ("seg-a", "seg-b", "seg-c")}
NEWS = TopicRecord("news", "t", "News", None, "opt_in", "private", STAMP)
OFFERS = TopicRecord("offers", "t", "Offers", None, "opt_out", "private", STAMP)
PROPERTIES = {
    "plan": ContactPropertyRecord("p1", "t", "plan", "string", None, STAMP),
    "seats": ContactPropertyRecord("p2", "t", "seats", "number", None, STAMP),
}


def test_the_query_string_becomes_a_filter_and_unknown_names_are_said() -> None:
    query = parse_contact_query(
        {"q": " Ada ", "segment": "seg-b", "topic": "offers", "unsubscribed": "no",
         "property": "seats", "value": "3", "after": "ada@example.org"},
        SEGMENTS, {"news": NEWS, "offers": OFFERS}, PROPERTIES,
    )  # fmt: skip
    wanted = query.wanted
    assert (wanted.address, wanted.segment_id, wanted.topic_id) == ("Ada", "seg-b", "offers")
    assert (wanted.subscription, wanted.topic_default) == ("opt_in", "opt_out")
    assert (wanted.unsubscribed, wanted.property_key, wanted.property_value) == (
        False,
        "seats",
        "3",
    )
    assert query.after == "ada@example.org" and not query.errors
    assert query.link("x@y") == (
        "/contacts?q=Ada&segment=seg-b&topic=offers&subscription=opt_in&unsubscribed=no"
        "&property=seats&value=3&after=x%40y"
    )
    bad = parse_contact_query(
        {"segment": "elsewhere", "topic": "gone", "property": "age", "unsubscribed": "maybe",
         "subscription": "opt_out"},
        SEGMENTS, {}, PROPERTIES,
    )  # fmt: skip
    assert bad.errors == [
        "That segment does not exist.",
        "That topic does not exist.",
        "There is no contact property 'age'.",
    ]
    assert bad.wanted == type(bad.wanted)() and bad.link() == "/contacts"


def test_a_contacts_form_as_a_body_and_memberships() -> None:
    form = MultiDict(
        [("email", "ada@example.org"), ("first_name", " Ada "), ("last_name", ""),
         ("property.plan", " pro "), ("property.seats", "12.5"), ("segments", "seg-b"),
         ("segments", "elsewhere"), ("topic.news", "opt_in"), ("topic.offers", "opt_in")]
    )  # fmt: skip
    body = contact_body(form, PROPERTIES)
    assert body == {
        "email": "ada@example.org",
        "first_name": "Ada",
        "last_name": None,
        "unsubscribed": False,
        "properties": {"plan": "pro", "seats": 12.5},
    }
    assert contact_body(MultiDict([("property.seats", "many")]), PROPERTIES)["properties"] == {
        "seats": "many"  # left for the rule to refuse in its words
    }
    contact = ContactRecord(
        "c", "t", "ada@example.org", None, None, False, STAMP, STAMP,
        segment_ids=["seg-a", "hidden"], topics={},
    )  # fmt: skip
    changed = with_memberships(contact, form, SEGMENTS, [NEWS, OFFERS])
    # seg-a unticked, seg-b ticked, a segment the form did not show kept, another team's not
    assert changed.segment_ids == ["hidden", "seg-b"]
    # news is opted in by default: no choice recorded; offers is opted out by default
    assert changed.topics == {"offers": "opt_in"}


def test_refused_rows_download_is_safe_for_spreadsheets() -> None:
    record = ImportRecord("i", "t", "completed", STAMP, "skip", {"email": 0}, [], {}, 10,
                          failed=3)  # fmt: skip
    bad = [BadRow(2, "`=cmd` is not a valid address", "=cmd"), BadRow(5, "no email", None)]
    assert errors_csv(record, bad).splitlines() == [
        "row,email,reason",
        "2,'=cmd,`=cmd` is not a valid address",
        "5,,no email",
        ",,1 more row was refused; only the first 2 are kept",
    ]
