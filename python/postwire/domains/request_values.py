"""The values a request may give a domain (`POST /domains`, `PATCH /domains/{id}`), as parsed
from JSON (None: absent), checked: 422 `validation_error` names the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from postwire.domains.records import parse_subdomain_label
from postwire.errors import validation_error

REGIONS: Final = ("us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1")
TLS_MODES: Final = ("opportunistic", "enforced")
Tls = Literal["opportunistic", "enforced"]


def parse_region(value: object) -> str:
    if value is None:
        return REGIONS[0]
    if value not in REGIONS:
        raise validation_error(f"The `region` field must be one of {', '.join(REGIONS)}.")
    return value


def parse_tls(value: object) -> Tls | None:
    if value is None:
        return None
    if value not in TLS_MODES:
        raise validation_error("The `tls` field must be `opportunistic` or `enforced`.")
    return value


def parse_bool(field_name: str, value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise validation_error(f"The `{field_name}` field must be a boolean.")
    return value


def parse_tracking_subdomain(value: object) -> str | None:
    return None if value is None else parse_subdomain_label("tracking_subdomain", value)


def parse_capabilities(value: object, current: Mapping[str, str]) -> dict[str, str]:
    """`{"sending": .., "receiving": ..}` over `current`; at least one enabled, no receiving."""
    merged = {"sending": "enabled", "receiving": "disabled", **current}
    if value is not None:
        if not isinstance(value, dict) or not set(value) <= {"sending", "receiving"}:
            raise validation_error(
                "The `capabilities` field must be an object with `sending` and `receiving`."
            )
        for capability, state in value.items():
            if state not in ("enabled", "disabled"):
                raise validation_error(
                    f"The `capabilities.{capability}` field must be `enabled` or `disabled`."
                )
            merged[capability] = state
    if merged["receiving"] == "enabled":
        raise validation_error(
            "This server does not receive mail: `capabilities.receiving` must be `disabled`."
        )
    if merged["sending"] != "enabled":
        raise validation_error("At least one of the domain's capabilities must be enabled.")
    return merged
