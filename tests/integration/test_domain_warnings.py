"""A domain's answer, and `postwire serve` at start-up, warn about settings that keep its records
or its tracked links from working outside this machine, naming the setting that fixes each."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import trio

from postwire import app
from postwire.config import ApiConfig, Config, DeliveryConfig
from postwire.domains.store import create_domain, to_json
from postwire.store.spool import serve_spool

LOCAL = Config(
    data_dir=Path("."),
    api=ApiConfig(public_url="http://127.0.0.1:3000"),
    delivery=DeliveryConfig(helo_name="localhost"),
)
PUBLIC = dataclasses.replace(
    LOCAL,
    api=ApiConfig(public_url="https://mail.example-mail.net"),
    delivery=DeliveryConfig(helo_name="mail.example-mail.net"),
)


def settings(body: dict[str, object]) -> list[str]:
    warnings = body.get("warnings", [])
    assert isinstance(warnings, list)
    return [warning["setting"] for warning in warnings]


async def test_a_domain_answer_and_start_up_warn_about_local_settings(tmp_path: Path) -> None:
    config = dataclasses.replace(LOCAL, data_dir=tmp_path)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        quiet = await create_domain(spool, config, "team", "quiet.test")
        tracked = await create_domain(spool, config, "team", "tracked.test", click_tracking=True)

        quiet_body = to_json(quiet, config)
        assert settings(quiet_body) == ["delivery.helo_name"]
        assert "MX 10 localhost" in str(quiet_body["warnings"])
        assert settings(to_json(tracked, config)) == ["delivery.helo_name", "api.public_url"]
        assert "warnings" not in to_json(quiet, config, include_records=False)  # list items
        assert "warnings" not in to_json(tracked, dataclasses.replace(PUBLIC, data_dir=tmp_path))

        logged = app._setup_warnings(config, spool)
        assert len(logged) == 2
        assert logged[0].startswith("delivery.helo_name is 'localhost'")
        assert "api.public_url is http://127.0.0.1:3000" in logged[1]
        assert logged[1].endswith("(tracking is on for tracked.test)")
        assert app._setup_warnings(dataclasses.replace(PUBLIC, data_dir=tmp_path), spool) == []
        nursery.cancel_scope.cancel()


async def test_start_up_says_nothing_of_tracking_when_no_domain_tracks(tmp_path: Path) -> None:
    config = dataclasses.replace(LOCAL, data_dir=tmp_path)
    async with trio.open_nursery() as nursery:
        spool = await nursery.start(serve_spool, config)
        await create_domain(spool, config, "team", "quiet.test")
        (logged,) = app._setup_warnings(config, spool)
        assert "api.public_url" not in logged
        nursery.cancel_scope.cancel()
