"""A contact's form as the bodies the audience rules take: the same checks as the REST
API's, from the fields a browser posts (text for every value; an empty field clears it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from werkzeug.datastructures import MultiDict

from postwire.audiences.csv_rows import parse_number
from postwire.store.contact_properties import ContactPropertyRecord
from postwire.store.contacts import ContactRecord
from postwire.store.topics import SUBSCRIPTIONS, TopicRecord, subscription

PROPERTY_FIELD = "property."
TOPIC_FIELD = "topic."


def property_field_value(prop: ContactPropertyRecord, text: str) -> Any:
    """A property's value as typed: none when empty; a number for a number property (text that
    is no number is passed on, for the rule to refuse in its words)."""
    text = text.strip()
    if not text:
        return None
    if prop.type == "number":
        number = parse_number(text)
        return text if number is None else number
    return text


def contact_body(
    form: MultiDict[str, str], properties: Mapping[str, ContactPropertyRecord]
) -> dict[str, Any]:
    """The create or update body of the form: address, names, unsubscribed and the properties
    whose fields it holds."""
    values = {
        key: property_field_value(prop, form[PROPERTY_FIELD + key])
        for key, prop in properties.items()
        if PROPERTY_FIELD + key in form
    }
    return {
        "email": form.get("email", ""),
        "first_name": form.get("first_name", "").strip() or None,
        "last_name": form.get("last_name", "").strip() or None,
        "unsubscribed": "unsubscribed" in form,
        "properties": values,
    }


def chosen_segments(form: MultiDict[str, str], known: Iterable[str]) -> list[str]:
    """The team's segments ticked in the form (ids of no segment of the team are ignored)."""
    team = set(known)
    return [s for s in dict.fromkeys(form.getlist("segments")) if s in team]


def with_memberships(
    contact: ContactRecord,
    form: MultiDict[str, str],
    segments_shown: Iterable[str],
    topics: Iterable[TopicRecord],
) -> ContactRecord:
    """`contact` in the segments ticked among those the form showed (others it is in stay),
    and with the topic choices the form makes: a choice is kept only where it differs from
    what the contact gets now, so the topic's default keeps applying to the rest."""
    shown = list(segments_shown)
    ticked = chosen_segments(form, shown)
    kept = [s for s in contact.segment_ids if s in ticked or s not in shown]
    segment_ids = kept + [s for s in ticked if s not in kept]
    choices = dict(contact.topics)
    for topic in topics:
        value = form.get(TOPIC_FIELD + topic.id)
        if value in SUBSCRIPTIONS and value != subscription(contact, topic):
            choices[topic.id] = value
    return replace(contact, segment_ids=segment_ids, topics=choices)
