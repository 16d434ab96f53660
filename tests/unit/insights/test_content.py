"""Content checks of crafted emails: each finding from the email that should raise it, and
none from a clean one."""

from __future__ import annotations

import base64
from collections.abc import Sequence

from postwire.insights.catalogue import Finding
from postwire.insights.content import (
    GMAIL_CLIP_BYTES,
    ContentFacts,
    content_findings,
    organizational_domain,
    untracked_link,
)

PUBLIC_URL = "https://postwire.example.com"
CLEAN_HTML = (
    "<html><head><style>p { color: red }</style></head><body>"
    "<h1>Our autumn news</h1><p>Hello there, here is what changed in the shop this month: "
    "new opening hours, a bigger garden section and a workshop about pruning fruit trees.</p>"
    '<p><a href="https://www.example.com/news">Read the news</a></p>'
    '<img src="https://www.example.com/logo.png" alt="Example logo">'
    "</body></html>"
)
CLEAN_TEXT = (
    "Our autumn news\n\nHello there, here is what changed in the shop this month: new opening "
    "hours, a bigger garden section and a workshop about pruning fruit trees.\n\nRead the news "
    "(https://www.example.com/news)"
)
ONE_CLICK_HEADERS = [
    ("List-Unsubscribe", "<https://postwire.example.com/u/abc>"),
    ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
]


def facts(
    html: str | None = CLEAN_HTML,
    text: str | None = CLEAN_TEXT,
    *,
    public_url: str = PUBLIC_URL,
    tracked: bool = False,
    bulk: bool = False,
    headers: Sequence[tuple[str, str]] | None = (),
) -> ContentFacts:
    return ContentFacts(html, text, "example.com", public_url, tracked, bulk, headers)


def codes(found: list[Finding]) -> set[str]:
    return {f.code for f in found}


def only(found: list[Finding], code: str) -> Finding:
    (match,) = [f for f in found if f.code == code]
    return match


def test_a_clean_email_has_only_its_passing_checks() -> None:
    assert codes(content_findings(facts())) == {"text_part_matches"}


def test_missing_text_part() -> None:
    assert "text_part_missing" in codes(content_findings(facts(text=None)))
    assert "text_part_missing" in codes(content_findings(facts(text="  \n")))


def test_text_part_that_says_something_else() -> None:
    found = content_findings(facts(text="Win a free cruise now, click below, limited offer!"))
    finding = only(found, "text_part_differs")
    assert int(finding.values["percent"]) < 50
    assert "shares only" in finding.insight().message


def test_a_text_only_email_has_no_part_findings() -> None:
    assert codes(content_findings(facts(html=None, text="Just text."))) == set()


def test_shortener_link() -> None:
    html = CLEAN_HTML.replace("https://www.example.com/news", "https://bit.ly/3xYz")
    finding = only(content_findings(facts(html)), "shortener_link")
    assert finding.values["domains"] == "bit.ly"


def test_link_to_another_domain_than_from() -> None:
    html = CLEAN_HTML + '<a href="https://shop.other-brand.test/deal">deal</a>'
    finding = only(content_findings(facts(html)), "link_domain_unaligned")
    assert finding.values["domains"] == "other-brand.test"
    # Subdomains of the From domain and the tracking host are the sender's own.
    html = (
        CLEAN_HTML
        + '<a href="https://a.b.example.com/x">x</a><a href="https://postwire.example.com/y">y</a>'
    )
    assert "link_domain_unaligned" not in codes(content_findings(facts(html)))
    # A link to an address names the address, not its last two numbers.
    html = CLEAN_HTML + '<a href="https://203.0.113.5/deal">deal</a>'
    finding = only(content_findings(facts(html)), "link_domain_unaligned")
    assert finding.values["domains"] == "203.0.113.5"


def test_http_link() -> None:
    html = CLEAN_HTML.replace("https://www.example.com/news", "http://www.example.com/news")
    finding = only(content_findings(facts(html)), "http_link")
    assert finding.values == {"count": "1", "examples": "http://www.example.com/news"}


def test_html_over_gmails_clipping_size() -> None:
    html = CLEAN_HTML.replace("</body>", "<!--" + "x" * GMAIL_CLIP_BYTES + "--></body>")
    finding = only(content_findings(facts(html)), "html_clipped")
    assert float(finding.values["size_kb"]) > 102


