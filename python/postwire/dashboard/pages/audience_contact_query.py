"""The Contacts page's query string: what it searches and filters by, where it continues,
and the links that keep the filters while paging. A value that names nothing of the team's
(a segment, topic or property) is left out of the filter and said in plain words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlencode

from postwire.audiences.contact_search import ContactFilter
from postwire.store.contact_properties import ContactPropertyRecord
from postwire.store.segments import SegmentRecord
from postwire.store.topics import TopicRecord

FIELDS: Final = ("q", "name", "segment", "topic", "subscription", "unsubscribed", "property",
                 "value")  # fmt: skip
_MAX_TEXT: Final = 320  # an address's length
UNSUBSCRIBED_CHOICES: Final = {"yes": True, "no": False}


@dataclass(frozen=True, slots=True)
class ContactQuery:
    wanted: ContactFilter
    after: str | None = None
    form: dict[str, str] = field(default_factory=dict)  # the filters as given, to show again
    errors: list[str] = field(default_factory=list)

    @property
    def filtered(self) -> bool:
        return any(self.form.values())

    def link(self, after: str | None = None) -> str:
        """The Contacts page with these filters, continued after `after`."""
        params = {k: v for k, v in self.form.items() if v}
        if after is not None:
            params["after"] = after
        return "/contacts" + ("?" + urlencode(params) if params else "")


def parse_contact_query(
    args: Mapping[str, str],
    segments: Mapping[str, SegmentRecord],
    topics: Mapping[str, TopicRecord],
    properties: Mapping[str, ContactPropertyRecord],
) -> ContactQuery:
    """The filter of the page's query string against the team's segments, topics (by id) and
    contact properties (by key)."""
    form = {name: args.get(name, "").strip()[:_MAX_TEXT] for name in FIELDS}
    errors: list[str] = []
    segment_id = form["segment"] or None
    if segment_id is not None and segment_id not in segments:
        errors.append("That segment does not exist.")
        segment_id = None
        form["segment"] = ""
    topic = topics.get(form["topic"]) if form["topic"] else None
    if form["topic"] and topic is None:
        errors.append("That topic does not exist.")
        form["topic"] = ""
    subscription = form["subscription"] if form["subscription"] in ("opt_in", "opt_out") else ""
    if topic is not None and not subscription:
        subscription = "opt_in"
    form["subscription"] = subscription if topic is not None else ""
    key = form["property"] or None
    if key is not None and key not in properties:
        errors.append(f"There is no contact property {key!r}.")
        key = None
        form["property"] = form["value"] = ""
    unsubscribed = UNSUBSCRIBED_CHOICES.get(form["unsubscribed"])
    if unsubscribed is None:
        form["unsubscribed"] = ""
    wanted = ContactFilter(
        address=form["q"],
        name=form["name"],
        segment_id=segment_id,
        topic_id=None if topic is None else topic.id,
        topic_default="opt_in" if topic is None else topic.default_subscription,
        subscription=form["subscription"] or None,
        unsubscribed=unsubscribed,
        property_key=key,
        property_value=form["value"],
    )
    after = args.get("after")
    if after is not None and not (0 < len(after) <= _MAX_TEXT):
        after = None
    return ContactQuery(wanted, after, form, errors)
