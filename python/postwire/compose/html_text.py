"""A plain-text rendering of an HTML body, for the text/plain part of a message."""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Elements whose content is not text a reader sees.
_HIDDEN_ELEMENTS = frozenset({"script", "style", "head", "title", "template", "noscript"})
# Elements that stand apart from their neighbours by a blank line or by a line break.
_PARAGRAPH_ELEMENTS = frozenset(
    {"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "ul", "ol", "dl"}
)
_LINE_ELEMENTS = frozenset(
    {
        "div", "section", "article", "header", "footer", "nav", "aside", "main", "address",
        "figure", "figcaption", "form", "fieldset", "tr", "li", "dt", "dd", "hr", "center",
    }
)  # fmt: skip


def html_to_text(html: str) -> str:
    """A plain-text rendering of `html` for the text/plain part: hidden elements dropped,
    whitespace collapsed (kept inside <pre>), paragraphs separated by blank lines, <br>, list
    items and other blocks on their own lines, and link targets kept as `text (url)`."""
    converter = _HtmlToText()
    converter.feed(html)
    converter.close()
    return converter.result()


_WHITESPACE = re.compile(r"\s+")


class _HtmlToText(HTMLParser):
    """Writes text as it comes, collapsing whitespace outside <pre>; blocks ask for at least
    one or two line breaks before what follows, so nested blocks do not stack blank lines."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        self._trailing_newlines = 0
        self._hidden_depth = 0
        self._pre_depth = 0
        self._open_links: list[tuple[str, int]] = []  # (href, index of its first part)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self._hidden_depth = 0  # an unclosed <head> must not hide the whole body
        elif tag in _HIDDEN_ELEMENTS:
            self._hidden_depth += 1
        elif tag == "br":
            self._line_break()
        elif tag in _PARAGRAPH_ELEMENTS:
            self._block_break(2)
            self._pre_depth += tag == "pre"
        elif tag == "li":
            self._block_break(1)
            self._write("- ")
        elif tag in _LINE_ELEMENTS:
            self._block_break(1)
        elif tag in ("td", "th"):
            self._write(" ")
        elif tag == "a":
            href = (dict(attrs).get("href") or "").strip()
            self._open_links.append((href, len(self._parts)))

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN_ELEMENTS:
            self._hidden_depth = max(0, self._hidden_depth - 1)
        elif tag in _PARAGRAPH_ELEMENTS:
            self._pre_depth = max(0, self._pre_depth - (tag == "pre"))
            self._block_break(2)
        elif tag in _LINE_ELEMENTS:
            self._block_break(1)
        elif tag == "a" and self._open_links:
            href, first = self._open_links.pop()
            label = " ".join("".join(self._parts[first:]).split())
            if href.startswith(("http://", "https://", "mailto:")) and label not in (
                href,
                href.removeprefix("mailto:"),
            ):
                self._write(f" ({href})" if label else href)

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth:
            self._write(data)

    def _write(self, text: str) -> None:
        if self._pre_depth:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        else:
            text = _WHITESPACE.sub(" ", text)
            if not self._parts or self._trailing_newlines or self._parts[-1].endswith(" "):
                text = text.lstrip(" ")
        if not text:
            return
        self._parts.append(text)
        body = text.rstrip("\n")
        self._trailing_newlines = (
            len(text) - len(body) if body else self._trailing_newlines + len(text)
        )

    def _line_break(self) -> None:
        self._drop_trailing_space()
        self._parts.append("\n")
        self._trailing_newlines += 1

    def _block_break(self, newlines: int) -> None:
        if not self._parts:
            return
        self._drop_trailing_space()
        missing = newlines - self._trailing_newlines
        if missing > 0:
            self._parts.append("\n" * missing)
            self._trailing_newlines = newlines

    def _drop_trailing_space(self) -> None:
        if self._parts and self._parts[-1].endswith(" "):
            self._parts[-1] = self._parts[-1].rstrip(" ")

    def result(self) -> str:
        lines = (line.rstrip() for line in "".join(self._parts).split("\n"))
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
