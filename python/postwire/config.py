"""Postwire's configuration: one frozen tree, loaded from TOML plus `POSTWIRE_*` overrides.

    Config
    ├── data_dir          where the spool and everything else lives
    ├── sandbox           hold every message in a local inbox (one machine, loopback only)
    ├── log_format        log lines as text or as JSON objects
    ├── api               ApiConfig: REST API and dashboard
    ├── smtp              SmtpConfig: submission listeners, TLS, size limit, trusted networks
    ├── dns               DnsConfig: nameservers for MX and domain verification
    ├── delivery          DeliveryConfig: HELO name, port, routes (transport map / smarthost),
    │                     the IPs that SPF records authorise, retry age, connections per site
    ├── domains           DomainsConfig: sending domains' DNS records and their re-verification
    ├── webhooks          WebhooksConfig: SSRF guard
    ├── broadcasts        BroadcastsConfig: the engine's pace and page size, editor uploads
    ├── dashboard, auth   DashboardConfig, AuthConfig: the dashboard and how people sign in
    ├── insights          InsightsConfig: per-email deliverability checks, rspamd
    ├── metrics           MetricsConfig: event counters, the Prometheus listener
    ├── spool             SpoolConfig: LMDB map size and group-commit tuning
    └── store             StoreConfig: where the tables live (LMDB beside the spool, or
                          PostgreSQL for several nodes)

`find_config_file(given, environ)` says which file every `postwire` command reads (see
docs/configuration.md, "Which configuration"). `load_config(path, environ)` layers, lowest first:
defaults (the embedded default when no file is given, production defaults when one is), the file,
then `POSTWIRE_<SECTION>_<KEY>` variables. The dataclass field types drive parsing: every key is
found by introspecting these classes, so adding a field adds a key, its environment variable and
its type check. Any invalid or unknown key is a `ConfigError` that names it. docs/configuration.md
documents every key.
"""

import dataclasses
import difflib
import ipaddress
import json
import os
import re
import socket
import tomllib
import types
import typing
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from postwire.errors import ConfigError

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ENV_PREFIX = "POSTWIRE_"
# Names the config file when --config is not given; not a key.
CONFIG_ENV_VAR = "POSTWIRE_CONFIG"
SYSTEM_CONFIG_FILE = Path("/etc/postwire/postwire.toml")


def _local_fqdn() -> str:
    return socket.getfqdn()


def _empty_routes() -> Mapping[str, str]:
    return types.MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """The REST API and the dashboard, served over HTTP."""

    listen: str = "127.0.0.1:3000"
    # Base of links Postwire puts in mail and pages (tracking, dashboard); no trailing slash.
    public_url: str = "http://127.0.0.1:3000"
    # Requests per second per team, across all its keys; 0 means unlimited (Resend uses 10).
    rate_limit: int = 0
    # Connections one client address (an IPv6 /64) may hold open to each HTTP listener (the
    # API, the dashboard, the metrics listener), counted per process; more are closed. 0: no cap.
    max_connections_per_client: int = 256
    # Seconds a request's body may take after its head, one more per KiB received; then 408.
    body_timeout_seconds: int = 30


@dataclass(frozen=True, slots=True)
class SmtpConfig:
    """SMTP submission: listeners, TLS material, size limit and networks that relay without AUTH."""

    starttls_listen: tuple[str, ...] = ("127.0.0.1:2587",)
    tls_listen: tuple[str, ...] = ("127.0.0.1:2465",)
    # Both unset: a self-signed certificate is generated under data_dir on first start.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_message_size: int = 40 * 1024 * 1024
    trusted_networks: tuple[IPNetwork, ...] = ()
    # Failed AUTH attempts a client address may make per minute; then AUTH is refused until
    # the minute is over, so API keys cannot be guessed at line speed. 0: no limit.
    max_auth_failures: int = 10
    # Sessions one client address (an IPv6 /64) may hold open, counted per process; more are
    # told 421 and closed. 0: no cap.
    max_connections_per_client: int = 100
    # A session that sends nothing for this long is closed (RFC 5321 4.5.3.2.7: 5 minutes).
    idle_timeout_seconds: int = 300

    def is_trusted(self, address: str) -> bool:
        """Whether a peer address lies in one of the trusted networks."""
        try:
            peer = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(peer in network for network in self.trusted_networks)


