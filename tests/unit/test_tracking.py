"""Tracking tokens, link rewriting and the open pixel: pure functions, no spool."""

from __future__ import annotations

import base64
import re
import time

import pytest

from postwire import _core
from postwire.webhooks.tracking import (
    EmailTracking,
    TokenSigner,
    TrackedEmail,
    TrackedLink,
    add_open_pixel,
    attribute_value_text,
    redirect_location,
    rewrite_links,
)

SECRET = bytes(range(32))
TEAM = _core.new_id()
EMAIL = _core.new_id()
BASE = "https://mail.example.com"


@pytest.fixture
def signer() -> TokenSigner:
    return TokenSigner(SECRET)


# --- tokens ------------------------------------------------------------------------------------


def test_open_token_round_trips_and_is_compact(signer: TokenSigner) -> None:
    token = signer.open_token(TEAM, EMAIL)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", token)
    assert len(token) == 64  # 16 + 16 + 16 bytes
    assert signer.read_open(token) == TrackedEmail(TEAM, EMAIL)
    assert signer.open_token(TEAM, EMAIL) == token  # deterministic: no state per token


def test_click_token_round_trips_with_its_exact_link(signer: TokenSigner) -> None:
    link = "https://shop.example/p?id=7&ref=mail#top"
    token = signer.click_token(TEAM, EMAIL, link)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", token)
    assert signer.read_click(token) == TrackedLink(TEAM, EMAIL, link)
    assert signer.click_token(TEAM, EMAIL, link + "x") != token


def test_every_single_character_edit_is_refused(signer: TokenSigner) -> None:
    tokens = [signer.open_token(TEAM, EMAIL), signer.click_token(TEAM, EMAIL, "https://a.b/c")]
    for token in tokens:
        read = signer.read_open if len(token) == 64 else signer.read_click
        assert read(token) is not None
        for i, char in enumerate(token):
            for other in {"A", "f", "_"} - {char}:
                assert read(token[:i] + other + token[i + 1 :]) is None, (token, i)


def test_forged_truncated_or_respelled_tokens_are_refused(signer: TokenSigner) -> None:
    token = signer.click_token(TEAM, EMAIL, "https://a.example/")
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    content = raw[:-16]
    # Another link with the same tag: the open redirect the tag exists to stop.
    evil = content.replace(b"a.example", b"e.example")
    forged = base64.urlsafe_b64encode(evil + raw[-16:]).rstrip(b"=").decode()
    assert signer.read_click(forged) is None
    assert signer.read_click(token[:-1]) is None
    assert signer.read_click(token + "A") is None
    assert signer.read_click(token + "=") is None
    assert signer.read_click(token + "==") is None
    assert signer.read_click("") is None
    assert signer.read_click("A" * 10) is None
    assert signer.read_click(token[:-2] + "+/") is None  # the other base64 alphabet
    assert signer.read_click(token + "\n") is None
    assert signer.read_click("%" + token) is None


def test_non_canonical_base64_is_refused(signer: TokenSigner) -> None:
    token = signer.open_token(TEAM, EMAIL)  # 48 bytes: 64 characters, no spare bits
    # 67 bytes: the last character holds 2 bits of data and 4 spare ones.
    click = signer.click_token(TEAM, EMAIL, "https://a.example/x")
    assert len(base64.urlsafe_b64decode(click + "=" * (-len(click) % 4))) % 3 == 1
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(click[-1])
    respelled = click[:-1] + alphabet[last | 1]  # same bytes, an unused bit set
    assert respelled != click
    assert signer.read_click(respelled) is None
    assert signer.read_open(token) is not None


def test_kinds_and_secrets_do_not_mix(signer: TokenSigner) -> None:
    opened = signer.open_token(TEAM, EMAIL)
    clicked = signer.click_token(TEAM, EMAIL, "https://a.example/")
    assert signer.read_click(opened) is None
    assert signer.read_open(clicked) is None
    other = TokenSigner(bytes(32))
    assert other.read_open(opened) is None
    assert other.read_click(clicked) is None


def test_a_signed_link_that_is_not_http_is_still_refused(signer: TokenSigner) -> None:
    assert signer.read_click(signer.click_token(TEAM, EMAIL, "javascript:alert(1)")) is None


def test_secret_must_be_long_enough() -> None:
    with pytest.raises(ValueError):
        TokenSigner(b"short")


