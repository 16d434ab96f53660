"""The hosted page as HTML: escaped, no script or inline style, forms that POST."""

from __future__ import annotations

import hashlib
from html.parser import HTMLParser

import pytest

from postwire.store.contacts import ContactRecord
from postwire.store.topics import TopicRecord
from postwire.unsubscribe.apply import Recipient, TopicChoice
from postwire.unsubscribe.changes import Standing
from postwire.unsubscribe.links import UnsubscribeTarget
from postwire.unsubscribe.page import (
    PAGE_HEADERS,
    STYLESHEET,
    STYLESHEET_NAME,
    STYLESHEET_URL,
    error_page,
    recipient_page,
)

STAMP = "2026-11-25 10:00:00.123000+00"
TOKEN = "A" * 78
CONTACT = ContactRecord("c1", "t1", "ann@example.com", None, None, False, STAMP, STAMP)
NEWS = TopicRecord("n1", "t1", "News <b>&</b>", "Monthly", "opt_in", "public", STAMP)
OFFERS = TopicRecord("o1", "t1", "Offers", None, "opt_out", "public", STAMP)


class Elements(HTMLParser):
    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def recipient(standing: Standing, topic: TopicRecord | None = None) -> Recipient:
    choices = [TopicChoice(NEWS, True), TopicChoice(OFFERS, False)]
    target = UnsubscribeTarget("t1", "c1", "b1")
    return Recipient(target, CONTACT, topic, "Acme <news@acme.example>", standing, choices)


def test_the_page_asks_to_confirm_with_a_form_post() -> None:
    page = Elements(recipient_page(recipient(Standing.SUBSCRIBED), TOKEN))
    forms = page.all("form")
    assert [(f["method"], f["action"]) for f in forms] == [
        ("post", f"/u/{TOKEN}"),
        ("post", f"/u/{TOKEN}/topics"),
    ]
    hidden = [i for i in page.all("input") if i["type"] == "hidden"]
    assert hidden == [{"type": "hidden", "name": "action", "value": "unsubscribe"}]
    boxes = [(i["value"], "checked" in i) for i in page.all("input") if i["type"] == "checkbox"]
    assert boxes == [("n1", True), ("o1", False)]
    assert "ann@example.com" in page.text
    assert "Unsubscribe to stop receiving emails from Acme." in page.text
    assert "News <b>&</b>" in page.text  # shown as text, never as markup
    assert page.all("b") == []


def test_no_script_and_no_inline_style() -> None:
    for html in (
        recipient_page(recipient(Standing.SUBSCRIBED), TOKEN, "Saved."),
        recipient_page(recipient(Standing.UNSUBSCRIBED), TOKEN),
        error_page("Bad", "Bad link"),
    ):
        page = Elements(html)
        assert page.all("script") == [] and page.all("style") == []
        assert all("style" not in attrs for _, attrs in page.tags)
        assert page.all("link") == [{"rel": "stylesheet", "href": STYLESHEET_URL}]
    assert "default-src 'none'" in PAGE_HEADERS["Content-Security-Policy"]
    digest = hashlib.sha256(STYLESHEET).hexdigest()[:16]
    assert f"unsubscribe.{digest}.css" == STYLESHEET_NAME


@pytest.mark.parametrize(
    ("standing", "topic", "says"),
    [
        (Standing.UNSUBSCRIBED, None, "You will not receive emails from Acme any more."),
        (Standing.UNSUBSCRIBED, NEWS, "You will not receive emails from Acme any more."),
        (
            Standing.OPTED_OUT,
            NEWS,
            "You will not receive “News <b>&</b>” emails from Acme any more.",
        ),
    ],
)
def test_after_unsubscribing_the_page_offers_to_subscribe_again(
    standing: Standing, topic: TopicRecord | None, says: str
) -> None:
    page = Elements(recipient_page(recipient(standing, topic), TOKEN, "You are unsubscribed."))
    assert says in page.text and "You are unsubscribed." in page.text
    hidden = [i for i in page.all("input") if i["type"] == "hidden"]
    assert hidden == [{"type": "hidden", "name": "action", "value": "resubscribe"}]
