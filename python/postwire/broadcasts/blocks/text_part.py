"""The plain-text part of a document, written from the blocks themselves (not from the HTML):
headings and paragraphs as text, list items as "- " (or "1. "), links as "text (url)", buttons
as "label: url", the footer with the postal address and the unsubscribe link. Blocks are
separated by a blank line; placeholders stay as written for the engine to fill in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from postwire.broadcasts.blocks.brand import BrandKit
from postwire.broadcasts.blocks.document import SOCIAL_NETWORKS, Block, Document, Run
from postwire.broadcasts.blocks.links import is_safe_link
from postwire.broadcasts.blocks.mjml import UNSUBSCRIBE_URL


def document_to_text(document: Document, brand: BrandKit) -> str:
    kit = brand.with_overrides(document.style)
    paragraphs = [text for text in _blocks_text(document.blocks, kit) if text.strip()]
    return "\n\n".join(paragraphs) + "\n"


def _blocks_text(blocks: Iterable[Block], kit: BrandKit) -> Iterator[str]:
    for block in blocks:
        if block.type == "columns":
            for column in block.columns:
                yield from _blocks_text(column, kit)
        else:
            yield _block_text(block, kit)


def _block_text(block: Block, kit: BrandKit) -> str:
    if block.type in ("heading", "paragraph"):
        return runs_text(block.content)
    if block.type == "list":
        lines = []
        for number, item in enumerate(block.items, start=1):
            marker = f"{number}. " if block.ordered else "- "
            indent = " " * len(marker)
            lines.append(marker + runs_text(item).replace("\n", "\n" + indent))
        return "\n".join(lines)
    if block.type == "image":
        if is_safe_link(block.link):
            return _linked(block.alt, block.link)
        return block.alt
    if block.type == "button":
        if is_safe_link(block.url):
            return f"{block.label}: {block.url}" if block.label else block.url
        return block.label
    if block.type == "divider":
        return "-" * 20
    if block.type == "social":
        return "\n".join(
            f"{SOCIAL_NETWORKS[link.network]}: {link.url}"
            for link in block.links
            if is_safe_link(link.url)
        )
    if block.type == "footer":
        parts = [runs_text(block.content), kit.postal_address]
        parts.append(f"{block.label or 'Unsubscribe'}: {UNSUBSCRIBE_URL}")
        return "\n\n".join(part for part in parts if part.strip())
    return ""  # spacer


def runs_text(runs: Iterable[Run]) -> str:
    """Runs as plain text; a linked run as "text (url)", merged with its linked neighbours
    when they share the URL (a link written in several styles)."""
    pieces: list[str] = []
    link_text: list[str] = []
    link = ""
    for run in [*runs, Run()]:
        current = run.link if is_safe_link(run.link) else ""
        if current != link and link:
            pieces.append(_linked("".join(link_text), link))
            link_text = []
        link = current
        (link_text if current else pieces).append(run.shown_text)
    return "".join(pieces).strip()


def _linked(text: str, url: str) -> str:
    text = text.strip()
    if not text or text == url:
        return url
    if f"mailto:{text}" == url:
        return text
    return f"{text} ({url})"