# --- attribute values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "text"),
    [
        ("https://a.b/?x=1&amp;y=2", "https://a.b/?x=1&y=2"),
        ("https://a.b/?x=1&AMP;y=2", "https://a.b/?x=1&y=2"),
        ("https://a.b/?x=1&#38;y=2", "https://a.b/?x=1&y=2"),
        ("https://a.b/?x=1&#x26;y=2", "https://a.b/?x=1&y=2"),
        ("https://a.b/?x=1&y=2", "https://a.b/?x=1&y=2"),  # a bare & is text
        ("https://a.b/?x=1&para=2", "https://a.b/?x=1&para=2"),  # not ¶=2
        ("https://a.b/?x=1&copy=2", "https://a.b/?x=1&copy=2"),
        ("https://a.b/?x=1&para;", "https://a.b/?x=1¶"),
        ("https://a.b/?x=1&amp", "https://a.b/?x=1&"),
        ("https://a.b/?x=1&ampx;", "https://a.b/?x=1&ampx;"),  # no prefix of a name
        ("https://a.b/?x=1&nosuch;", "https://a.b/?x=1&nosuch;"),
        ("https://a.b/?q=&lt;&gt;&quot;", 'https://a.b/?q=<>"'),
    ],
)
def test_attribute_value_text(written: str, text: str) -> None:
    assert attribute_value_text(written) == text


# --- link rewriting ----------------------------------------------------------------------------


def tag(link: str) -> str:
    return f"T[{link}]"


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ('<a href="https://a.b/x">go</a>', '<a href="T[https://a.b/x]">go</a>'),
        ("<A HREF='HTTP://A.B/X'>go</A>", '<A HREF="T[HTTP://A.B/X]">go</A>'),
        ("<a href=https://a.b/x>go</a>", '<a href="T[https://a.b/x]">go</a>'),
        ('<a\nclass="btn"\thref = "https://a.b/x" >go</a>',
         '<a\nclass="btn"\thref = "T[https://a.b/x]" >go</a>'),
        ('<a href="https://a.b/?x=1&amp;y=2">', '<a href="T[https://a.b/?x=1&amp;y=2]">'),
        ('<a title="1 > 0" href="https://a.b/">', '<a title="1 > 0" href="T[https://a.b/]">'),
        ("<a title='say \"hi\"' href='https://a.b/'>", "<a title='say \"hi\"' href=\"T[https://a.b/]\">"),
        ('<a data-href="https://x.y/" href="https://a.b/">',
         '<a data-href="https://x.y/" href="T[https://a.b/]">'),
        ('<a href="https://a.b/1" href="https://a.b/2">',
         '<a href="T[https://a.b/1]" href="https://a.b/2">'),  # the first href is the link
        ('<a href=" https://a.b/x\n ">', '<a href="T[https://a.b/x]">'),
        ('<a href="https://a.b/&#10;x">', '<a href="T[https://a.b/x]">'),
        ('<a href="https://a.b/x"/>', '<a href="T[https://a.b/x]"/>'),
    ],
)  # fmt: skip
def test_http_links_are_rewritten(document: str, expected: str) -> None:
    assert rewrite_links(document, tag) == expected


@pytest.mark.parametrize(
    "document",
    [
        '<a href="mailto:ann@example.org">mail</a>',
        '<a href="tel:+15550100">call</a>',
        '<a href="#top">top</a>',
        '<a href="/relative/path">rel</a>',
        '<a href="ftp://a.b/file">ftp</a>',
        '<a href="javascript:void(0)">js</a>',
        '<a href="">empty</a>',
        "<a href>bare</a>",
        '<a name="anchor">named</a>',
        '<abbr href="https://a.b/">not a link</abbr>',
        '<area href="https://a.b/">',
        '<link href="https://a.b/style.css">',
        '<img src="https://a.b/i.png">',
        "<p>https://a.b/ in text</p>",
        '<!-- <a href="https://a.b/"> -->',
        '<a href="https://a.b/" title="never closed',
        '<a href="https://a.b/"',
        "<a",
        "",
    ],
)
def test_other_links_and_markup_stay_as_written(document: str) -> None:
    assert rewrite_links(document, tag) == document


def test_outlook_conditional_comments_are_scanned() -> None:
    document = '<!--[if mso]><a href="https://a.b/">x</a><![endif]-->'
    assert (
        rewrite_links(document, tag) == '<!--[if mso]><a href="T[https://a.b/]">x</a><![endif]-->'
    )


def test_a_link_the_callback_declines_stays() -> None:
    document = '<a href="https://a.b/">x</a><a href="https://c.d/">y</a>'
    assert rewrite_links(document, lambda link: None if "a.b" in link else "T") == (
        '<a href="https://a.b/">x</a><a href="T">y</a>'
    )


