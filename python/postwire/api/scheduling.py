"""`scheduled_at`: ISO 8601 or natural language ("in 1 hour", "Friday at 3pm ET"), made UTC.

Everything here is pure: the current time is an argument, never read from a clock.

Choices the contract leaves open:
- No time zone means UTC (a REST request carries no zone of its user).
- Relative times ("in 3 days") are exact durations added to `now`, whatever the wall clock does.
- A time without a day ("at 5pm") is its next occurrence: today if still ahead, else tomorrow.
  A bare or `this`/`on` weekday is the next such day whose time is still ahead (today counts);
  `next <weekday>` is the first such day after today.
- A day without a time ("tomorrow") keeps the current time of day in the zone.
- Generic zone names (ET, CT, MT, PT, and IANA names) follow daylight saving time; explicit
  standard or daylight abbreviations (EST, EDT, CET, CEST, BST, ...) are the fixed offsets
  they name.
- A wall time skipped by a DST change (02:30 on a spring-forward day) is read with the offset
  before the change, so it lands one hour later on the clock; a repeated one (01:30 on a
  fall-back day) is its first occurrence.
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from functools import cache

from postwire.errors import ApiError, validation_error

MAX_SCHEDULE_AHEAD = timedelta(days=30)

INVALID_FORMAT_MESSAGE = (
    "The `scheduled_at` field must be an ISO 8601 date (e.g. `2026-08-05T11:52:01.858Z`) or "
    "a natural language time (e.g. `in 1 hour`, `tomorrow at 9am`, `Friday at 3pm ET`)."
)
NOT_IN_FUTURE_MESSAGE = "The `scheduled_at` date must be in the future."
TOO_FAR_MESSAGE = "The `scheduled_at` date must be within the next 30 days."

# Zones whose abbreviation names a region: they follow that region's daylight saving time.
_REGIONAL_ZONES = {
    "et": "America/New_York",
    "eastern": "America/New_York",
    "ct": "America/Chicago",
    "central": "America/Chicago",
    "mt": "America/Denver",
    "mountain": "America/Denver",
    "pt": "America/Los_Angeles",
    "pacific": "America/Los_Angeles",
    "ist": "Asia/Kolkata",
    "jst": "Asia/Tokyo",
    "kst": "Asia/Seoul",
    "hkt": "Asia/Hong_Kong",
    "sgt": "Asia/Singapore",
}
# Abbreviations of one offset, as IANA's fixed `Etc/GMT±N` zones (whose sign is inverted).
_FIXED_ZONES = {
    "utc": "Etc/UTC",
    "gmt": "Etc/UTC",
    "z": "Etc/UTC",
    "wet": "Etc/UTC",
    "west": "Etc/GMT-1",
    "bst": "Etc/GMT-1",
    "cet": "Etc/GMT-1",
    "cest": "Etc/GMT-2",
    "eet": "Etc/GMT-2",
    "eest": "Etc/GMT-3",
    "msk": "Etc/GMT-3",
    "est": "Etc/GMT+5",
    "edt": "Etc/GMT+4",
    "cst": "Etc/GMT+6",
    "cdt": "Etc/GMT+5",
    "mst": "Etc/GMT+7",
    "mdt": "Etc/GMT+6",
    "pst": "Etc/GMT+8",
    "pdt": "Etc/GMT+7",
    "akst": "Etc/GMT+9",
    "akdt": "Etc/GMT+8",
    "hst": "Etc/GMT+10",
    "awst": "Etc/GMT-8",
    "aest": "Etc/GMT-10",
    "aedt": "Etc/GMT-11",
    "nzst": "Etc/GMT-12",
    "nzdt": "Etc/GMT-13",
}

_WEEKDAYS = {
    name: number
    for number, names in enumerate(
        [
            ("monday", "mon"),
            ("tuesday", "tue", "tues"),
            ("wednesday", "wed"),
            ("thursday", "thu", "thur", "thurs"),
            ("friday", "fri"),
            ("saturday", "sat"),
            ("sunday", "sun"),
        ]
    )
    for name in names
}

_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), timedelta(seconds=1)),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), timedelta(minutes=1)),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), timedelta(hours=1)),
    **dict.fromkeys(("d", "day", "days"), timedelta(days=1)),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), timedelta(weeks=1)),
}

_ISO_START = re.compile(r"\d{4}-\d{2}-\d{2}(?:[Tt ]|$)")
_AMOUNT = r"\d+|an?|one"
_UNIT = "|".join(sorted(_UNITS, key=len, reverse=True))
_DURATION_PART = re.compile(rf"({_AMOUNT})\s*({_UNIT})(?![a-z])\s*(?:and\s+)?")
_RELATIVE = re.compile(r"in\s+(?P<parts>.+)|(?P<parts_before_from_now>.+?)\s+from\s+now")
_DAY = rf"today|tomorrow|(?:(?:next|this|on)\s+)?(?:{'|'.join(_WEEKDAYS)})"
_TIME = r"noon|\d{1,2}(?::\d{2})?\s*(?:am|pm)|\d{1,2}:\d{2}|\d{1,2}"
_DAY_THEN_TIME = re.compile(rf"(?:(?P<day>{_DAY})\s*)?(?:(?:at|@)?\s*(?P<time>{_TIME}))?")
_TIME_THEN_DAY = re.compile(rf"(?:at|@)?\s*(?P<time>{_TIME})\s+(?:on\s+)?(?P<day>{_DAY})")
_CLOCK = re.compile(r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<meridiem>am|pm)?")
_OFFSET_ZONE = re.compile(r"(?:utc|gmt)?(?P<sign>[+-])(?P<hours>\d{1,2})(?::?(?P<minutes>\d{2}))?")


def parse_scheduled_at(value: str, now: datetime) -> datetime:
    """The moment `value` names, as an aware UTC datetime, after `now` and at most 30 days on.

    Raises `ApiError` (422 `validation_error`) for an unreadable value, a moment not in the
    future, or one more than 30 days ahead. `now` must be aware.
    """
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    # Everything is compared in UTC: aware datetimes sharing a tzinfo compare by wall clock.
    now = now.astimezone(UTC)
    moment = _parse_moment(value.strip(), now)
    if moment <= now:
        raise validation_error(NOT_IN_FUTURE_MESSAGE)
    if moment - now > MAX_SCHEDULE_AHEAD:
        raise validation_error(TOO_FAR_MESSAGE)
    return moment


def _parse_moment(value: str, now: datetime) -> datetime:
    """`value` as a UTC datetime (not yet checked against the window)."""
    if _ISO_START.match(value):
        return _parse_iso(value)
    # Commas and the dots of "a.m." carry no meaning here; one space separates words.
    text = " ".join(value.lower().replace(",", " ").replace(".m.", "m").split())
    relative = _RELATIVE.fullmatch(text)
    if relative:
        return now + _parse_duration(relative["parts"] or relative["parts_before_from_now"])
    return _parse_wall_time(text, value.replace(",", " ").split()[-1] if text else "", now)


def _parse_iso(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise _invalid() from None
    # An ISO date without an offset is read as UTC.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # within a day of datetime's range: year 1 or 9999
        message = TOO_FAR_MESSAGE if moment.year > 1 else NOT_IN_FUTURE_MESSAGE
        raise validation_error(message) from None


def _parse_duration(text: str) -> timedelta:
    total = timedelta()
    position = 0
    while position < len(text):
        part = _DURATION_PART.match(text, position)
        if part is None:
            raise _invalid()
        amount = part[1]
        # Bounded before converting so that huge numbers cannot overflow timedelta.
        if len(amount) > 6:
            raise validation_error(TOO_FAR_MESSAGE)
        total += (1 if amount in ("a", "an", "one") else int(amount)) * _UNITS[part[2]]
        if total > MAX_SCHEDULE_AHEAD:
            raise validation_error(TOO_FAR_MESSAGE)
        position = part.end()
    return total


def _parse_wall_time(text: str, original_last_word: str, now: datetime) -> datetime:
    words = text.split()
    zone: tzinfo = UTC
    if len(words) > 1:
        # The zone, when given, is the last word; IANA names keep their original spelling.
        found = _zone_named(original_last_word)
        if found is not None:
            zone = found
            text = " ".join(words[:-1])
    match = _DAY_THEN_TIME.fullmatch(text) or _TIME_THEN_DAY.fullmatch(text)
    if match is None or (match["day"] is None and match["time"] is None):
        raise _invalid()
    day, clock = match["day"], match["time"]
    local_now = now.astimezone(zone)
    today = local_now.date()
    time_of_day = _parse_clock(clock) if clock else local_now.time()

    if day is None:
        candidate = _at(today, time_of_day, zone)
        return candidate if candidate > now else _at(today + timedelta(days=1), time_of_day, zone)
    if day == "today":
        return _at(today, time_of_day, zone)
    if day == "tomorrow":
        return _at(today + timedelta(days=1), time_of_day, zone)

    qualifier, _, weekday_name = day.rpartition(" ")
    days_ahead = (_WEEKDAYS[weekday_name] - today.weekday()) % 7
    if qualifier == "next":
        return _at(today + timedelta(days=days_ahead or 7), time_of_day, zone)
    candidate = _at(today + timedelta(days=days_ahead), time_of_day, zone)
    return (
        candidate
        if candidate > now
        else _at(today + timedelta(days=days_ahead + 7), time_of_day, zone)
    )


def _parse_clock(text: str) -> time:
    if text == "noon":
        return time(12, 0)
    match = _CLOCK.fullmatch(text)
    if match is None:
        raise _invalid()
    hour, minute = int(match["hour"]), int(match["minute"] or 0)
    meridiem = match["meridiem"]
    if minute > 59:
        raise _invalid()
    if meridiem is None:
        if hour > 23:
            raise _invalid()
        return time(hour, minute)
    if not 1 <= hour <= 12:
        raise _invalid()
    # 12am is midnight, 12pm is noon.
    return time(hour % 12 + (12 if meridiem == "pm" else 0), minute)


def _at(day: date, time_of_day: time, zone: tzinfo) -> datetime:
    """The wall time `time_of_day` of `day` in `zone`, as UTC.

    fold=0: a skipped wall time takes the offset before the change, a repeated one its first
    occurrence (see the module docstring)."""
    local = datetime.combine(day, time_of_day.replace(fold=0), tzinfo=zone)
    return local.astimezone(UTC)


def _zone_named(word: str) -> tzinfo | None:
    lowered = word.lower()
    key = _REGIONAL_ZONES.get(lowered) or _FIXED_ZONES.get(lowered)
    if key is None:
        key = _iana_zone_keys().get(lowered)
    if key is not None:
        return zoneinfo.ZoneInfo(key)
    offset = _OFFSET_ZONE.fullmatch(lowered)
    if offset is not None and lowered.startswith(("utc", "gmt")):
        hours, minutes = int(offset["hours"]), int(offset["minutes"] or 0)
        if hours > 14 or minutes > 59:
            return None
        sign = -1 if offset["sign"] == "-" else 1
        return timezone(sign * timedelta(hours=hours, minutes=minutes))
    return None


@cache
def _iana_zone_keys() -> dict[str, str]:
    """IANA zone names by their lower-case spelling. Only names from this index reach
    `ZoneInfo`, so user text is never used as a path into the zone database."""
    return {key.lower(): key for key in zoneinfo.available_timezones()}


def _invalid() -> ApiError:
    return validation_error(INVALID_FORMAT_MESSAGE)
