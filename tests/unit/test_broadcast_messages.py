"""A broadcast's content compiled once and made into each member's send request."""

from postwire.broadcasts.messages import compile_broadcast
from postwire.store.broadcasts import BroadcastRecord

HEADERS = [("List-Unsubscribe", "<https://x/u/t>"), ("List-Unsubscribe-Post", "x")]


def record(**changes: object) -> BroadcastRecord:
    fields: dict[str, object] = {
        "id": "b1", "team_id": "t1", "segment_id": "s1", "sender": "News <n@example.com>",
        "subject": "{{{FIRST_NAME|Hello}}}, news", "created_at": "2026",
        "html": "<html><body><p>Hi {{{FIRST_NAME|there}}} &amp; co</p></body></html>",
        "reply_to": ["help@example.com"], **changes,
    }  # fmt: skip
    return BroadcastRecord(**fields)  # type: ignore[arg-type]


def test_each_member_gets_its_own_values_and_headers() -> None:
    content = compile_broadcast(record(preview_text="Sale {{{FIRST_NAME}}}"))
    request = content.request_for("ann@example.org", {"FIRST_NAME": "<Ann>"}, HEADERS)
    assert request.to == ((None, "ann@example.org"),)
    assert request.sender == ("News", "n@example.com")
    assert request.reply_to == ((None, "help@example.com"),)
    assert request.subject == "<Ann>, news"  # plain in the subject
    assert request.html is not None
    assert "<p>Hi &lt;Ann&gt; &amp; co</p>" in request.html  # escaped in HTML
    assert ">Sale &lt;Ann&gt;</div><p>" in request.html  # the preview text, first in the body
    assert request.text == "Hi <Ann> & co"  # made from the HTML, then personalized
    assert request.headers == tuple(HEADERS)
    assert request.broadcast_id == "b1"
    assert content.sender_domain == "example.com"


def test_fallbacks_fill_in_and_line_breaks_never_reach_the_subject() -> None:
    content = compile_broadcast(record(text="Bye {{{FIRST_NAME|you}}}"))
    plain = content.request_for("b@example.org", {}, HEADERS)
    assert (plain.subject, plain.text) == ("Hello, news", "Bye you")
    broken = content.request_for("c@example.org", {"FIRST_NAME": "A\r\nBcc: x"}, HEADERS)
    assert broken.subject == "A  Bcc: x, news"


def test_a_text_only_broadcast_has_no_html() -> None:
    request = compile_broadcast(record(html=None, text="Hi")).request_for("a@b.org", {}, HEADERS)
    assert (request.html, request.text) == (None, "Hi")
