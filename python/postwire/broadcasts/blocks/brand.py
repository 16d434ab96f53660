"""A team's brand kit: the style values every broadcast document starts from.

A document's own `style` overrides any of them (`BrandKit.with_overrides`); the renderer reads
the merged kit only. Fonts come from a fixed list of email-safe stacks (no web fonts: most mail
clients ignore them, and loading one would reach outside Postwire).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Self

from postwire.broadcasts.blocks.languages import LANGUAGES
from postwire.errors import PostwireError

FONT_STACKS: dict[str, str] = {
    "arial": "Arial, Helvetica, sans-serif",
    "helvetica": "Helvetica, Arial, sans-serif",
    "verdana": "Verdana, Geneva, sans-serif",
    "trebuchet": "'Trebuchet MS', Tahoma, sans-serif",
    "georgia": "Georgia, 'Times New Roman', serif",
    "times": "'Times New Roman', Times, serif",
    "courier": "'Courier New', Courier, monospace",
    "system": "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif",
}
BUTTON_SHAPES = ("square", "rounded", "pill")
ALIGNMENTS = ("left", "center", "right")

_COLOUR = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})")
# Keys of the kit a document's `style` may override (the address and logo stay the team's).
STYLE_KEYS = (
    "background",
    "content_background",
    "text_color",
    "heading_color",
    "link_color",
    "button_background",
    "button_text_color",
    "button_shape",
    "font",
    "align",
    "language",
)
MAX_ADDRESS_LENGTH = 500
MAX_URL_LENGTH = 2000


class StyleError(PostwireError, ValueError):
    """A style value is not one Postwire accepts; the message names the field."""


def normalize_colour(value: object, where: str) -> str:
    """`#rgb` or `#rrggbb`, lower-cased and expanded to `#rrggbb`."""
    if not isinstance(value, str) or not _COLOUR.fullmatch(value):
        raise StyleError(f"{where} must be a colour like #1a2b3c or #abc, not {_shown(value)}.")
    digits = value[1:].lower()
    if len(digits) == 3:
        digits = "".join(digit * 2 for digit in digits)
    return "#" + digits


def check_choice(value: object, choices: tuple[str, ...] | dict[str, str], where: str) -> str:
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(choices)
        raise StyleError(f"{where} must be one of {listed}, not {_shown(value)}.")
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def relative_luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a `#rrggbb` colour."""
    channels = []
    for start in (1, 3, 5):
        channel = int(colour[start : start + 2], 16) / 255
        channels.append(
            channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4
        )
    red, green, blue = channels
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2 contrast ratio of two `#rrggbb` colours, 1.0 to 21.0."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


@dataclass(frozen=True, slots=True)
class BrandKit:
    background: str = "#f4f4f5"  # around the 600 px body
    content_background: str = "#ffffff"
    text_color: str = "#1f2937"
    heading_color: str = "#111827"
    link_color: str = "#1d4ed8"
    button_background: str = "#1d4ed8"
    button_text_color: str = "#ffffff"
    button_shape: str = "rounded"
    font: str = "arial"  # a key of FONT_STACKS
    align: str = "left"
    language: str = "en"  # a key of LANGUAGES: the email's `lang`
    logo_url: str = ""  # an http(s) URL (an image uploaded to Postwire), or "" for none
    logo_alt: str = ""
    logo_width: int = 160
    postal_address: str = ""  # shown in every footer (anti-spam laws require one)

    @classmethod
    def default(cls) -> Self:
        return cls()

    @property
    def font_stack(self) -> str:
        return FONT_STACKS[self.font]

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: object) -> Self:
        """A kit from stored or submitted JSON; keys left out keep their defaults. Raises
        `StyleError` naming the field for a wrong value or an unknown key."""
        if not isinstance(raw, dict):
            raise StyleError("The brand kit must be a JSON object.")
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise StyleError(f"The brand kit has no field `{unknown[0]}`.")
        kit = cls()
        values: dict[str, Any] = style_values(
            {key: value for key, value in raw.items() if key in STYLE_KEYS}, "The brand kit's"
        )
        if "logo_url" in raw:
            logo_url = raw["logo_url"]
            if not isinstance(logo_url, str) or len(logo_url) > MAX_URL_LENGTH:
                raise StyleError(
                    "The brand kit's `logo_url` must be a URL of at most 2000 characters."
                )
            if logo_url and not logo_url.lower().startswith(("https://", "http://")):
                raise StyleError("The brand kit's `logo_url` must be an http(s) URL.")
            values["logo_url"] = logo_url
        for key, limit in (("logo_alt", 200), ("postal_address", MAX_ADDRESS_LENGTH)):
            if key in raw:
                value = raw[key]
                if not isinstance(value, str) or len(value) > limit:
                    raise StyleError(
                        f"The brand kit's `{key}` must be text of at most {limit} characters."
                    )
                values[key] = value.strip()
        if "logo_width" in raw:
            width = raw["logo_width"]
            if isinstance(width, bool) or not isinstance(width, int | float) or width != width:
                raise StyleError("The brand kit's `logo_width` must be a number of pixels.")
            values["logo_width"] = min(max(int(width), 16), 600)
        return replace(kit, **values)

    def with_overrides(self, overrides: dict[str, str]) -> BrandKit:
        """This kit with a document's validated style values in place of its own."""
        values: dict[str, Any] = overrides
        return replace(self, **values) if values else self


def style_values(raw: dict[str, object], owner: str) -> dict[str, str]:
    """The validated style overrides of `raw` (keys of STYLE_KEYS only; callers refuse others).
    `owner` starts the error messages ("The document's", "The brand kit's")."""
    return {key: style_value(key, value, f"{owner} `{key}`") for key, value in raw.items()}


def style_value(key: str, value: object, where: str) -> str:
    """One validated style value: a font, a button shape (`shape` in a block's style), an
    alignment, a language, else a colour."""
    if key == "language":
        if not isinstance(value, str) or value not in LANGUAGES:
            raise StyleError(
                f"{where} must be a language tag of the editor's list, such as en, fr or "
                f"pt-BR, not {_shown(value)}."
            )
        return value
    if key == "font":
        return check_choice(value, FONT_STACKS, where)
    if key in ("button_shape", "shape"):
        return check_choice(value, BUTTON_SHAPES, where)
    if key == "align":
        return check_choice(value, ALIGNMENTS, where)
    return normalize_colour(value, where)