def test_image_without_alt_and_decorative_ones() -> None:
    html = (
        CLEAN_HTML
        + '<img src="https://www.example.com/img/hero.jpg"><img src="/spacer.gif" alt="">'
    )
    finding = only(content_findings(facts(html)), "image_missing_alt")
    assert finding.values == {"count": "1", "examples": "hero.jpg"}


def test_an_email_of_images() -> None:
    html = (
        '<a href="https://www.example.com/"><img src="https://www.example.com/offer.png" '
        'alt="Offer"></a><p>Buy now</p>'
    )
    finding = only(content_findings(facts(html, "Buy now")), "image_heavy")
    assert finding.values == {"images": "1", "words": "2"}


def test_tracking_pixel_is_not_content() -> None:
    pixel = f'<img src="{PUBLIC_URL}/t/o/abc" width="1" height="1" alt="">'
    assert codes(content_findings(facts(CLEAN_HTML + pixel))) == {"text_part_matches"}


def test_tracked_links_are_judged_by_their_destination() -> None:
    link = "https://bit.ly/abc"
    token = base64.urlsafe_b64encode(b"T" * 32 + link.encode() + b"G" * 16).rstrip(b"=").decode()
    tracked = f"{PUBLIC_URL}/t/c/{token}"
    assert untracked_link(tracked, PUBLIC_URL) == link
    html = CLEAN_HTML.replace("https://www.example.com/news", tracked)
    assert "shortener_link" in codes(content_findings(facts(html)))


def test_bulk_mail_without_list_unsubscribe() -> None:
    assert "list_unsubscribe_missing" in codes(content_findings(facts(bulk=True)))
    marked = [("Precedence", "bulk")]
    assert "list_unsubscribe_missing" in codes(content_findings(facts(headers=marked)))
    # One-to-one mail needs none; unknown headers (the message is gone) are not judged.
    assert "list_unsubscribe_missing" not in codes(content_findings(facts()))
    assert "list_unsubscribe_missing" not in codes(content_findings(facts(bulk=True, headers=None)))


def test_list_unsubscribe_one_click() -> None:
    found = content_findings(facts(bulk=True, headers=ONE_CLICK_HEADERS))
    assert "list_unsubscribe_ok" in codes(found)


def test_broken_list_unsubscribe() -> None:
    cases = {
        "its URL is http://, not https://": [
            ("List-Unsubscribe", "<http://127.0.0.1:3000/u/abc>"),
            ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ],
        "it has no https URL": [("List-Unsubscribe", "<mailto:unsub@example.com>")],
        "List-Unsubscribe-Post: List-Unsubscribe=One-Click is missing": ONE_CLICK_HEADERS[:1],
        "its URL points to 10.0.0.5, which recipients cannot reach": [
            ("List-Unsubscribe", "<https://10.0.0.5/u/abc>"),
            ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ],
    }
    for problem, headers in cases.items():
        finding = only(
            content_findings(facts(bulk=True, headers=headers)), "list_unsubscribe_broken"
        )
        assert finding.values["problem"] == problem


def test_tracking_served_from_loopback_or_an_ip() -> None:
    loopback = content_findings(facts(public_url="http://127.0.0.1:3000", tracked=True))
    assert only(loopback, "tracking_unreachable").values["host"] == "127.0.0.1"
    on_ip = content_findings(facts(public_url="https://93.184.216.34", tracked=True))
    assert only(on_ip, "tracking_on_ip").values["host"] == "93.184.216.34"
    untracked = content_findings(facts(public_url="http://127.0.0.1:3000", tracked=False))
    assert "tracking_unreachable" not in codes(untracked)


def test_organizational_domain() -> None:
    assert organizational_domain("www.news.example.com") == "example.com"
    assert organizational_domain("shop.example.co.uk") == "example.co.uk"
    assert organizational_domain("203.0.113.5") == "203.0.113.5"
    assert organizational_domain("example.com") == "example.com"


def test_links_of_a_text_only_email() -> None:
    text = "Our offers: https://bit.ly/x, and the shop (http://www.example.com/shop)."
    found = content_findings(facts(html=None, text=text))
    assert codes(found) == {"shortener_link", "http_link"}
    assert only(found, "http_link").values["examples"] == "http://www.example.com/shop"
