"""`POST /suppressions/batch/add` and `/suppressions/batch/remove` as every official SDK sends
them, against one live server shared by the module (each test has a team of its own).

Declared shapes checked here:
- resend-go `suppressions.go`: `BatchAddSuppressionsRequest{Emails}` -> `{data: [{object, id}]}`;
  `BatchRemoveSuppressionsRequest{Emails | Ids}` (the unset one omitted) ->
  `{data: [{object, id, deleted}]}`.
- resend-node `src/suppressions/batch/interfaces/batch-add-suppressions.interface.ts` and
  `batch-remove-suppressions.interface.ts`: the same, `object: 'suppression'`.
- resend-ruby `lib/resend/suppressions/batch.rb`, resend-php `src/Service/Suppressions/Batch.php`
  and resend-java `SuppressionsBatch.java` (`RemoveSuppressionsOptions` is NON_NULL): the same
  bodies and paths.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import LiveServer, write_config


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("suppression-batches")
    live = LiveServer(config_path=directory / "postwire.toml", data_dir=directory / "data")
    write_config(live.config_path, live.data_dir)
    live.start()
    yield live
    if live.process is not None:
        live.stop()


def team_client(server: LiveServer, team: str) -> httpx.Client:
    token = server.create_key("admin", new_team=team)
    return httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"})


def assert_references(body: dict[str, Any], *, deleted: bool) -> list[str]:
    """The SDKs' declared item: `{object: "suppression", id}` (+ `deleted` on removal)."""
    assert set(body) == {"data"}
    keys = {"object", "id", "deleted"} if deleted else {"object", "id"}
    for item in body["data"]:
        assert set(item) == keys and item["object"] == "suppression"
        assert isinstance(item["id"], str)
        if deleted:
            assert item["deleted"] is True
    return [item["id"] for item in body["data"]]


def test_add_many_dedupes_and_upserts(shared_server: LiveServer) -> None:
    with team_client(shared_server, "batch-add") as api:
        single = api.post("/suppressions", json={"email": "kept@example.org"}).json()
        added = api.post(
            "/suppressions/batch/add",
            json={"emails": ["A@example.org", " a@example.org", "kept@example.org", "b@ex.org"]},
        )
        assert added.status_code == 201, added.text
        ids = assert_references(added.json(), deleted=False)
        assert len(ids) == 3 and ids[1] == single["id"]  # deduped, in order, existing kept
        listed = {s["email"]: s["id"] for s in api.get("/suppressions").json()["data"]}
        assert listed == {"a@example.org": ids[0], "kept@example.org": ids[1], "b@ex.org": ids[2]}
        again = api.post("/suppressions/batch/add", json={"emails": ["b@ex.org"]}).json()
        assert assert_references(again, deleted=False) == [ids[2]]


def test_remove_by_address_or_by_id(shared_server: LiveServer) -> None:
    with team_client(shared_server, "batch-remove") as api:
        emails = [f"user{n}@example.org" for n in range(4)]
        ids = assert_references(
            api.post("/suppressions/batch/add", json={"emails": emails}).json(), deleted=False
        )
        # Go/Java omit the unset field; Ruby sends only the one given.
        by_email = api.post(
            "/suppressions/batch/remove", json={"emails": ["USER0@example.org", "nobody@x.org"]}
        )
        assert by_email.status_code == 200, by_email.text
        assert assert_references(by_email.json(), deleted=True) == [ids[0]]
        by_id = api.post("/suppressions/batch/remove", json={"ids": ids[1:3]}).json()
        assert sorted(assert_references(by_id, deleted=True)) == sorted(ids[1:3])
        assert [s["email"] for s in api.get("/suppressions").json()["data"]] == [emails[3]]


def test_bad_batches_are_refused_whole(shared_server: LiveServer) -> None:
    with team_client(shared_server, "batch-bad") as api:
        too_many = [f"u{n}@example.org" for n in range(101)]
        refused = api.post("/suppressions/batch/add", json={"emails": too_many})
        assert refused.status_code == 422
        assert refused.json()["name"] == "validation_error" and "100" in refused.json()["message"]
        assert api.post("/suppressions/batch/add", json={"emails": too_many[:100]}).status_code == (
            201
        )
        remove_many = api.post("/suppressions/batch/remove", json={"emails": too_many})
        assert remove_many.status_code == 422 and remove_many.json()["name"] == "validation_error"
        for body, name in (
            ({}, "missing_required_field"),
            ({"emails": []}, "validation_error"),
            ({"emails": "a@example.org"}, "validation_error"),
            ({"emails": ["ok@example.org", "not an address"]}, "validation_error"),
            ({"emails": ["Name <n@example.org>"]}, "validation_error"),
            ({"emails": [7]}, "validation_error"),
        ):
            answer = api.post("/suppressions/batch/add", json=body)
            assert answer.status_code == 422 and answer.json()["name"] == name, (body, answer.text)
        assert api.get("/suppressions/ok@example.org").status_code == 404  # nothing of it added
        for body in ({}, {"emails": ["a@example.org"], "ids": ["x"]}, {"ids": []}):
            answer = api.post("/suppressions/batch/remove", json=body)
            assert answer.status_code == 422 and answer.json()["name"] == "validation_error"


def test_another_teams_suppressions_are_out_of_reach(shared_server: LiveServer) -> None:
    with (
        team_client(shared_server, "batch-owner") as owner,
        team_client(shared_server, "batch-stranger") as stranger,
    ):
        body = {"emails": ["mine@example.org"]}
        ids = assert_references(
            owner.post("/suppressions/batch/add", json=body).json(), deleted=False
        )
        for removal in ({"ids": ids}, body):
            answer = stranger.post("/suppressions/batch/remove", json=removal)
            assert answer.status_code == 200 and answer.json() == {"data": []}
        assert owner.get(f"/suppressions/{ids[0]}").status_code == 200
        added = stranger.post("/suppressions/batch/add", json=body)
        assert assert_references(added.json(), deleted=False) != ids  # a record of its own
    missing_key = httpx.post(f"{shared_server.base_url}/suppressions/batch/add", json=body)
    assert missing_key.status_code == 401 and missing_key.json()["name"] == "missing_api_key"