@dataclass(frozen=True, slots=True)
class DnsConfig:
    """Resolvers for MX lookups and domain verification."""

    # Normalised to "ip:port" (IPv6 as "[ip]:port"); empty means the system resolver.
    nameservers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeliveryConfig:
    """Outbound delivery to recipients' MX hosts."""

    helo_name: str = field(default_factory=_local_fqdn)
    port: int = 25
    # Lower-case domain pattern ("example.com", "*.example.com", "*") -> "host:port".
    routes: Mapping[str, str] = field(default_factory=_empty_routes)
    # For routed mail, by the same patterns: "user:password" for AUTH PLAIN at the route's
    # host (sent only over TLS), and its TLS policy ("opportunistic", "enforced" or "none").
    route_auth: Mapping[str, str] = field(default_factory=_empty_routes)
    route_tls: Mapping[str, str] = field(default_factory=_empty_routes)
    # Addresses mail leaves from, normalised; the SPF record of every domain lists them.
    # Empty: SPF authorises `a:<helo_name>` instead.
    sending_ips: tuple[str, ...] = ()
    # A message still undelivered this long after its first attempt bounces.
    max_age_hours: int = 72
    # Connections open at once to one destination (its MX host set, or a route).
    max_connections_per_site: int = 10
    # For tests and labs only: let MX and A/AAAA answers lead to loopback, private, link-local
    # and this host's own addresses. Routes may always name such hosts.
    allow_private_destinations: bool = False

    def route_for(self, domain: str) -> str | None:
        """The "host:port" that mail for `domain` goes to instead of its MX, if any.

        The exact domain wins over "*.parent" patterns (longest parent first), which win over "*".
        """
        return _match_pattern(self.routes, domain)

    def route_auth_for(self, domain: str) -> tuple[str, str] | None:
        """(user, password) for AUTH at the route `domain`'s mail takes, if configured."""
        credentials = _match_pattern(self.route_auth, domain)
        if credentials is None:
            return None
        user, _, password = credentials.partition(":")
        return user, password

    def route_tls_for(self, domain: str) -> str | None:
        """The TLS policy of the route `domain`'s mail takes, if configured."""
        return _match_pattern(self.route_tls, domain)


def _match_pattern(patterns: Mapping[str, str], domain: str) -> str | None:
    """The value of the most specific pattern matching `domain`: exact, then "*.parent"
    (longest parent first), then "*"."""
    domain = domain.lower().rstrip(".")
    if domain in patterns:
        return patterns[domain]
    labels = domain.split(".")
    for start in range(1, len(labels)):
        value = patterns.get("*." + ".".join(labels[start:]))
        if value is not None:
            return value
    return patterns.get("*")


@dataclass(frozen=True, slots=True)
class DomainsConfig:
    """Sending domains: the DNS records Postwire asks for and how often it re-checks them."""

    # MX target of each domain's return-path subdomain, where bounces come back.
    # None: delivery.helo_name.
    bounce_host: str | None = None
    verify_interval_seconds: int = 3600
    # New domains publish their DKIM key at <selector>._domainkey.<domain>; existing ones keep
    # the selector they were created with.
    dkim_selector: str = "postwire"
    # RSA size of the DKIM key made for each new domain (existing ones keep theirs): 1024 for
    # DNS hosts that cannot publish a TXT record longer than one 255-character string.
    dkim_key_bits: int = 2048


@dataclass(frozen=True, slots=True)
class WebhooksConfig:
    """Outgoing webhook POSTs."""

    # False refuses targets that resolve to loopback, private or link-local addresses (SSRF).
    allow_private_targets: bool = False


@dataclass(frozen=True, slots=True)
class BroadcastsConfig:
    """The broadcast engine, which walks segments and enqueues their messages."""

    # Messages a second the engine enqueues at most, across all broadcasts.
    rate: int = 5000
    # Members prepared and committed together (with the walk's cursor) in one batch.
    page_size: int = 200
    # Largest image the broadcast editor accepts for upload, in bytes.
    max_image_bytes: int = 5 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """The dashboard: server-rendered pages on an origin of their own, so its cookies never
    reach the API."""

    listen: str = "127.0.0.1:3001"
    # The address people open: links in invitation and reset mail, OAuth redirect URIs, and the
    # WebAuthn relying party (its host; an IP address cannot be one, hence localhost). Use
    # https in production: session cookies are Secure. Default: from `listen`.
    public_url: str = "http://localhost:3001"
    # A session ends after this long without a request, and this long after login regardless.
    session_idle_minutes: int = 720
    session_max_hours: int = 168


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """How people sign in to the dashboard."""

    # "open": anyone may sign up (and gets a team of their own); "invite_only": only through
    # an invitation, or `postwire users create`.
    signup: str = "invite_only"
    # The sender of invitations, password resets and address checks ("Name <a@b>"), under a
    # verified domain. Empty: the links are written to the log instead.
    mail_from: str = ""
    # Failed password sign-ins allowed per account from one client address within 15 minutes
    # (half of it per minute, twice per hour, four times per day); past it, that address waits.
    max_login_failures: int = 10
    # The same from one client address across accounts (an IPv6 client counts per /64).
    max_login_failures_per_address: int = 50
    # Accounts one client address may open by sign-up per hour (three times it per day).
    max_signups_per_address: int = 5
    # Argon2 hashes and checks (64 MiB each) a process runs at once, and how many more may
    # wait; past that a request is answered 503 rather than queued.
    password_checks_at_once: int = 2
    password_checks_waiting: int = 16
    # Invitations a team may send per hour, and invitations one address may receive per hour
    # from all teams together; inviting an address again counts.
    invitations_per_team_per_hour: int = 50
    invitations_per_address_per_hour: int = 3
    # Sign in with Google (OpenID Connect). Empty client id: the button is not shown.
    google_client_id: str = ""
    google_client_secret: str = ""
    google_issuer: str = "https://accounts.google.com"
    # Sign in with GitHub (OAuth 2.0 and its user API). Empty client id: not shown.
    github_client_id: str = ""
    github_client_secret: str = ""
    github_authorize_url: str = "https://github.com/login/oauth/authorize"
    github_token_url: str = "https://github.com/login/oauth/access_token"
    github_api_url: str = "https://api.github.com"
    # A team's SSO issuer or SAML metadata URL is a tenant's choice: off, such URLs may not
    # lead to loopback, private or link-local addresses (SSRF guard). For tests and labs.
    allow_private_issuers: bool = False


