"""The languages an email may be written in: its `lang` tells screen readers how to pronounce
it and mail apps which language to offer for translation and spelling; right-to-left
languages also set `dir`, so lists, padding and alignment mirror.

A fixed list of BCP 47 tags (the languages of common email audiences), chosen from a menu as
the fonts are, so every stored value is a tag a mail app knows.
"""

from __future__ import annotations

from typing import Final

LANGUAGES: Final[dict[str, str]] = {
    "en": "English",
    "ar": "Arabic",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "ca": "Catalan",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "es": "Spanish",
    "et": "Estonian",
    "fa": "Persian",
    "fi": "Finnish",
    "fil": "Filipino",
    "fr": "French",
    "he": "Hebrew",
    "hi": "Hindi",
    "hr": "Croatian",
    "hu": "Hungarian",
    "id": "Indonesian",
    "is": "Icelandic",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "ms": "Malay",
    "nb": "Norwegian (Bokmål)",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "pt-BR": "Portuguese (Brazil)",
    "ro": "Romanian",
    "ru": "Russian",
    "sk": "Slovak",
    "sl": "Slovenian",
    "sr": "Serbian",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "th": "Thai",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "vi": "Vietnamese",
    "zh-Hans": "Chinese (Simplified)",
    "zh-Hant": "Chinese (Traditional)",
}
RIGHT_TO_LEFT: Final = frozenset({"ar", "fa", "he", "ur"})


def text_direction(language: str) -> str:
    """`rtl` for a right-to-left language, else `ltr`."""
    return "rtl" if language in RIGHT_TO_LEFT else "ltr"
