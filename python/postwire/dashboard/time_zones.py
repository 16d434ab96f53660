"""Time zones a person schedules in: the IANA zones of the world's regions (not the legacy
aliases such as `US/Eastern` or `Etc/GMT+5`), and a local date and time read in one of them."""

from __future__ import annotations

import functools
import zoneinfo
from datetime import UTC, datetime
from typing import Final

from postwire.errors import validation_error

REGIONS: Final = (
    "Africa", "America", "Antarctica", "Asia", "Atlantic", "Australia", "Europe", "Indian",
    "Pacific",
)  # fmt: skip


@functools.cache
def time_zones() -> tuple[str, ...]:
    """UTC first, then the regions' zones in name order."""
    named = (zone for zone in zoneinfo.available_timezones() if zone.split("/")[0] in REGIONS)
    return ("UTC", *sorted(named))


def local_to_utc(moment: datetime, zone_name: str) -> datetime:
    """`moment` (naive: a wall-clock time) in `zone_name`, as UTC. A time the zone skips (the
    hour clocks go forward) is refused; one it has twice (the hour they go back) is the first."""
    if zone_name not in time_zones():
        raise validation_error(f"Unknown time zone `{zone_name[:64]}`: choose one from the list.")
    zone = zoneinfo.ZoneInfo(zone_name)
    local = moment.replace(tzinfo=zone, fold=0)
    there_and_back = local.astimezone(UTC).astimezone(zone)
    if there_and_back.replace(tzinfo=None) != moment:
        raise validation_error(
            f"{moment:%Y-%m-%d %H:%M} does not exist in {zone_name}: the clocks skip it."
        )
    return local.astimezone(UTC)


def in_zone(moment: datetime, zone_name: str) -> datetime:
    """An aware `moment` on the wall clocks of `zone_name` (one of `time_zones()`)."""
    return moment.astimezone(zoneinfo.ZoneInfo(zone_name))