@dataclass(frozen=True, slots=True)
class InsightsConfig:
    """Deliverability insights: checks computed once for each email and stored with it."""

    enabled: bool = True
    # rspamd's controller or normal worker (`http://host:11333`): each email is scanned and its
    # score and symbols become insights. Empty: no content scoring.
    rspamd_url: str = ""
    # Authentication insights are checked again against live DNS this often.
    recheck_hours: int = 24


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """Counters kept with events, and the Prometheus listener for operators."""

    # `GET /metrics` in Prometheus text format, on a listener of its own. Empty: none.
    listen: str = "127.0.0.1:9464"
    # Count events into the per-team metrics (the Metrics page, `GET /emails/metrics`). Off
    # only to measure what counting costs.
    count_events: bool = True
    # How often each domain's health is judged from its counts (its first round at start-up).
    health_interval_seconds: int = 30


@dataclass(frozen=True, slots=True)
class SpoolConfig:
    """The LMDB spool under data_dir/spool."""

    # LMDB reserves this much address space up front; the file only grows as data is written.
    map_size: int = 8 * 1024**3
    commit_window_us: int = 1000
    max_batch: int = 512


STORE_BACKENDS = ("lmdb", "postgresql")


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The table store: teams, keys, domains, emails, contacts... (docs/storage.md)."""

    # "lmdb": in this node's LMDB (the embedded default); "postgresql": in the database at
    # `url`, shared by every node.
    backend: str = "lmdb"
    # postgresql://user:password@host:port/database (backend "postgresql" only).
    url: str = ""
    # The LMDB backend's own environment directory. Empty: the spool's environment, where a
    # message and its records commit together; set, the tables commit apart from the spool,
    # as they do on PostgreSQL.
    path: str = ""


@dataclass(frozen=True, slots=True)
class Config:
    """The whole configuration. Build it with `load_config`; tests may construct it directly."""

    data_dir: Path
    # Service processes sharing the spool: SMTP submission and delivery run in each, so they
    # use more than one core. 0: one per CPU core available to the service.
    processes: int = 1
    # Hold every message in a local inbox instead of delivering it (`serve --sandbox`): only
    # while every listener is on loopback (`check_sandbox_allowed`).
    sandbox: bool = False
    # Log lines on stderr: "text" (a line of words) or "json" (one JSON object a line).
    log_format: str = "text"
    api: ApiConfig = field(default_factory=ApiConfig)
    smtp: SmtpConfig = field(default_factory=SmtpConfig)
    dns: DnsConfig = field(default_factory=DnsConfig)
    delivery: DeliveryConfig = field(default_factory=DeliveryConfig)
    domains: DomainsConfig = field(default_factory=DomainsConfig)
    webhooks: WebhooksConfig = field(default_factory=WebhooksConfig)
    broadcasts: BroadcastsConfig = field(default_factory=BroadcastsConfig)
    dashboard: DashboardConfig = field(default_factory=DashboardConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    insights: InsightsConfig = field(default_factory=InsightsConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    spool: SpoolConfig = field(default_factory=SpoolConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    # The file this was loaded from (None: embedded default). Not a key: it cannot be set.
    config_file: Path | None = field(default=None, metadata={"key": False})


def process_count(config: Config) -> int:
    """How many service processes `config` asks for; `processes = 0` means one per usable core."""
    if config.processes > 0:
        return config.processes
    return max(1, len(os.sched_getaffinity(0)))


EMBEDDED_DATA_DIR = Path("postwire-data")
SIGNUP_MODES = ("open", "invite_only")
LOG_FORMATS = ("text", "json")

# Keys whose production default differs from the embedded one (the dataclass defaults).
# The API stays on loopback: it speaks plain HTTP, so exposing it is a deliberate choice
# (a TLS-terminating proxy in front, or api.listen set explicitly).
PRODUCTION_DEFAULTS: Mapping[str, object] = types.MappingProxyType(
    {
        "data_dir": "/var/lib/postwire",
        "processes": 0,
        "smtp.starttls_listen": ["0.0.0.0:25", "0.0.0.0:587", "0.0.0.0:2587"],
        "smtp.tls_listen": ["0.0.0.0:465", "0.0.0.0:2465"],
    }
)


# --- keys, found by introspection --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Key:
    name: str  # dotted: "data_dir", "api.listen"
    section: str | None
    field_name: str
    type: Any


def _collect_keys() -> tuple[dict[str, _Key], dict[str, type]]:
    keys: dict[str, _Key] = {}
    sections: dict[str, type] = {}
    hints = typing.get_type_hints(Config)
    for top in dataclasses.fields(Config):
        if not top.metadata.get("key", True):
            continue
        tp = hints[top.name]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            sections[top.name] = tp
            section_hints = typing.get_type_hints(tp)
            for sub in dataclasses.fields(tp):
                name = f"{top.name}.{sub.name}"
                keys[name] = _Key(name, top.name, sub.name, section_hints[sub.name])
        else:
            keys[top.name] = _Key(top.name, None, top.name, tp)
    return keys, sections


KEYS, _SECTIONS = _collect_keys()


def env_var_name(key: str) -> str:
    """The environment variable that overrides a dotted key: "api.listen" -> POSTWIRE_API_LISTEN."""
    return ENV_PREFIX + key.replace(".", "_").upper()


def find_config_file(given: Path | None, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The config file a `postwire` command reads, so that every command finds `serve`'s data
    wherever it runs: `given` (--config), else $POSTWIRE_CONFIG, else the first file that exists
    of $XDG_CONFIG_HOME/postwire/postwire.toml (~/.config/...) and /etc/postwire/postwire.toml.
    None: the embedded default."""
    if given is not None:
        return given
    if environ.get(CONFIG_ENV_VAR):
        return Path(environ[CONFIG_ENV_VAR]).expanduser()
    config_home = environ.get("XDG_CONFIG_HOME") or os.path.join(
        environ.get("HOME", "~"), ".config"
    )
    for candidate in (Path(config_home, "postwire", "postwire.toml"), SYSTEM_CONFIG_FILE):
        if candidate.expanduser().is_file():
            return candidate.expanduser()
    return None


