"""The content checks a document passes before it may be sent (the editor's checklist).

Each check says what it found in words a person understands. The sending side adds its own
(from-domain verified, segment not empty); these look at the content alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from postwire.broadcasts.blocks.brand import BrandKit, contrast_ratio
from postwire.broadcasts.blocks.document import Block, Document, Run
from postwire.broadcasts.blocks.links import is_safe_link

# WCAG's ratio for large text: below it a colour all but vanishes on its background.
MIN_CONTRAST = 3.0


@dataclass(frozen=True, slots=True)
class Check:
    code: str
    passed: bool
    message: str
    # False for a warning: the item is shown, and sending goes ahead anyway.
    blocks_sending: bool = True


def content_checks(document: Document, brand: BrandKit | None = None) -> list[Check]:
    """The checks of `document` rendered with `brand` (the team's kit; the postal address and
    colours come from it, so pass it: without one the default kit, which has no address, is
    assumed). Always the same codes in the same order."""
    kit = (brand or BrandKit.default()).with_overrides(document.style)
    blocks = list(_all_blocks(document.blocks))
    footer = next((block for block in blocks if block.type == "footer"), None)
    return [
        _unsubscribe_check(footer),
        Check(
            "postal_address",
            bool(kit.postal_address.strip()),
            "The footer shows your postal address."
            if kit.postal_address.strip()
            else "Set your postal address in the brand kit: marketing email must show one.",
        ),
        _image_check(blocks),
        _link_check(blocks),
        _button_check(blocks),
        _contrast_check(kit, blocks),
    ]


def _unsubscribe_check(footer: Block | None) -> Check:
    if footer is None:
        return Check("unsubscribe_link", False, "Add a footer: it holds the unsubscribe link.")
    if not footer.label:
        return Check("unsubscribe_link", False, "The footer's unsubscribe link has no text.")
    return Check("unsubscribe_link", True, "The footer holds an unsubscribe link.")


def _image_check(blocks: list[Block]) -> Check:
    images = [block for block in blocks if block.type == "image"]
    unsourced = [block for block in images if not is_safe_link(block.src, images_only=True)]
    if unsourced:
        return Check("image_alt", False, f"{_count(len(unsourced), 'image')} no picture chosen.")
    missing = [block for block in images if not block.alt]
    if missing:
        return Check(
            "image_alt",
            False,
            f"{_count(len(missing), 'image')} no alt text: "
            "describe each image for people who cannot see it.",
        )
    return Check("image_alt", True, "Every image has alt text.")


def _link_check(blocks: list[Block]) -> Check:
    bad = [(url, where) for url, where in _links(blocks) if not is_safe_link(url)]
    if bad:
        url, where = bad[0]
        return Check(
            "links_valid",
            False,
            f"{_count(len(bad), 'link', 'is', 'are')} not a valid web or mailto address, "
            f"such as {url or '(empty)'} {where}.",
        )
    return Check("links_valid", True, "Every link is a valid web or mailto address.")


def _button_check(blocks: list[Block]) -> Check:
    empty = sum(1 for block in blocks if block.type == "button" and not block.label)
    if empty:
        return Check("button_labels", False, f"{_count(empty, 'button')} no label.")
    return Check("button_labels", True, "Every button has a label.")


def _contrast_check(kit: BrandKit, blocks: list[Block]) -> Check:
    pairs = [
        ("The text", kit.text_color, kit.content_background),
        ("Headings", kit.heading_color, kit.content_background),
        ("Links", kit.link_color, kit.content_background),
        ("The footer", kit.text_color, kit.background),
    ]
    for block in blocks:
        if block.type == "button":
            background = block.style.background or kit.button_background
            colour = block.style.color or kit.button_text_color
            pairs.append((f"The button \u201c{block.label}\u201d", colour, background))
        elif block.style.color and block.type != "divider":  # a divider is no text
            on = kit.background if block.type == "footer" else kit.content_background
            pairs.append((f"The colour of a {block.type} block", block.style.color, on))
    for what, colour, background in pairs:
        if contrast_ratio(colour, background) < MIN_CONTRAST:
            return Check(
                "contrast",
                False,
                f"{what} ({colour} on {background}) is too faint to read, "
                "and can vanish when a mail app darkens the email.",
            )
    return Check("contrast", True, "Every colour stands out from its background.")


def _all_blocks(blocks: tuple[Block, ...]) -> Iterator[Block]:
    for block in blocks:
        yield block
        for column in block.columns:
            yield from column


def _links(blocks: list[Block]) -> Iterator[tuple[str, str]]:
    """Each link with where it sits, in words, so a failed check says which one to fix."""
    for block in blocks:
        runs: list[Run] = list(block.content)
        for item in block.items:
            runs.extend(item)
        yield from ((run.link, f"in a {block.type}'s text") for run in runs if run.link)
        if block.type == "button":
            yield (
                block.url,
                f"on the button \u201c{block.label}\u201d" if block.label else "on a button",
            )
        elif block.type == "image" and block.link:
            yield block.link, "on an image"
        yield from ((link.url, "among the social links") for link in block.links)


def _count(number: int, noun: str, one: str = "has", many: str = "have") -> str:
    return f"1 {noun} {one}" if number == 1 else f"{number} {noun}s {many}"
