"""Loading the configuration: defaults, TOML, env overrides, and errors that name the key."""

import dataclasses
import ipaddress
import os
from pathlib import Path

import pytest

from postwire.config import (
    KEYS,
    SYSTEM_CONFIG_FILE,
    Config,
    DeliveryConfig,
    env_var_name,
    find_config_file,
    load_config,
    process_count,
    split_host_port,
)
from postwire.errors import ConfigError

HOST = {"POSTWIRE_DELIVERY_HELO_NAME": "mx.test.example"}  # no getfqdn() in unit tests


def write(tmp_path: Path, text: str, name: str = "postwire.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_embedded_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(None, HOST)
    assert config.config_file is None
    assert config.data_dir == tmp_path / "postwire-data"
    assert config.api.listen == "127.0.0.1:3000"
    assert config.api.public_url == "http://127.0.0.1:3000"
    assert config.smtp.starttls_listen == ("127.0.0.1:2587",)
    assert config.smtp.tls_listen == ("127.0.0.1:2465",)
    assert config.smtp.tls_cert is None and config.smtp.tls_key is None
    assert config.smtp.max_message_size == 40 * 1024 * 1024
    assert config.smtp.trusted_networks == ()
    assert config.dns.nameservers == ()
    assert config.delivery.helo_name == "mx.test.example"
    assert config.delivery.port == 25
    assert dict(config.delivery.routes) == {}
    assert config.webhooks.allow_private_targets is False
    assert config.spool.map_size == 8 * 1024**3
    assert config.spool.commit_window_us == 1000
    assert config.spool.max_batch == 512
    assert config.processes == 1


def test_helo_name_defaults_to_fqdn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.getfqdn", lambda: "host.from.fqdn")
    assert DeliveryConfig().helo_name == "host.from.fqdn"
    assert load_config(None, {}).delivery.helo_name == "host.from.fqdn"


def test_construct_directly(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path, delivery=DeliveryConfig(helo_name="x.example"))
    assert config.spool.max_batch == 512


def test_production_defaults_for_keys_a_file_leaves_out(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ""), HOST)
    assert config.config_file == tmp_path / "postwire.toml"
    assert config.data_dir == Path("/var/lib/postwire")
    assert config.api.listen == "127.0.0.1:3000"
    assert config.smtp.starttls_listen == ("0.0.0.0:25", "0.0.0.0:587", "0.0.0.0:2587")
    assert config.smtp.tls_listen == ("0.0.0.0:465", "0.0.0.0:2465")
    assert config.spool.map_size == 8 * 1024**3
    assert config.processes == 0  # one per core
    assert process_count(config) == len(os.sched_getaffinity(0))
    assert process_count(dataclasses.replace(config, processes=3)) == 3