# --- addresses ---------------------------------------------------------------------------------

_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
                       r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$")  # fmt: skip
_DOMAIN_PATTERN = re.compile(r"^(\*|(\*\.)?[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?"
                             r"(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*)$")  # fmt: skip


def split_host_port(value: str, *, default_port: int | None = None) -> tuple[str, int]:
    """Split "host:port", "[ipv6]:port" (or a bare host when `default_port` is given).

    Returns the host without brackets. Raises ValueError saying what is wrong.
    """
    if default_port is not None and ":" in value and not value.startswith("["):
        try:  # a bare IPv6 address is unambiguous only when no port may follow
            return str(ipaddress.IPv6Address(value)), default_port
        except ValueError:
            pass
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise ValueError("missing ']' after an IPv6 address")
        host, rest = value[1:end], value[end + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host!r} in brackets is not an IPv6 address") from None
        if rest and not rest.startswith(":"):
            raise ValueError("expected ':port' after ']'")
        port_text: str | None = rest[1:] if rest else None
    else:
        host, sep, after = value.rpartition(":")
        if not sep:
            host, port_text = value, None
        else:
            port_text = after
        if ":" in host or (port_text is None and value.count(":") > 1):
            raise ValueError("an IPv6 address needs brackets, as in [::1]:25")
        if not host:
            raise ValueError("the host is missing")
        if not _is_ipv4(host) and not _HOSTNAME.match(host):
            raise ValueError(f"{host!r} is not a valid host name or IPv4 address")
    if port_text is None:
        if default_port is None:
            raise ValueError("the port is missing (expected host:port)")
        return host, default_port
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        raise ValueError(f"{port_text!r} is not a port number (0-65535)")
    return host, int(port_text)


