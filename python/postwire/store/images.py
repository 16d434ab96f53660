"""Images uploaded for broadcasts, served to mail clients from `api.public_url`.

Keys of table `images`:

    meta/{image}           ImageRecord: whose it is, its type, size and dimensions
    blob/{image}           the image's bytes, as uploaded
    team/{team}/{image}    TeamImage: the team's images, oldest first (ids are UUID v7)

An image is served by its id alone (mail clients have no credentials), so the id is what keeps
it private: UUID v7 ids carry 74 random bits. A team lists and reuses only its own images.
"""

from __future__ import annotations

from dataclasses import dataclass

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table

TABLE = "images"


@dataclass(frozen=True, slots=True)
class ImageRecord:
    id: str
    team_id: str
    mimetype: str  # image/png, image/jpeg, image/gif or image/webp, read from its bytes
    extension: str  # png, jpg, gif or webp: the last part of its address
    width: int
    height: int
    size: int  # bytes
    sha256: str  # of the bytes, hex: the ETag it is served with
    created_at: str  # store.accounts.contract_timestamp
    name: str = ""  # the uploaded file's name, for the team's list (never served)


@dataclass(frozen=True, slots=True)
class TeamImage:
    """An entry of a team's list of images; the key names the image."""

    created_at: str


IMAGES = Table(TABLE, ImageRecord)
TEAM_IMAGES = Table(TABLE, TeamImage)


def _meta_key(image_id: str) -> str:
    return f"meta/{image_id}"


def _blob_key(image_id: str) -> bytes:
    return f"blob/{image_id}".encode()


def _team_prefix(team_id: str) -> str:
    return f"team/{team_id}/"


def put_image(batch: WriteBatch, record: ImageRecord, content: bytes) -> None:
    """The image's record, bytes and list entry, in one batch."""
    IMAGES.put(batch, _meta_key(record.id), record)
    batch.put(TABLE, _blob_key(record.id), content)
    TEAM_IMAGES.put(batch, _team_prefix(record.team_id) + record.id, TeamImage(record.created_at))


def get_image(spool: Spool, image_id: str) -> ImageRecord | None:
    """Any team's image by its id: serving is public, by unguessable id."""
    return IMAGES.get(spool, _meta_key(image_id))


def get_team_image(spool: Spool, team_id: str, image_id: str) -> ImageRecord | None:
    """The image if it is the team's, else None (another team's looks like no image)."""
    record = get_image(spool, image_id)
    return record if record is not None and record.team_id == team_id else None


def image_content(spool: Spool, image_id: str) -> bytes | None:
    return spool.get(TABLE, _blob_key(image_id))


def team_images(spool: Spool, team_id: str, *, limit: int) -> list[ImageRecord]:
    """The team's newest `limit` images, newest first."""
    prefix = _team_prefix(team_id)
    rows = TEAM_IMAGES.scan(spool, prefix=prefix, reverse=True, limit=limit)
    found = (get_image(spool, key[len(prefix) :]) for key, _ in rows)
    return [record for record in found if record is not None]
