"""Each team's brand kit: the colours, font, button shape, logo and postal address new
documents start from and the renderer falls back on.

Keys:

    brand_kits   {team}   BrandKitRecord

The kit's values are `broadcasts.blocks.brand.BrandKit.to_json()`, validated before they are
written; a team that never saved one uses `BrandKit.default()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from postwire._core import WriteBatch
from postwire.store.spool import Spool
from postwire.store.tables import Table


@dataclass(frozen=True, slots=True)
class BrandKitRecord:
    team_id: str
    kit: dict[str, Any]
    updated_at: str  # store.accounts.contract_timestamp


BRAND_KITS = Table("brand_kits", BrandKitRecord)


def get_brand_kit(spool: Spool, team_id: str) -> BrandKitRecord | None:
    return BRAND_KITS.get(spool, team_id)


async def get_brand_kit_parked(spool: Spool, team_id: str) -> BrandKitRecord | None:
    """`get_brand_kit`, parked rather than blocking on a table store on the network."""
    return await BRAND_KITS.aget(spool, team_id)


def put_brand_kit(batch: WriteBatch, record: BrandKitRecord) -> None:
    BRAND_KITS.put(batch, record.team_id, record)