def join_host_port(host: str, port: int) -> str:
    """The inverse of `split_host_port`: brackets an IPv6 host."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


# --- conversion of one value -------------------------------------------------------------------


class _Origin:
    """Where a value came from, for error messages, and the base of relative paths."""

    def __init__(self, description: str, base_dir: Path) -> None:
        self.description = description
        self.base_dir = base_dir

    def error(self, message: str) -> ConfigError:
        return ConfigError(f"{message} ({self.description})" if self.description else message)


_TYPE_NAMES: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    bool: "a boolean (true or false)",
    Path: "a path (string)",
}


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is tuple:
        return "a list of strings"
    if origin is Mapping:
        return "a table of strings"
    if origin in (types.UnionType, typing.Union):
        return _describe(next(a for a in typing.get_args(tp) if a is not type(None)))
    if tp == IPNetwork:
        return "a CIDR string"
    return _TYPE_NAMES.get(tp, str(tp))


def _shown(value: object) -> str:
    return repr(value) if not isinstance(value, dict) else "a table"


def _convert(key: _Key, value: object, origin: _Origin) -> object:
    """Check a TOML-shaped value against the key's type and convert it to the field's type."""
    tp = key.type

    def wrong() -> ConfigError:
        return origin.error(f"config key {key.name!r} must be {_describe(tp)}, got {_shown(value)}")

    type_origin = typing.get_origin(tp)
    if type_origin in (types.UnionType, typing.Union):  # Optional[...]: None unsets it
        if value is None:
            return None
        (inner,) = (a for a in typing.get_args(tp) if a is not type(None))
        return _convert(_Key(key.name, key.section, key.field_name, inner), value, origin)
    if tp is bool:
        if not isinstance(value, bool):
            raise wrong()
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong()
        return value
    if tp is str:
        if not isinstance(value, str):
            raise wrong()
        return value
    if tp is Path:
        if not isinstance(value, str) or not value:
            raise wrong()
        return origin.base_dir / Path(value).expanduser()
    if type_origin is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise wrong()
        (element,) = typing.get_args(tp)[:1]
        if element == IPNetwork:
            return tuple(_parse_network(key, v, origin) for v in value)
        return tuple(value)
    if type_origin is Mapping:
        if not isinstance(value, dict):
            raise wrong()
        for k, v in value.items():
            if not isinstance(v, str):
                raise origin.error(
                    f"config key {key.name!r} entry {k!r} must be a string, got {_shown(v)}"
                )
        return types.MappingProxyType(dict(value))
    raise AssertionError(f"no conversion for the type of {key.name}: {tp!r}")


def _parse_network(key: _Key, text: str, origin: _Origin) -> IPNetwork:
    try:
        return ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as exc:
        raise origin.error(f"config key {key.name!r} has an invalid CIDR {text!r}: {exc}") from None


# --- environment text -> TOML-shaped value -----------------------------------------------------

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def _parse_literal(text: str, kind: type) -> object | None:
    """A JSON or TOML literal of the given kind (list or dict), or None if `text` is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        try:
            document = tomllib.loads(f"value = {text}")
        except tomllib.TOMLDecodeError:
            return None
        if set(document) != {"value"}:
            return None
        value = document["value"]
    return value if isinstance(value, kind) else None


def _from_env_text(key: _Key, text: str, origin: _Origin) -> object:
    """Turn an environment string into the value a TOML file would hold for this key."""
    tp = key.type
    type_origin = typing.get_origin(tp)
    stripped = text.strip()

    def wrong() -> ConfigError:
        return origin.error(f"config key {key.name!r} must be {_describe(tp)}, got {text!r}")

    if type_origin in (types.UnionType, typing.Union):
        if not stripped:
            return None  # an empty variable unsets an optional key
        (inner,) = (a for a in typing.get_args(tp) if a is not type(None))
        return _from_env_text(_Key(key.name, key.section, key.field_name, inner), text, origin)
    if tp is bool:
        if stripped.lower() in _TRUE:
            return True
        if stripped.lower() in _FALSE:
            return False
        raise wrong()
    if tp is int:
        try:
            return int(stripped)
        except ValueError:
            raise wrong() from None
    if tp in (str, Path):
        return stripped
    if type_origin is tuple:
        if not stripped:
            return []
        # "[::1]:25" is no array literal, so it falls through to the comma-separated form.
        if stripped.startswith("[") and stripped.endswith("]"):
            literal = _parse_literal(stripped, list)
            if literal is not None:
                return literal
        return [part.strip() for part in stripped.split(",") if part.strip()]
    if type_origin is Mapping:
        if not stripped:
            return {}
        literal = _parse_literal(stripped, dict)
        if literal is None:
            raise origin.error(
                f"config key {key.name!r} must be a JSON object or TOML inline table, got {text!r}"
            )
        return literal
    raise AssertionError(f"no environment parsing for the type of {key.name}: {tp!r}")


# --- validation of converted values ------------------------------------------------------------


def _check_listen(key: str, value: str) -> str:
    try:
        split_host_port(value)
    except ValueError as exc:
        raise ConfigError(
            f"config key {key!r} must be a listen address host:port, got {value!r}: {exc}"
        ) from None
    return value


def _check_listen_list(key: str, value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_check_listen(key, v) for v in value)


def _check_url(key: str, value: str) -> str:
    problem = None
    try:
        parts = urllib.parse.urlsplit(value)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        problem = str(exc)
    else:
        if parts.scheme not in ("http", "https"):
            problem = "the scheme must be http or https"
        elif not parts.hostname:
            problem = "the host is missing"
        elif parts.query or parts.fragment:
            problem = "it must not have a query or fragment"
    if problem:
        raise ConfigError(f"config key {key!r} must be an http(s) URL, got {value!r}: {problem}")
    return value.rstrip("/")


def _check_nameservers(key: str, value: tuple[str, ...]) -> tuple[str, ...]:
    normalised = []
    for entry in value:
        try:
            host, port = split_host_port(entry, default_port=53)
            ipaddress.ip_address(host)
        except ValueError as exc:
            raise ConfigError(
                f"config key {key!r} must list IP addresses with an optional port "
                f"(1.1.1.1, [::1]:5353), got {entry!r}: {exc}"
            ) from None
        if port == 0:
            raise ConfigError(f"config key {key!r} has port 0 in {entry!r}")
        normalised.append(join_host_port(host, port))
    return tuple(normalised)


