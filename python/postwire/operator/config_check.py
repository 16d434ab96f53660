"""`postwire config check`: the configuration `serve` would run with, every key with its value
and where that value came from: a default, the file, an environment variable or a flag.

The values are the loaded `Config` itself (so a computed default, such as `api.public_url`
from `api.listen`, shows as computed); the origins come from the same layering `load_config`
does (`config.key_origins`). Secrets (OAuth client secrets, relay credentials) are masked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from postwire.config import KEYS, Config, env_var_name, key_origins
from postwire.operator.output import table

# Keys whose values are credentials: shown as set or not, never printed.
SECRET_KEYS = frozenset(
    {"auth.google_client_secret", "auth.github_client_secret", "delivery.route_auth"}
)
# Defaults computed from other keys when the key is not set.
COMPUTED = {
    "api.public_url": "computed from api.listen",
    "dashboard.public_url": "computed from dashboard.listen",
    "delivery.helo_name": "computed: this host's name",
}


def effective_config(
    config: Config, flags: Mapping[str, str], environ: Mapping[str, str] = os.environ
) -> list[dict[str, Any]]:
    """Every key, in the order of the reference, as {key, value, origin, source}: `origin` is
    default, file, environment or flag; `source` says which (`flags`: key -> the flag that set
    it, such as `sandbox` -> `--sandbox`)."""
    origins = key_origins(config.config_file, environ)
    rows = []
    for name in KEYS:
        origin, source = _origin(name, origins.get(name), flags.get(name))
        rows.append(
            {
                "key": name,
                "value": _shown(name, _value(config, name)),
                "origin": origin,
                "source": source,
                "env": env_var_name(name),
            }
        )
    return rows


def _origin(name: str, described: str | None, flag: str | None) -> tuple[str, str]:
    if flag is not None:
        return "flag", flag
    if described is None:
        return "default", COMPUTED.get(name, "built-in default")
    if described.startswith("in "):
        return "file", described[3:]
    if described.startswith("from environment variable "):
        return "environment", described.removeprefix("from environment variable ")
    return "default", described


def _value(config: Config, name: str) -> Any:
    section, _, field_name = name.rpartition(".")
    holder = getattr(config, section) if section else config
    return getattr(holder, field_name)


def _shown(name: str, value: Any) -> Any:
    if name in SECRET_KEYS and value:
        return "(set, not shown)"
    return _json_value(value)


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [_json_value(item) for item in value]
    return str(value)  # addresses, networks


def describe_config(rows: list[dict[str, Any]], config_file: Path | None) -> str:
    where = "embedded default (no config file)" if config_file is None else str(config_file)
    shown = [
        {**row, "value": _text(row["value"]), "from": f"{row['origin']}: {row['source']}"}
        for row in rows
    ]
    columns = [("key", "KEY"), ("value", "VALUE"), ("from", "ORIGIN")]
    return f"configuration: {where}\n\n" + table(shown, columns)


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} = {v}" for k, v in value.items()) or "{}"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if value is None:
        return "(unset)"
    return str(value)
