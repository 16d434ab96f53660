"""What every rendered block must respect to be safe in mail clients, as a list of faults."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from postwire.broadcasts.blocks.links import is_safe_link

_LAYOUT = re.compile(r"display\s*:\s*(?:inline-)?(?:flex|grid)", re.IGNORECASE)
_EXTERNAL_CSS = re.compile(r"@import|url\s*\(", re.IGNORECASE)
UNSUBSCRIBE = "{{{RESEND_UNSUBSCRIBE_URL}}}"


class _Faults(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.faults: list[str] = []
        self.images = 0
        self.meta_color_scheme = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("script", "iframe", "object", "embed", "form", "base"):
            self.faults.append(f"<{tag}> element")
        if tag == "link":
            self.faults.append(f"<link> element {values}")
        if tag == "meta" and values.get("name") == "color-scheme":
            self.meta_color_scheme = True
        for name, value in attrs:
            if name.startswith("on"):
                self.faults.append(f"event handler {name} on <{tag}>")
            if name == "style" and value and (_LAYOUT.search(value) or _EXTERNAL_CSS.search(value)):
                self.faults.append(f"style {value!r} on <{tag}>")
        if tag == "img":
            self.images += 1
            if "alt" not in values:
                self.faults.append(f"<img> without alt: {values}")
            if not (values.get("width") or "").isdigit():
                self.faults.append(f"<img> without a width in pixels: {values}")
            src = values.get("src") or ""
            if not is_safe_link(src, images_only=True):
                self.faults.append(f"<img> src {src!r}")
        href = values.get("href")
        if tag == "a" and href is not None and href != UNSUBSCRIBE and not is_safe_link(href):
            self.faults.append(f"link to {href!r}")


def email_safety_faults(html: str) -> list[str]:
    """Faults of `html`: scripts, external CSS, flex or grid layout, images without alt text or
    a width, unsafe links, event handlers. Empty when the HTML is safe to send."""
    checker = _Faults()
    checker.feed(html)
    checker.close()
    for style in re.findall(r"<style[^>]*>(.*?)</style>", html, re.DOTALL | re.IGNORECASE):
        if _LAYOUT.search(style) or _EXTERNAL_CSS.search(style):
            checker.faults.append(f"<style> with flex, grid or external CSS: {style[:80]!r}")
    if not checker.meta_color_scheme:
        checker.faults.append("no color-scheme <meta>")
    return checker.faults
