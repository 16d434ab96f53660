"""`/suppressions` over raw HTTP against a live server: add, list, get by id or address
(percent-encoded, as the Python SDK sends it), filter, delete, isolation."""

from __future__ import annotations

import httpx

from tests.e2e.conftest import LiveServer


def test_manage_the_suppression_list(live_server: LiveServer) -> None:
    headers = {"Authorization": f"Bearer {live_server.create_key('admin')}"}
    with httpx.Client(base_url=live_server.base_url, headers=headers) as api:
        added = api.post("/suppressions", json={"email": "Gone@Example.org"})
        assert added.status_code == 201, added.text
        record = added.json()
        assert record["object"] == "suppression" and record["email"] == "gone@example.org"
        assert record["origin"] == "manual" and record["source_id"] is None
        assert api.post("/suppressions", json={"email": "gone@example.org"}).json() == record

        api.post("/suppressions", json={"email": "other@example.org"})
        listed = api.get("/suppressions").json()
        assert [s["email"] for s in listed["data"]] == ["other@example.org", "gone@example.org"]
        assert api.get("/suppressions?origin=bounce").json()["data"] == []
        assert api.get("/suppressions?origin=nope").status_code == 422

        assert api.get("/suppressions/gone%40example.org").json()["id"] == record["id"]
        assert api.get(f"/suppressions/{record['id']}").json()["email"] == "gone@example.org"
        deleted = api.delete(f"/suppressions/{record['id']}").json()
        assert deleted == {"object": "suppression", "id": record["id"], "deleted": True}
        missing = api.get("/suppressions/gone@example.org")
        assert missing.status_code == 404 and missing.json()["name"] == "not_found"

        for bad in ({}, {"email": "not an address"}, {"email": "A <a@example.org>"}):
            assert api.post("/suppressions", json=bad).status_code == 422

    stranger = {"Authorization": f"Bearer {live_server.create_key('s', new_team='other')}"}
    with httpx.Client(base_url=live_server.base_url, headers=stranger) as api:
        assert api.get("/suppressions").json()["data"] == []
        assert api.get("/suppressions/other@example.org").status_code == 404


def test_the_sdk_manages_suppressions(live_server: LiveServer) -> None:
    import resend

    resend.api_url = live_server.base_url
    resend.api_key = live_server.create_key("sdk")
    added = resend.Suppressions.add({"email": "sdk@example.org"})
    assert added["email"] == "sdk@example.org"
    assert [s["email"] for s in resend.Suppressions.list()["data"]] == ["sdk@example.org"]
    assert resend.Suppressions.get("sdk@example.org")["id"] == added["id"]
    assert resend.Suppressions.remove("sdk@example.org")["deleted"] is True
    assert resend.Suppressions.list()["data"] == []
