"""The dashboard's static files, served under content-hashed names.

`dashboard.css` is served as `/static/dashboard.<hash>.css`, the hash being the first 12 hex
digits of its SHA-256: a changed file gets a new URL, so every asset can be cached for a year.
Files are read once, when the app is made; a name with a stale hash is a 404.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Final

STATIC_DIR: Final = Path(__file__).parent / "static"
_HASH_LENGTH: Final = 12


@dataclass(frozen=True, slots=True)
class Asset:
    url_name: str
    content: bytes
    mimetype: str


def hashed_name(name: str, content: bytes) -> str:
    digest = hashlib.sha256(content).hexdigest()[:_HASH_LENGTH]
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}.{digest}.{suffix}" if dot else f"{name}.{digest}"


class Assets:
    """The files of a static directory by name and by hashed name."""

    def __init__(self, directory: Path = STATIC_DIR) -> None:
        self._by_name: dict[str, Asset] = {}
        self._by_url_name: dict[str, Asset] = {}
        for path in sorted(directory.rglob("*")):
            if not path.is_file() or path.name.startswith("."):
                continue
            name = path.relative_to(directory).as_posix()
            content = path.read_bytes()
            mimetype = mimetypes.guess_type(name)[0] or "application/octet-stream"
            if mimetype.startswith("text/") or mimetype in (
                "application/javascript",
                "image/svg+xml",
            ):
                mimetype += "; charset=utf-8"
            asset = Asset(hashed_name(name, content), content, mimetype)
            self._by_name[name] = asset
            self._by_url_name[asset.url_name] = asset

    def url(self, name: str) -> str:
        """The URL of the static file `name` (a path under static/); KeyError if there is none,
        so a template naming a missing file fails in tests rather than in a browser."""
        return f"/static/{self._by_name[name].url_name}"

    def find(self, url_name: str) -> Asset | None:
        return self._by_url_name.get(url_name)