def _check_helo_name(key: str, value: str) -> str:
    if not value or not value.isascii() or any(c.isspace() or not c.isprintable() for c in value):
        raise ConfigError(
            f"config key {key!r} must be a host name (printable ASCII, no spaces), got {value!r}"
        )
    return value


def _check_ip_list(key: str, value: tuple[str, ...]) -> tuple[str, ...]:
    normalised = []
    for entry in value:
        try:
            normalised.append(str(ipaddress.ip_address(entry.strip())))
        except ValueError:
            raise ConfigError(
                f"config key {key!r} must list IPv4 or IPv6 addresses, got {entry!r}"
            ) from None
    return tuple(normalised)


def _check_host_name(key: str, value: str | None) -> str | None:
    if value is None:
        return None
    host = value.strip().lower().rstrip(".")
    if not _HOSTNAME.match(host) or _is_ipv4(host):
        raise ConfigError(f"config key {key!r} must be a host name, got {value!r}")
    return host


_DKIM_SELECTOR = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
                            r"(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$")  # fmt: skip


def _check_dkim_selector(key: str, value: str) -> str:
    selector = value.strip().lower()
    if not _DKIM_SELECTOR.match(selector):
        raise ConfigError(
            f"config key {key!r} must be DNS labels of letters, digits and hyphens, got {value!r}"
        )
    return selector


DKIM_KEY_SIZES = (1024, 2048, 3072, 4096)


def _check_dkim_key_bits(key: str, value: int) -> int:
    if value not in DKIM_KEY_SIZES:
        sizes = ", ".join(str(size) for size in DKIM_KEY_SIZES)
        raise ConfigError(f"config key {key!r} must be one of {sizes}, got {value}")
    return value


def _check_port(key: str, value: int) -> int:
    if not 1 <= value <= 65535:
        raise ConfigError(f"config key {key!r} must be a port number (1-65535), got {value}")
    return value


def _check_routes(key: str, value: Mapping[str, str]) -> Mapping[str, str]:
    routes = {}
    for pattern, target in value.items():
        normalised = pattern.strip().lower().rstrip(".")
        if not _DOMAIN_PATTERN.match(normalised):
            raise ConfigError(
                f"config key {key!r} has an invalid domain pattern {pattern!r} "
                "(expected example.com, *.example.com or *)"
            )
        try:
            _, port = split_host_port(target)
        except ValueError as exc:
            raise ConfigError(
                f"config key {key!r} entry {pattern!r} must be host:port, got {target!r}: {exc}"
            ) from None
        if port == 0:
            raise ConfigError(f"config key {key!r} entry {pattern!r} has port 0")
        routes[normalised] = target
    return types.MappingProxyType(routes)


def _check_patterns(
    key: str, value: Mapping[str, str], check: Callable[[str], str | None]
) -> Mapping[str, str]:
    """Domain patterns as in `delivery.routes`, each value vetted by `check` (None: fine,
    else what is wrong)."""
    checked = {}
    for pattern, entry in value.items():
        normalised = pattern.strip().lower().rstrip(".")
        if not _DOMAIN_PATTERN.match(normalised):
            raise ConfigError(
                f"config key {key!r} has an invalid domain pattern {pattern!r} "
                "(expected example.com, *.example.com or *)"
            )
        problem = check(entry)
        if problem is not None:
            raise ConfigError(f"config key {key!r} entry {pattern!r} {problem}")
        checked[normalised] = entry
    return types.MappingProxyType(checked)


def _check_route_auth(key: str, value: Mapping[str, str]) -> Mapping[str, str]:
    def credentials(entry: str) -> str | None:
        user, sep, _ = entry.partition(":")
        return None if sep and user else "must be user:password"

    return _check_patterns(key, value, credentials)


def _check_route_tls(key: str, value: Mapping[str, str]) -> Mapping[str, str]:
    def policy(entry: str) -> str | None:
        allowed = ("opportunistic", "enforced", "none")
        return None if entry in allowed else f"must be one of {', '.join(allowed)}"

    return _check_patterns(key, value, policy)


def _check_log_format(key: str, value: str) -> str:
    if value not in LOG_FORMATS:
        raise ConfigError(f"config key {key!r} must be one of {', '.join(LOG_FORMATS)}")
    return value


def _check_store_backend(key: str, value: str) -> str:
    if value not in STORE_BACKENDS:
        raise ConfigError(f"config key {key!r} must be one of {', '.join(STORE_BACKENDS)}")
    return value


def _check_store_url(key: str, value: str) -> str:
    if value and urllib.parse.urlsplit(value).scheme not in ("postgresql", "postgres"):
        raise ConfigError(
            f"config key {key!r} must be a postgresql://user:password@host:port/database URL"
        )
    return value


def _check_signup(key: str, value: str) -> str:
    if value not in SIGNUP_MODES:
        raise ConfigError(f"config key {key!r} must be one of {', '.join(SIGNUP_MODES)}")
    return value


def _at_least(minimum: int) -> Callable[[str, int], int]:
    def check(key: str, value: int) -> int:
        if value < minimum:
            raise ConfigError(f"config key {key!r} must be at least {minimum}, got {value}")
        return value

    return check


