"""Domain claims against a live server and a real Knot: a team proves with a TXT record that it
holds a name another team verified, and takes it over.

Requests and declared answers:
- resend-go `domain_claims.go`: POST `domains/claim` (`CreateDomainClaimRequest`: name, region,
  custom_return_path, tracking_subdomain, open_tracking, click_tracking), GET
  `domains/{id}/claim`, POST `domains/{id}/claim/verify` with no body; `DomainClaim`.
- resend-node `src/domains/claims/domain-claims.ts` and `interfaces/domain-claim.ts`: the same
  paths; `object: 'domain_claim'`, `domain_id`, `region` and `blocked_reason`,
  `failure_reason` string or null, `record: {type: 'TXT', name, value, ttl: 'Auto'}`.
- resend-ruby `lib/resend/domains/claims.rb` (`{}` bodies), resend-java `DomainClaims.java`
  (verify posts an empty body) and resend-php `src/Service/Domains/Claim.php`, which spells
  the paths `domains/claims`, `domains/{id}/claims`, `domains/{id}/claims/verify`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import publish_records
from tests.e2e.sdk_parity import World, live_world, team_client, verify_domain, wait_for_domain

CLAIM_KEYS = {
    "object", "id", "name", "status", "domain_id", "region", "record", "blocked_reason",
    "failure_reason", "created_at", "expires_at",
}  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with live_world(tmp_path_factory.mktemp("domain-claims")) as live:
        yield live


def check_claim(claim: dict[str, Any], name: str) -> None:
    assert set(claim) == CLAIM_KEYS, claim
    assert claim["object"] == "domain_claim" and claim["name"] == name
    assert claim["record"]["type"] == "TXT" and claim["record"]["ttl"] == "Auto"
    assert claim["record"]["name"] == name
    assert claim["blocked_reason"] is None and claim["failure_reason"] is None
    assert claim["created_at"].endswith("+00") and claim["expires_at"] > claim["created_at"]


def send(api: Any, domain: str) -> Any:
    body = {"from": f"a@{domain}", "to": "b@example.org", "subject": "s", "text": "t",
            "scheduled_at": "in 1 hour"}  # fmt: skip
    return api.post("/emails", json=body)


def test_a_claim_proven_in_dns_takes_the_domain_over(world: World) -> None:
    name = "claimed-one.test"
    with (
        team_client(world.server, "claim-old") as old,
        team_client(world.server, "claim-new") as new,
    ):
        held = verify_domain(old, world.dns, name)
        accepted = send(old, name)
        assert accepted.status_code == 200
        # Node's body: every option, snake_case.
        started = new.post(
            "/domains/claim",
            json={"name": name, "region": "eu-west-1", "custom_return_path": "send",
                  "open_tracking": True, "click_tracking": False, "tracking_subdomain": "links"},
        )  # fmt: skip
        assert started.status_code == 201, started.text
        claim = started.json()
        check_claim(claim, name)
        assert claim["status"] == "pending" and claim["region"] == "eu-west-1"
        placeholder = new.get(f"/domains/{claim['domain_id']}").json()
        assert placeholder["name"] == name and placeholder["status"] == "not_started"
        assert placeholder["records"] != held["records"]  # a DKIM key of its own
        # Asked again while pending: the same claim, 200.
        again = new.post("/domains/claim", json={"name": name})
        assert again.status_code == 200 and again.json()["id"] == claim["id"]

        # Not published yet: still pending, and nothing changed hands.
        checked = new.post(f"/domains/{claim['domain_id']}/claim/verify")
        assert checked.status_code == 200 and checked.json()["status"] == "pending"
        assert old.get(f"/domains/{held['id']}").json()["status"] == "verified"

        world.dns.publish(name, "TXT", claim["record"]["value"])
        done = new.post(f"/domains/{claim['domain_id']}/claim/verify")  # Java: empty body
        assert done.status_code == 200, done.text
        check_claim(done.json(), name)
        assert done.json()["status"] == "completed"
        assert new.get(f"/domains/{claim['domain_id']}/claim").json()["status"] == "completed"

        # The previous owner lost it: failed, said why, and it sends no more.
        lost = old.get(f"/domains/{held['id']}").json()
        assert lost["status"] == "failed" and "took it over" in lost["failure_reason"]
        assert send(old, name).status_code == 403
        # Mail it accepted before is kept, as accepted.
        before = old.get(f"/emails/{accepted.json()['id']}").json()
        assert before["last_event"] == "scheduled"
        assert old.post(f"/domains/{held['id']}/verify").status_code == 200
        assert old.get(f"/domains/{held['id']}").json()["status"] == "failed"
        # The new owner verifies its own records like any domain, then sends.
        # (publishing replaces the previous owner's records at the same names)
        publish_records(world.dns, new.get(f"/domains/{claim['domain_id']}").json())
        verified = wait_for_domain(new, claim["domain_id"], "verified")
        assert verified["status"] == "verified" and send(new, name).status_code == 200
        # Nobody else may add the name now.
        refused = old.post("/domains", json={"name": name})
        assert refused.status_code == 403 and refused.json()["name"] == "validation_error"


def test_the_php_spelling_and_a_domain_the_team_has_already(world: World) -> None:
    name = "claimed-two.test"
    with team_client(world.server, "php-old") as old, team_client(world.server, "php-new") as new:
        # The claimer added the name first, but the other team verified it: its domain failed.
        mine = new.post("/domains", json={"name": name}).json()
        verify_domain(old, world.dns, name)
        new.post(f"/domains/{mine['id']}/verify")
        assert new.get(f"/domains/{mine['id']}").json()["status"] == "failed"
        started = new.post("/domains/claims", json={"name": name})
        assert started.status_code == 201, started.text
        claim = started.json()
        check_claim(claim, name)
        assert claim["domain_id"] == mine["id"]  # the claim goes on the team's own domain
        assert new.get(f"/domains/{mine['id']}/claims").json()["id"] == claim["id"]
        world.dns.publish(name, "TXT", claim["record"]["value"])
        done = new.post(f"/domains/{mine['id']}/claims/verify", json={})  # Ruby sends {}
        assert done.json()["status"] == "completed"


def test_bad_claims_and_other_teams(world: World) -> None:
    name = "claimed-three.test"
    with (
        team_client(world.server, "bad-owner") as owner,
        team_client(world.server, "bad-claimer") as claimer,
        team_client(world.server, "bad-stranger") as stranger,
    ):
        verify_domain(owner, world.dns, name)
        for body, status, error in (
            ({}, 422, "missing_required_field"),
            ({"name": "not a domain"}, 422, "validation_error"),
            ({"name": name, "region": "mars-1"}, 422, "validation_error"),
            ({"name": "nobody-holds-it.test"}, 403, "validation_error"),
        ):
            answer = claimer.post("/domains/claim", json=body)
            assert (answer.status_code, answer.json()["name"]) == (status, error), answer.text
        own = owner.post("/domains/claim", json={"name": name})
        assert own.status_code == 403 and own.json()["name"] == "validation_error"

        claim = claimer.post("/domains/claim", json={"name": name}).json()
        # Another team knows nothing of the claim's placeholder.
        for answer in (
            stranger.get(f"/domains/{claim['domain_id']}/claim"),
            stranger.post(f"/domains/{claim['domain_id']}/claim/verify"),
        ):
            assert answer.status_code == 404 and answer.json()["name"] == "not_found"
        # A domain without a claim.
        plain = claimer.post("/domains", json={"name": "unclaimed-domain.test"}).json()
        missing = claimer.get(f"/domains/{plain['id']}/claim")
        assert missing.status_code == 404 and missing.json()["message"] == "Domain claim not found"
        # A TXT record with another claim's value proves nothing.
        world.dns.publish(name, "TXT", "postwire-domain-verification=0000")
        checked = claimer.post(f"/domains/{claim['domain_id']}/claim/verify").json()
        assert checked["status"] == "pending"
        owned = owner.get("/domains").json()["data"][0]
        assert owned["name"] == name and owned["status"] == "verified"