def test_replacement_is_escaped() -> None:
    assert rewrite_links('<a href="https://a.b/">', lambda _: 'https://t/?a=1&b="') == (
        '<a href="https://t/?a=1&amp;b=&quot;">'
    )


def test_everything_around_the_links_is_kept_byte_for_byte() -> None:
    document = (
        "<html><head><style>a{color:red}</style></head><body>\n"
        "<p>Hi <b>Ann</b> &amp; co,</p>\r\n"
        '<a href="https://a.b/1">one</a> and <A HREF="https://a.b/2">two</A>\n'
        "</body></html>"
    )
    rewritten = rewrite_links(document, lambda link: "X")
    assert rewritten == document.replace("https://a.b/1", "X").replace("https://a.b/2", "X")


@pytest.mark.parametrize(
    "document",
    [
        "<a " * 300_000,
        '<a href="' * 300_000,
        "<a title='x " * 300_000,
        "<!--" * 300_000,
        '<a href="https://a.b/?x=1&amp;y=2">x</a>' * 30_000,
    ],
)
def test_hostile_markup_is_scanned_in_linear_time(document: str) -> None:
    started = time.perf_counter()
    rewrite_links(document, tag)
    assert time.perf_counter() - started < 5  # quadratic would take hours


# --- the pixel -------------------------------------------------------------------------------


def test_pixel_goes_before_the_last_closing_body() -> None:
    document = "<html><body><p>Hi</p></BODY></html>"
    tracked = add_open_pixel(document, "https://t/o/x")
    assert tracked == (
        '<html><body><p>Hi</p><img src="https://t/o/x" width="1" height="1" alt="" '
        'style="display:block;width:1px;height:1px;border:0;margin:0;padding:0" /></BODY></html>'
    )


def test_pixel_goes_at_the_end_without_a_body() -> None:
    tracked = add_open_pixel("<p>Hi</p>", "https://t/o/x?a&b")
    assert tracked.startswith('<p>Hi</p><img src="https://t/o/x?a&amp;b" width="1" height="1"')
    assert tracked.endswith("/>")


# --- one email's tracking -----------------------------------------------------------------------


def tracking(signer: TokenSigner, *, opens: bool, clicks: bool) -> EmailTracking:
    return EmailTracking(signer, BASE, TEAM, EMAIL, opens, clicks)


def test_apply_signs_each_link_for_this_email(signer: TokenSigner) -> None:
    document = (
        '<body><a href="https://shop.example/a?x=1&amp;y=2">a</a>'
        '<a href="mailto:ann@example.org">m</a></body>'
    )
    tracked = tracking(signer, opens=True, clicks=True).apply(document)
    clicks = re.findall(rf'href="{BASE}/t/c/([A-Za-z0-9_-]+)"', tracked)
    (opened,) = re.findall(rf'<img src="{BASE}/t/o/([A-Za-z0-9_-]+)"', tracked)
    assert [signer.read_click(token) for token in clicks] == [
        TrackedLink(TEAM, EMAIL, "https://shop.example/a?x=1&y=2")
    ]
    assert signer.read_open(opened) == TrackedEmail(TEAM, EMAIL)
    assert 'href="mailto:ann@example.org"' in tracked
    assert tracked.index("<img") < tracked.index("</body>")


def test_apply_does_only_what_the_domain_asks(signer: TokenSigner) -> None:
    document = '<a href="https://a.b/">a</a>'
    assert "<img" not in tracking(signer, opens=False, clicks=True).apply(document)
    opens_only = tracking(signer, opens=True, clicks=False).apply(document)
    assert opens_only.startswith(document) and "<img" in opens_only


def test_very_long_links_are_left_alone(signer: TokenSigner) -> None:
    long_link = "https://a.b/?" + "x" * 9000
    document = f'<a href="{long_link}">a</a>'
    assert tracking(signer, opens=False, clicks=True).apply(document) == document


# --- redirects -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "location"),
    [
        ("https://a.b/p?x=1&y=2#f", "https://a.b/p?x=1&y=2#f"),
        ("https://a.b/ä ö", "https://a.b/%C3%A4%20%C3%B6"),
        ("https://a.b/%20", "https://a.b/%20"),
        ("https://a.b/\x01", "https://a.b/%01"),
    ],
)
def test_redirect_location_is_ascii(link: str, location: str) -> None:
    assert redirect_location(link) == location
