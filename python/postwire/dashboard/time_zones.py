"""Time zones a person schedules in: the IANA zones of the world's regions (not the legacy
aliases such as `US/Eastern` or `Etc/GMT+5`), and a local date and time read in one of them."""

from __future__ import annotations

import functools
import zoneinfo
from datetime import UTC, datetime, timedelta
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


# As far ahead as the REST API schedules.
MAX_SCHEDULE_AHEAD: Final = timedelta(days=30)


def parse_schedule_input(value: str, zone_name: str, now: datetime) -> datetime:
    """A `datetime-local` value (`2026-11-25T09:30`) in the time zone `zone_name`, as UTC; in
    the next 30 days, as the REST API schedules (broadcasts and emails alike)."""
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise validation_error(
            "Give the date and time to send at, such as 2026-12-01 09:30."
        ) from None
    if moment.tzinfo is None:
        moment = local_to_utc(moment, zone_name.strip() or "UTC")
    moment = moment.astimezone(UTC)
    if moment <= now:
        raise validation_error("The time to send at must be in the future.")
    if moment > now + MAX_SCHEDULE_AHEAD:
        raise validation_error("The time to send at can be at most 30 days ahead.")
    return moment


def scheduled_in_words(scheduled_at: str, zone: str) -> str:
    """A record's `scheduled_at` (the API's `2026-12-01 09:30:00.000000+00`) as a confirmation
    says it: `2026-12-01 09:30 UTC`, and on the clocks of `zone` when it is another listed one
    (a value typed with its own offset was never read in a zone, so none is named back)."""
    moment = datetime.strptime(scheduled_at[:16], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    words = f"{moment:%Y-%m-%d %H:%M} UTC"
    if zone != "UTC" and zone in time_zones():
        words += f" ({in_zone(moment, zone):%Y-%m-%d %H:%M} {zone})"
    return words
