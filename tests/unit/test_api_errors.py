"""An unexpected failure answers 500 in the contract's shape, with nothing of the exception."""

from __future__ import annotations

from pathlib import Path

from postwire import _core
from postwire.api.app import create_app
from postwire.api.context import ApiContext
from postwire.config import load_config
from postwire.store.spool import TABLES, Spool


async def test_unexpected_error_leaks_nothing(tmp_path: Path) -> None:
    config = load_config(None, {"POSTWIRE_DATA_DIR": str(tmp_path)})
    spool = Spool(_core.Spool(tmp_path / "spool", tables=list(TABLES)))
    app = create_app(ApiContext(config=config, spool=spool))

    @app.get("/boom")
    async def boom() -> dict[str, str]:
        raise RuntimeError("secret detail /etc/passwd")

    app.before_request_funcs.clear()  # no key needed for this probe
    response = await app.test_client().get("/boom")
    assert response.status_code == 500
    body = await response.get_json()
    assert body == {
        "statusCode": 500,
        "name": "application_error",
        "message": "An unexpected error occurred.",
    }
    assert b"secret" not in await response.get_data()
    spool.core.close()