_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "processes": _at_least(0),
    "api.listen": _check_listen,
    "api.public_url": _check_url,
    "api.rate_limit": _at_least(0),
    "api.max_connections_per_client": _at_least(0),
    "api.body_timeout_seconds": _at_least(1),
    "smtp.starttls_listen": _check_listen_list,
    "smtp.tls_listen": _check_listen_list,
    "smtp.max_message_size": _at_least(1),
    "smtp.max_auth_failures": _at_least(0),
    "smtp.max_connections_per_client": _at_least(0),
    "smtp.idle_timeout_seconds": _at_least(1),
    "dns.nameservers": _check_nameservers,
    "delivery.helo_name": _check_helo_name,
    "delivery.port": _check_port,
    "delivery.routes": _check_routes,
    "delivery.route_auth": _check_route_auth,
    "delivery.route_tls": _check_route_tls,
    "delivery.sending_ips": _check_ip_list,
    "delivery.max_age_hours": _at_least(1),
    "delivery.max_connections_per_site": _at_least(1),
    "domains.bounce_host": _check_host_name,
    "domains.verify_interval_seconds": _at_least(1),
    "domains.dkim_selector": _check_dkim_selector,
    "domains.dkim_key_bits": _check_dkim_key_bits,
    "broadcasts.rate": _at_least(1),
    "broadcasts.page_size": _at_least(1),
    "dashboard.listen": _check_listen,
    "dashboard.public_url": _check_url,
    "dashboard.session_idle_minutes": _at_least(1),
    "dashboard.session_max_hours": _at_least(1),
    "auth.signup": _check_signup,
    "log_format": _check_log_format,
    "store.backend": _check_store_backend,
    "store.url": _check_store_url,
    "auth.max_login_failures": _at_least(1),
    "auth.max_login_failures_per_address": _at_least(1),
    "auth.max_signups_per_address": _at_least(1),
    "auth.password_checks_at_once": _at_least(1),
    "auth.password_checks_waiting": _at_least(0),
    "auth.invitations_per_team_per_hour": _at_least(1),
    "auth.invitations_per_address_per_hour": _at_least(1),
    "auth.google_issuer": _check_url,
    "auth.github_authorize_url": _check_url,
    "auth.github_token_url": _check_url,
    "auth.github_api_url": _check_url,
    "metrics.health_interval_seconds": _at_least(1),
    "spool.map_size": _at_least(1),
    "spool.commit_window_us": _at_least(0),
    "spool.max_batch": _at_least(1),
}


# --- loading -----------------------------------------------------------------------------------


def _unknown(name: str, origin: _Origin) -> ConfigError:
    message = f"unknown config key {name!r}"
    close = difflib.get_close_matches(name, list(KEYS), n=1)
    if close:
        message += f" (did you mean {close[0]!r}?)"
    return origin.error(message)


