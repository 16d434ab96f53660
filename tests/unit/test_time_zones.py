"""Scheduling in a time zone: the zones offered, and a wall-clock time read in one."""

from datetime import UTC, datetime

import pytest

from postwire.dashboard.time_zones import local_to_utc, parse_schedule_input, time_zones
from postwire.errors import ApiError

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def test_the_zones_are_utc_then_the_regions_without_legacy_aliases() -> None:
    zones = time_zones()
    assert zones[0] == "UTC"
    assert {"Europe/Paris", "America/New_York", "Asia/Kolkata"} <= set(zones)
    assert not {"US/Eastern", "Etc/GMT+5", "EST", "GMT"} & set(zones)
    assert list(zones[1:]) == sorted(zones[1:])


@pytest.mark.parametrize(
    ("local", "zone", "utc"),
    [
        ("2026-12-01T09:30", "Europe/Paris", "2026-12-01 08:30"),  # winter: UTC+1
        ("2026-07-01T09:30", "Europe/Paris", "2026-07-01 07:30"),  # summer: UTC+2
        ("2026-12-01T09:30", "Asia/Kolkata", "2026-12-01 04:00"),
        ("2026-12-01T09:30", "America/New_York", "2026-12-01 14:30"),
        # The hour Paris has twice (clocks back at 03:00 summer time): the first one.
        ("2026-10-25T02:30", "Europe/Paris", "2026-10-25 00:30"),
    ],
)
def test_a_wall_clock_time_in_a_zone_is_read_as_utc(local: str, zone: str, utc: str) -> None:
    moment = local_to_utc(datetime.fromisoformat(local), zone)
    assert f"{moment:%Y-%m-%d %H:%M}" == utc and moment.tzinfo == UTC


def test_a_skipped_time_and_an_unknown_zone_are_refused_in_words() -> None:
    with pytest.raises(ApiError, match="2027-03-28 02:30 does not exist in Europe/Paris"):
        local_to_utc(datetime(2027, 3, 28, 2, 30), "Europe/Paris")
    with pytest.raises(ApiError, match="Unknown time zone `US/Eastern`"):
        local_to_utc(datetime(2026, 12, 1, 9, 30), "US/Eastern")


def test_the_schedule_form_reads_its_zone_and_keeps_its_limits() -> None:
    paris = parse_schedule_input("2026-12-01T09:30", "Europe/Paris", NOW)
    assert paris == datetime(2026, 12, 1, 8, 30, tzinfo=UTC)
    assert parse_schedule_input("2026-12-01T09:30", "", NOW) == datetime(
        2026, 12, 1, 9, 30, tzinfo=UTC
    )
    with pytest.raises(ApiError, match="must be in the future"):
        parse_schedule_input("2026-11-25T12:30", "Europe/Paris", NOW)  # 11:30 UTC
    with pytest.raises(ApiError, match="at most 30 days ahead"):
        parse_schedule_input("2027-01-10T09:30", "UTC", NOW)
    with pytest.raises(ApiError, match="Give the date and time"):
        parse_schedule_input("tomorrow", "UTC", NOW)