def test_toml_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        data_dir = "/srv/postwire"

        [api]
        listen = "[::]:8080"
        public_url = "https://mail.example.com/"

        [smtp]
        starttls_listen = ["[::1]:587"]
        tls_listen = []
        tls_cert = "tls/cert.pem"
        tls_key = "/etc/ssl/key.pem"
        max_message_size = 10_000_000
        trusted_networks = ["10.0.0.0/8", "fd00::/8"]

        [dns]
        nameservers = ["127.0.0.1:5353", "1.1.1.1", "[::1]:53"]

        [delivery]
        helo_name = "mx.example.com"
        port = 2525

        [delivery.routes]
        "example.org" = "relay.example.net:587"
        "*.Example.COM" = "[::1]:2525"
        "*" = "smarthost:25"

        [webhooks]
        allow_private_targets = true

        [spool]
        map_size = 1073741824
        commit_window_us = 0
        max_batch = 64
        """,
    )
    config = load_config(path, {})
    assert config.data_dir == Path("/srv/postwire")
    assert config.api.listen == "[::]:8080"
    assert config.api.public_url == "https://mail.example.com"  # trailing slash dropped
    assert config.smtp.starttls_listen == ("[::1]:587",)
    assert config.smtp.tls_listen == ()
    assert config.smtp.tls_cert == tmp_path / "tls/cert.pem"  # relative to the file
    assert config.smtp.tls_key == Path("/etc/ssl/key.pem")
    assert config.smtp.max_message_size == 10_000_000
    assert config.smtp.trusted_networks == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("fd00::/8"),
    )
    assert config.smtp.is_trusted("10.1.2.3") and not config.smtp.is_trusted("192.0.2.1")
    assert config.dns.nameservers == ("127.0.0.1:5353", "1.1.1.1:53", "[::1]:53")
    assert config.delivery.helo_name == "mx.example.com"
    assert config.delivery.port == 2525
    assert dict(config.delivery.routes) == {
        "example.org": "relay.example.net:587",
        "*.example.com": "[::1]:2525",
        "*": "smarthost:25",
    }
    assert config.webhooks.allow_private_targets is True
    assert config.spool.map_size == 1024**3
    assert config.spool.commit_window_us == 0
    assert config.spool.max_batch == 64


def test_routes_most_specific_wins() -> None:
    delivery = DeliveryConfig(
        helo_name="h",
        routes={"a.example.com": "exact:25", "*.example.com": "sub:25", "*": "any:25"},
    )
    assert delivery.route_for("A.Example.com.") == "exact:25"
    assert delivery.route_for("b.a.example.com") == "sub:25"
    assert delivery.route_for("example.com") == "any:25"
    assert DeliveryConfig(helo_name="h").route_for("example.com") is None


def test_relative_data_dir_resolves_against_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "etc").mkdir()
    path = write(tmp_path / "etc", 'data_dir = "../data"\n')
    monkeypatch.chdir(tmp_path / "etc")
    config = load_config(Path("postwire.toml"), HOST)
    assert config.config_file == tmp_path / "etc" / "postwire.toml"
    assert config.data_dir == path.parent / "../data"
    assert config.data_dir.resolve() == (tmp_path / "data").resolve()


def test_relative_data_dir_from_env_resolves_against_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(write(tmp_path, ""), {**HOST, "POSTWIRE_DATA_DIR": "here"})
    assert config.data_dir == tmp_path / "here"


# --- environment overrides ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("var", "text", "expected"),
    [
        # str
        ("POSTWIRE_API_LISTEN", "0.0.0.0:8000", ("api", "listen", "0.0.0.0:8000")),
        (
            "POSTWIRE_DELIVERY_HELO_NAME",
            " mx.example.com ",
            ("delivery", "helo_name", "mx.example.com"),
        ),
        # int
        ("POSTWIRE_SMTP_MAX_MESSAGE_SIZE", "1024", ("smtp", "max_message_size", 1024)),
        ("POSTWIRE_DELIVERY_PORT", "2525", ("delivery", "port", 2525)),
        ("POSTWIRE_SPOOL_MAP_SIZE", "1_048_576", ("spool", "map_size", 1048576)),
        # bool
        (
            "POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS",
            "true",
            ("webhooks", "allow_private_targets", True),
        ),
        (
            "POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS",
            "YES",
            ("webhooks", "allow_private_targets", True),
        ),
        (
            "POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS",
            "1",
            ("webhooks", "allow_private_targets", True),
        ),
        (
            "POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS",
            "no",
            ("webhooks", "allow_private_targets", False),
        ),
        (
            "POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS",
            "0",
            ("webhooks", "allow_private_targets", False),
        ),
        (
            "POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS",
            "False",
            ("webhooks", "allow_private_targets", False),
        ),
        # Path and optional Path
        ("POSTWIRE_SMTP_TLS_CERT", "/etc/cert.pem", ("smtp", "tls_cert", Path("/etc/cert.pem"))),
        # lists: comma-separated, JSON, TOML
        (
            "POSTWIRE_SMTP_STARTTLS_LISTEN",
            "[::1]:25",
            ("smtp", "starttls_listen", ("[::1]:25",)),
        ),
        (
            "POSTWIRE_SMTP_STARTTLS_LISTEN",
            "0.0.0.0:25, [::]:25",
            ("smtp", "starttls_listen", ("0.0.0.0:25", "[::]:25")),
        ),
        (
            "POSTWIRE_SMTP_TLS_LISTEN",
            '["127.0.0.1:465", "[::1]:465"]',
            ("smtp", "tls_listen", ("127.0.0.1:465", "[::1]:465")),
        ),
        (
            "POSTWIRE_SMTP_TLS_LISTEN",
            "['127.0.0.1:465']",
            ("smtp", "tls_listen", ("127.0.0.1:465",)),
        ),
        ("POSTWIRE_SMTP_TLS_LISTEN", "", ("smtp", "tls_listen", ())),
        (
            "POSTWIRE_DNS_NAMESERVERS",
            "127.0.0.1:5353,::1",
            ("dns", "nameservers", ("127.0.0.1:5353", "[::1]:53")),
        ),
        (
            "POSTWIRE_SMTP_TRUSTED_NETWORKS",
            "10.0.0.0/8,::1/128",
            (
                "smtp",
                "trusted_networks",
                (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128")),
            ),
        ),
        # dict: JSON object or TOML inline table
        (
            "POSTWIRE_DELIVERY_ROUTES",
            '{"*": "relay:587"}',
            ("delivery", "routes", {"*": "relay:587"}),
        ),
        (
            "POSTWIRE_DELIVERY_ROUTES",
            '{ "*.example.com" = "[::1]:25", "a.org" = "b:25" }',
            ("delivery", "routes", {"*.example.com": "[::1]:25", "a.org": "b:25"}),
        ),
        ("POSTWIRE_DELIVERY_ROUTES", "", ("delivery", "routes", {})),
    ],
)
def test_env_override(var: str, text: str, expected: tuple[str, str, object]) -> None:
    section, name, value = expected
    # The TLS pair must be set together, so both have a base value here.
    base = {**HOST, "POSTWIRE_SMTP_TLS_CERT": "/c.pem", "POSTWIRE_SMTP_TLS_KEY": "/k.pem"}
    config = load_config(None, {**base, var: text})
    actual = getattr(getattr(config, section), name)
    assert (dict(actual) if name == "routes" else actual) == value


def test_env_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[api]\nlisten = "127.0.0.1:1"\n[smtp]\ntls_cert = "c"\ntls_key = "k"\n')
    env = {**HOST, "POSTWIRE_API_LISTEN": "127.0.0.1:2", "POSTWIRE_DATA_DIR": "/d"}
    config = load_config(path, env)
    assert config.api.listen == "127.0.0.1:2"
    assert config.data_dir == Path("/d")
    # An empty variable unsets an optional path.
    env |= {"POSTWIRE_SMTP_TLS_CERT": "", "POSTWIRE_SMTP_TLS_KEY": ""}
    assert load_config(path, env).smtp.tls_cert is None


def test_every_key_has_an_env_var() -> None:
    assert env_var_name("data_dir") == "POSTWIRE_DATA_DIR"
    assert env_var_name("smtp.starttls_listen") == "POSTWIRE_SMTP_STARTTLS_LISTEN"
    assert len({env_var_name(key) for key in KEYS}) == len(KEYS)  # no two keys share one


def test_non_postwire_env_vars_are_ignored() -> None:
    load_config(None, {**HOST, "PATH": "/bin", "POSTWIREX": "1", "postwire_api_listen": "x"})


def test_public_url_follows_api_listen() -> None:
    env = {**HOST, "POSTWIRE_API_LISTEN": "0.0.0.0:8080"}
    assert load_config(None, env).api.public_url == "http://mx.test.example:8080"
    env = {**HOST, "POSTWIRE_API_LISTEN": "[::1]:8080"}
    assert load_config(None, env).api.public_url == "http://[::1]:8080"


# --- errors ------------------------------------------------------------------------------------


def error_of(tmp_path: Path, toml: str | None = None, env: dict[str, str] | None = None) -> str:
    path = write(tmp_path, toml) if toml is not None else None
    with pytest.raises(ConfigError) as caught:
        load_config(path, {**HOST, **(env or {})})
    return str(caught.value)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[api]\nlisen = '127.0.0.1:1'\n", "api.lisen"),
        ("dat_dir = 'x'\n", "dat_dir"),
        ("[smpt]\nstarttls_listen = []\n", "smpt"),
        ("[smtp.tls]\ncert = 'x'\n", "smtp.tls"),
        ("[spool]\nmap_size = 1\nfsync = false\n", "spool.fsync"),
    ],
)
def test_unknown_key_in_file(tmp_path: Path, toml: str, key: str) -> None:
    message = error_of(tmp_path, toml)
    assert f"unknown config key {key!r}" in message
    assert str(tmp_path / "postwire.toml") in message


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    assert "did you mean 'api.listen'" in error_of(tmp_path, "[api]\nlisen = 'x'\n")


@pytest.mark.parametrize(
    ("var", "key"),
    [
        ("POSTWIRE_API_LISEN", "api.lisen"),
        ("POSTWIRE_FOO", "foo"),
        ("POSTWIRE_SPOOL_FSYNC", "spool.fsync"),
        ("POSTWIRE_API", "api"),
    ],
)
def test_unknown_key_in_env(tmp_path: Path, var: str, key: str) -> None:
    message = error_of(tmp_path, env={var: "1"})
    assert f"unknown config key {key!r}" in message
    assert var in message


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            "[smtp]\nmax_message_size = 'abc'\n",
            "'smtp.max_message_size' must be an integer, got 'abc'",
        ),
        ("[smtp]\nmax_message_size = true\n", "'smtp.max_message_size' must be an integer"),
        ("[api]\nlisten = 3000\n", "'api.listen' must be a string, got 3000"),
        ("[api.listen]\nhost = 'x'\n", "'api.listen' must be a string"),
        (
            "[smtp]\nstarttls_listen = '0.0.0.0:25'\n",
            "'smtp.starttls_listen' must be a list of strings",
        ),
        ("[smtp]\ntls_listen = [465]\n", "'smtp.tls_listen' must be a list of strings"),
        (
            "[webhooks]\nallow_private_targets = 'yes'\n",
            "'webhooks.allow_private_targets' must be a boolean",
        ),
        ("data_dir = 5\n", "'data_dir' must be a path"),
        ("api = 5\n", "'api' must be a table"),
        ("[delivery]\nroutes = ['x']\n", "'delivery.routes' must be a table"),
        ("[delivery.routes]\n'a.com' = 25\n", "'delivery.routes' entry 'a.com' must be a string"),
        (
            "[delivery.routes.'a.com']\nhost = 'x'\n",
            "'delivery.routes' entry 'a.com' must be a string",
        ),
    ],
)
def test_wrong_type_in_file(tmp_path: Path, toml: str, expected: str) -> None:
    assert expected in error_of(tmp_path, toml)


@pytest.mark.parametrize(
    ("var", "text", "expected"),
    [
        (
            "POSTWIRE_SMTP_MAX_MESSAGE_SIZE",
            "abc",
            "'smtp.max_message_size' must be an integer, got 'abc'",
        ),
        ("POSTWIRE_DELIVERY_PORT", "", "'delivery.port' must be an integer, got ''"),
        (
            "POSTWIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS",
            "maybe",
            "'webhooks.allow_private_targets' must be a boolean",
        ),
        ("POSTWIRE_DELIVERY_ROUTES", "a=b", "'delivery.routes' must be a JSON object"),
        ("POSTWIRE_SMTP_TLS_LISTEN", "[465]", "'smtp.tls_listen' must be a list of strings"),
        ("POSTWIRE_DATA_DIR", "", "'data_dir' must be a path"),
    ],
)
def test_wrong_type_in_env(tmp_path: Path, var: str, text: str, expected: str) -> None:
    message = error_of(tmp_path, env={var: text})
    assert expected in message
    assert var in message


@pytest.mark.parametrize(
    "address",
    [
        "localhost",
        "127.0.0.1",
        "::1:25",
        "[::1]",
        "[::1]25",
        "[127.0.0.1]:25",
        "host:port",
        "host:70000",
        ":25",
        "bad host:25",
        "[::1:25",
    ],
)
def test_invalid_listen_address(tmp_path: Path, address: str) -> None:
    message = error_of(tmp_path, f"[api]\nlisten = {address!r}\n")
    assert "'api.listen' must be a listen address host:port" in message
    message = error_of(tmp_path, env={"POSTWIRE_SMTP_STARTTLS_LISTEN": address})
    assert "'smtp.starttls_listen'" in message and "POSTWIRE_SMTP_STARTTLS_LISTEN" in message


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:25", ("127.0.0.1", 25)),
        ("[::1]:25", ("::1", 25)),
        ("[::]:0", ("::", 0)),
        ("mx.example.com:587", ("mx.example.com", 587)),
        ("localhost:65535", ("localhost", 65535)),
    ],
)
def test_split_host_port(address: str, expected: tuple[str, int]) -> None:
    assert split_host_port(address) == expected


@pytest.mark.parametrize("cidr", ["10.0.0.1/8", "10.0.0.0/33", "not-a-network", "fd00::1/8"])
def test_invalid_cidr(tmp_path: Path, cidr: str) -> None:
    message = error_of(tmp_path, f"[smtp]\ntrusted_networks = [{cidr!r}]\n")
    assert f"config key 'smtp.trusted_networks' has an invalid CIDR {cidr!r}" in message


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[api]\npublic_url = 'ftp://x'\n", "'api.public_url' must be an http(s) URL"),
        ("[api]\npublic_url = 'https://'\n", "'api.public_url' must be an http(s) URL"),
        ("[api]\npublic_url = 'http://x/?a=1'\n", "'api.public_url' must be an http(s) URL"),
        ("[api]\npublic_url = 'http://x:99999'\n", "'api.public_url' must be an http(s) URL"),
        ("[dns]\nnameservers = ['dns.google']\n", "'dns.nameservers' must list IP addresses"),
        ("[delivery]\nport = 0\n", "'delivery.port' must be a port number"),
        ("[delivery.routes]\n'a..b' = 'x:25'\n", "invalid domain pattern 'a..b'"),
        ("[delivery.routes]\n'a.com' = 'x'\n", "entry 'a.com' must be host:port"),
        ("[smtp]\nmax_message_size = 0\n", "'smtp.max_message_size' must be at least 1"),
        ("[spool]\nmax_batch = 0\n", "'spool.max_batch' must be at least 1"),
        ("processes = -1\n", "'processes' must be at least 0"),
        ("[smtp]\ntls_cert = 'c.pem'\n", "'smtp.tls_cert' and 'smtp.tls_key' must be set together"),
    ],
)
def test_invalid_values(tmp_path: Path, toml: str, expected: str) -> None:
    assert expected in error_of(tmp_path, toml)


def test_invalid_helo_name(tmp_path: Path) -> None:
    message = error_of(tmp_path, env={"POSTWIRE_DELIVERY_HELO_NAME": "a b"})
    assert "'delivery.helo_name' must be a host name" in message


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    assert "invalid TOML" in error_of(tmp_path, "[api\n")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.toml", HOST)


def test_config_is_frozen(tmp_path: Path) -> None:
    config = load_config(None, HOST)
    with pytest.raises(AttributeError):
        config.data_dir = tmp_path  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.delivery.routes["x"] = "y"  # type: ignore[index]


# --- the operator documentation ----------------------------------------------------------------

DOC = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_every_key_is_documented() -> None:
    doc = DOC.read_text()
    for key in KEYS:
        assert f"| `{key}` |" in doc, key
        assert f"`{env_var_name(key)}`" in doc, key


def test_documented_example_loads(tmp_path: Path) -> None:
    example = DOC.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    config = load_config(write(tmp_path, example), {})
    assert config.delivery.route_for("a.corp.example") == "[fd00::25]:25"


# --- sending domains ---------------------------------------------------------------------------


def test_domain_keys_defaults_and_overrides(tmp_path: Path) -> None:
    config = load_config(None, HOST)
    assert config.delivery.sending_ips == ()
    assert config.domains.bounce_host is None  # delivery.helo_name is used
    assert config.domains.verify_interval_seconds == 3600
    assert config.domains.dkim_selector == "postwire"
    assert config.domains.dkim_key_bits == 2048

    path = write(
        tmp_path,
        """
        [delivery]
        sending_ips = ["192.0.2.25", "2001:DB8:0::25"]

        [domains]
        bounce_host = "Bounces.Example.com."
        verify_interval_seconds = 60
        dkim_selector = "PW2024"
        """,
    )
    config = load_config(path, HOST)
    assert config.delivery.sending_ips == ("192.0.2.25", "2001:db8::25")
    assert config.domains.bounce_host == "bounces.example.com"
    assert config.domains.verify_interval_seconds == 60
    assert config.domains.dkim_selector == "pw2024"

    env = {
        **HOST,
        "POSTWIRE_DELIVERY_SENDING_IPS": "198.51.100.7",
        "POSTWIRE_DOMAINS_BOUNCE_HOST": "",
        "POSTWIRE_DOMAINS_VERIFY_INTERVAL_SECONDS": "900",
        "POSTWIRE_DOMAINS_DKIM_SELECTOR": "s1.mail",
        "POSTWIRE_DOMAINS_DKIM_KEY_BITS": "1024",
    }
    config = load_config(path, env)
    assert config.delivery.sending_ips == ("198.51.100.7",)
    assert config.domains.bounce_host is None
    assert config.domains.verify_interval_seconds == 900
    assert config.domains.dkim_selector == "s1.mail"
    assert config.domains.dkim_key_bits == 1024


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[delivery]\nsending_ips = ['mx.example.com']\n", "'delivery.sending_ips' must list IPv4"),
        ("[delivery]\nsending_ips = ['10.0.0.0/8']\n", "'delivery.sending_ips' must list IPv4"),
        ("[domains]\nbounce_host = 'a b'\n", "'domains.bounce_host' must be a host name"),
        ("[domains]\nbounce_host = '192.0.2.1'\n", "'domains.bounce_host' must be a host name"),
        ("[domains]\nverify_interval_seconds = 0\n", "'domains.verify_interval_seconds' must be"),
        ("[domains]\ndkim_selector = '_x'\n", "'domains.dkim_selector' must be DNS labels"),
        ("[domains]\ndkim_selector = 'a..b'\n", "'domains.dkim_selector' must be DNS labels"),
        ("[domains]\ndkim_key_bits = 1536\n", "'domains.dkim_key_bits' must be one of 1024"),
    ],
)
def test_invalid_domain_keys(tmp_path: Path, toml: str, expected: str) -> None:
    assert expected in error_of(tmp_path, toml)


def test_route_auth_and_tls_follow_the_route_patterns() -> None:
    env = {
        **HOST,
        "POSTWIRE_DELIVERY_ROUTES": '{"*": "relay.example.net:587"}',
        "POSTWIRE_DELIVERY_ROUTE_AUTH": '{"*": "relay-user:pa:ss"}',
        "POSTWIRE_DELIVERY_ROUTE_TLS": '{"*": "enforced", "*.corp.example": "none"}',
    }
    delivery = load_config(None, env).delivery
    assert delivery.route_auth_for("example.org") == ("relay-user", "pa:ss")
    assert delivery.route_tls_for("example.org") == "enforced"
    assert delivery.route_tls_for("mx.corp.example") == "none"
    for key, value, message in [
        ("POSTWIRE_DELIVERY_ROUTE_AUTH", '{"*": "no-colon"}', "user:password"),
        ("POSTWIRE_DELIVERY_ROUTE_TLS", '{"*": "sometimes"}', "must be one of"),
        ("POSTWIRE_DELIVERY_ROUTE_TLS", '{"bad pattern": "none"}', "invalid domain pattern"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_config(None, {**HOST, key: value})


# --- which file ---------------------------------------------------------------------------------


def test_the_config_file_is_found_where_every_command_looks(tmp_path: Path) -> None:
    given = tmp_path / "given.toml"
    named = tmp_path / "named.toml"
    xdg = tmp_path / "xdg"
    (xdg / "postwire").mkdir(parents=True)
    found_in_xdg = xdg / "postwire" / "postwire.toml"
    found_in_xdg.write_text("")
    home = tmp_path / "home"
    (home / ".config" / "postwire").mkdir(parents=True)
    found_in_home = home / ".config" / "postwire" / "postwire.toml"
    found_in_home.write_text("")
    env = {"POSTWIRE_CONFIG": str(named), "XDG_CONFIG_HOME": str(xdg), "HOME": str(home)}
    assert find_config_file(given, env) == given
    assert find_config_file(None, env) == named
    del env["POSTWIRE_CONFIG"]
    assert find_config_file(None, env) == found_in_xdg
    del env["XDG_CONFIG_HOME"]
    assert find_config_file(None, env) == found_in_home
    found_in_home.unlink()
    system = None if not SYSTEM_CONFIG_FILE.is_file() else SYSTEM_CONFIG_FILE
    assert find_config_file(None, env) == system  # None: the embedded default


def test_postwire_config_names_the_file_and_is_no_key(tmp_path: Path) -> None:
    config = load_config(None, {"POSTWIRE_CONFIG": str(tmp_path / "postwire.toml")})
    assert config.config_file is None


def test_the_help_says_where_every_command_finds_its_config() -> None:
    from postwire.cli import build_parser

    text = " ".join(build_parser().format_help().split())
    assert "POSTWIRE_CONFIG" in text and "/etc/postwire/postwire.toml" in text