def _read_file(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in {path}: {exc}") from None


# A loaded value with where it came from, so later checks can name its source.
_Values = dict[str, tuple[object, _Origin]]


def _values_from_file(document: Mapping[str, object], origin: _Origin) -> _Values:
    values: _Values = {}
    for name, value in document.items():
        if name in KEYS:
            values[name] = _convert(KEYS[name], value, origin), origin
        elif name in _SECTIONS:
            if not isinstance(value, dict):
                raise origin.error(f"config key {name!r} must be a table, got {_shown(value)}")
            for sub_name, sub_value in value.items():
                dotted = f"{name}.{sub_name}"
                if dotted not in KEYS:
                    raise _unknown(dotted, origin)
                values[dotted] = _convert(KEYS[dotted], sub_value, origin), origin
        else:
            raise _unknown(name, origin)
    return values


def _values_from_env(environ: Mapping[str, str], cwd: Path) -> _Values:
    values: _Values = {}
    for var in sorted(environ):
        if not var.startswith(ENV_PREFIX) or var == CONFIG_ENV_VAR:
            continue
        rest = var[len(ENV_PREFIX) :].lower()
        origin = _Origin(f"from environment variable {var}", cwd)
        if rest in KEYS:
            name = rest
        else:
            section, _, sub_name = rest.partition("_")
            name = f"{section}.{sub_name}" if section in _SECTIONS and sub_name else rest
            if name not in KEYS:
                raise _unknown(name, origin)
        key = KEYS[name]
        values[name] = _convert(key, _from_env_text(key, environ[var], origin), origin), origin
    return values


def _default_public_url(listen: str, helo_name: str) -> str:
    host, port = split_host_port(listen)
    if host in ("0.0.0.0", "::"):  # a wildcard is not an address anyone can reach
        host = helo_name
    return "http://" + join_host_port(host, port)


def _layered_values(path: Path | None, environ: Mapping[str, str]) -> tuple[_Values, Path | None]:
    """Every key set by a layer (defaults that differ, the file, the environment), with where
    it came from, and the absolute path of the file."""
    cwd = Path.cwd()
    values: _Values = {}
    config_file = None
    if path is None:
        values["data_dir"] = cwd / EMBEDDED_DATA_DIR, _Origin("embedded default", cwd)
    else:
        config_file = path if path.is_absolute() else cwd / path
        defaults = _Origin("production default", Path("/"))
        for name, default in PRODUCTION_DEFAULTS.items():
            values[name] = _convert(KEYS[name], default, defaults), defaults
        document = _read_file(config_file)
        values.update(_values_from_file(document, _Origin(f"in {config_file}", config_file.parent)))
    values.update(_values_from_env(environ, cwd))
    return values, config_file


def key_origins(path: Path | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Where each key that `load_config(path, environ)` takes from a layer comes from:
    "embedded default", "production default", "in <file>" or "from environment variable <V>".
    Keys left out keep their built-in default (or one computed from other keys)."""
    values, _ = _layered_values(path, environ)
    return {name: origin.description for name, (_, origin) in values.items()}


def load_config(path: Path | None, environ: Mapping[str, str] = os.environ) -> Config:
    """Load the configuration: defaults, then the TOML file at `path`, then POSTWIRE_* variables.

    With `path` None the embedded default applies (data in ./postwire-data, loopback listeners on
    unprivileged ports); with a file, keys it leaves out take production defaults. Relative paths
    in the file resolve against the file's directory, those from the environment against the
    current directory. Raises ConfigError naming the key on any unknown or invalid value.
    """
    values, config_file = _layered_values(path, environ)
    checked: dict[str, object] = {}
    for name, (value, origin) in values.items():
        validate = _VALIDATORS.get(name)
        try:
            checked[name] = validate(name, value) if validate else value
        except ConfigError as exc:
            raise origin.error(str(exc)) from None

    sections: dict[str, dict[str, object]] = {section: {} for section in _SECTIONS}
    top: dict[str, object] = {}
    for name, value in checked.items():
        key = KEYS[name]
        if key.section is None:
            top[key.field_name] = value
        else:
            sections[key.section][key.field_name] = value
    for section, cls in _SECTIONS.items():
        top[section] = cls(**sections[section])
    config = Config(config_file=config_file, **top)  # type: ignore[arg-type]

    # Checks of computed defaults and of keys that go together.
    if "delivery.helo_name" not in checked:
        try:
            _check_helo_name("delivery.helo_name", config.delivery.helo_name)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (the default, from socket.getfqdn(); set it)") from None
    if "api.public_url" not in checked:
        url = _default_public_url(config.api.listen, config.delivery.helo_name)
        config = dataclasses.replace(config, api=dataclasses.replace(config.api, public_url=url))
    if "dashboard.public_url" not in checked:
        host, port = split_host_port(config.dashboard.listen)
        # WebAuthn needs a name, not an address: loopback is opened as localhost.
        url = (
            f"http://localhost:{port}"
            if is_loopback_host(host)
            else _default_public_url(config.dashboard.listen, config.delivery.helo_name)
        )
        dashboard = dataclasses.replace(config.dashboard, public_url=url)
        config = dataclasses.replace(config, dashboard=dashboard)
    if (config.smtp.tls_cert is None) != (config.smtp.tls_key is None):
        raise ConfigError("config keys 'smtp.tls_cert' and 'smtp.tls_key' must be set together")
    if config.store.backend == "postgresql" and not config.store.url:
        raise ConfigError(
            "config key 'store.url' must be set with store.backend = \"postgresql\" "
            "(postgresql://user:password@host:port/database; or POSTWIRE_STORE_URL)"
        )
    if config.store.backend != "postgresql" and config.store.url:
        raise ConfigError("config key 'store.url' is for store.backend = \"postgresql\" only")
    if config.sandbox:
        check_sandbox_allowed(config)
    return config


def enable_sandbox(config: Config) -> Config:
    """`config` with sandbox mode on (`postwire serve --sandbox`); ConfigError where it may not
    be (`check_sandbox_allowed`)."""
    sandboxed = dataclasses.replace(config, sandbox=True)
    check_sandbox_allowed(sandboxed)
    return sandboxed


def check_sandbox_allowed(config: Config) -> None:
    """Refuse sandbox mode unless every listener is on a loopback address.

    The sandbox hides every message from its recipients, so it must never run where anyone but
    this machine's user can reach the service: the production defaults (SMTP on 0.0.0.0) and
    any public listener are refused, whatever turned the sandbox on.
    """
    listeners = [("api.listen", config.api.listen), ("dashboard.listen", config.dashboard.listen)]
    listeners += [("smtp.starttls_listen", value) for value in config.smtp.starttls_listen]
    listeners += [("smtp.tls_listen", value) for value in config.smtp.tls_listen]
    for key, value in listeners:
        host, _ = split_host_port(value)
        if not is_loopback_host(host):
            raise ConfigError(
                f"sandbox mode is for one machine, but config key {key!r} listens on {value}: "
                "with the sandbox on, every listener must be on a loopback address "
                "(127.0.0.1, ::1)"
            )


def is_loopback_host(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 without brackets) is this machine alone."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
