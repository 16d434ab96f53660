"""Sending domains end to end below HTTP: a real spool, a real authoritative DNS server (Knot)."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import dns.asyncbackend
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from postwire import _core
from postwire.config import Config, DeliveryConfig, DnsConfig, DomainsConfig
from postwire.domains.records import FAILED_AFTER_MS
from postwire.domains.store import (
    DOMAIN_OWNERS,
    DomainOwner,
    DomainRecord,
    create_domain,
    delete_domain,
    domain_dns_records,
    find_verified_domain_for_sender,
    get_domain,
    list_domains,
    reference_json,
    save_domain,
    to_json,
    update_domain,
)
from postwire.domains.verification import (
    DomainVerifier,
    build_resolver,
    serve_domain_verifier,
    verify_domain,
)
from postwire.domains.verification_state import start_verification
from postwire.errors import ApiError
from postwire.services import ServiceDeps
from postwire.store.spool import TABLES, Spool
from tests.dns_server import AuthoritativeDnsServer

TEAM = "team-a"
OTHER_TEAM = "team-b"
TEAMS = (TEAM, OTHER_TEAM)
HELO = "mx.postwire.test"


@pytest.fixture(autouse=True)
def trio_dns_backend() -> None:
    # app.run does this at start; dnspython could otherwise pick asyncio.
    dns.asyncbackend.set_default_backend("trio")


class SettableClock:
    """The spool's wall clock, moved by hand to cross the policy's 72 hours."""

    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


@asynccontextmanager
async def open_spool(path: Path, clock: Callable[[], int] | None = None) -> AsyncIterator[Spool]:
    core = _core.Spool(path, tables=list(TABLES))
    spool = Spool(core) if clock is None else Spool(core, clock_ms=clock)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(spool.dispatch_completions)
        try:
            yield spool
        finally:
            nursery.cancel_scope.cancel()
    await spool.close()


# Tests of storage and ownership rather than of the key make 1024-bit DKIM keys (a tenth of
# the time of 2048 bits: many domains each); those that check keys in DNS keep the default
# 2048, whose TXT record spans several strings.
QUICK_KEY_BITS = 1024


def make_config(
    tmp_path: Path, nameserver: str, *, interval: int = 3600, dkim_key_bits: int = 2048
) -> Config:
    return Config(
        data_dir=tmp_path,
        dns=DnsConfig(nameservers=(nameserver,)),
        delivery=DeliveryConfig(helo_name=HELO),
        domains=DomainsConfig(verify_interval_seconds=interval, dkim_key_bits=dkim_key_bits),
    )


def publish_required(server: AuthoritativeDnsServer, domain: DomainRecord, config: Config) -> None:
    for record in domain_dns_records(domain, config):
        if record.required:
            value = f"{record.priority} {record.value}." if record.type == "MX" else record.value
            server.publish(record.fqdn, record.type, value)


def statuses(domain: DomainRecord | None) -> dict[str, str]:
    assert domain is not None
    return {"domain": domain.status, **domain.record_statuses}


# --- storage and the contract's JSON -----------------------------------------------------------


async def test_create_read_update_delete_and_the_contract_json(tmp_path: Path) -> None:
    config = make_config(tmp_path, "127.0.0.1:53")  # the record of a default key
    clock = SettableClock()
    async with open_spool(tmp_path / "spool", clock) as spool:
        domain = await create_domain(spool, config, TEAM, "Acme.TEST.", custom_return_path="Bounce")
        assert (domain.name, domain.status, domain.custom_return_path) == (
            "acme.test",
            "not_started",
            "bounce",
        )
        assert get_domain(spool, TEAM, domain.id) == domain

        body = to_json(domain, config)
        assert list(body) == [
            "object",
            "id",
            "name",
            "status",
            "created_at",
            "region",
            "open_tracking",
            "click_tracking",
            # no "tracking_subdomain" while none is set (the Node SDK types it optional)
            "capabilities",
            "records",
            "warnings",  # the HELO name is under .test, which nobody outside can resolve
        ]
        assert [warning["setting"] for warning in body["warnings"]] == ["delivery.helo_name"]
        assert body["object"] == "domain"
        assert body["created_at"] == "2023-11-14 22:13:20.000000+00"
        assert body["region"] == "us-east-1"
        assert body["capabilities"] == {"sending": "enabled", "receiving": "disabled"}
        assert (body["open_tracking"], body["click_tracking"]) == (False, False)
        assert body["records"] == [
            {
                "record": "SPF",
                "name": "bounce",
                "type": "MX",
                "ttl": "Auto",
                "status": "not_started",
                "value": HELO,
                "priority": 10,
            },
            {
                "record": "SPF",
                "name": "bounce",
                "type": "TXT",
                "ttl": "Auto",
                "status": "not_started",
                "value": f"v=spf1 a:{HELO} -all",
            },
            {
                "record": "DKIM",
                "name": "postwire._domainkey",
                "type": "TXT",
                "ttl": "Auto",
                "status": "not_started",
                "value": domain.dkim_dns_txt,
            },
        ]
        assert domain.dkim_dns_txt.startswith("v=DKIM1; k=rsa; p=MII")
        assert "PRIVATE" not in json.dumps(body)
        assert "PRIVATE" not in repr(domain)
        assert to_json(domain, config, include_records=False) == {
            "id": domain.id,
            "name": "acme.test",
            "status": "not_started",
            "created_at": "2023-11-14 22:13:20.000000+00",
            "region": "us-east-1",
            "open_tracking": False,
            "click_tracking": False,
            "capabilities": {"sending": "enabled", "receiving": "disabled"},
        }

        with pytest.raises(ApiError) as refused:
            await create_domain(spool, config, TEAM, "acme.test")
        assert (refused.value.status, refused.value.name, refused.value.message) == (
            403,
            "validation_error",
            "The `acme.test` domain has been registered already.",
        )
        with pytest.raises(ApiError, match="`region` field must be one of"):
            await create_domain(spool, config, TEAM, "b.test", region="mars-1")
        with pytest.raises(ApiError, match="does not receive mail"):
            await create_domain(
                spool, config, TEAM, "b.test", capabilities={"receiving": "enabled"}
            )

        updated = await update_domain(
            spool, TEAM, domain.id, open_tracking=True, tls="enforced", tracking_subdomain="links"
        )
        assert (updated.open_tracking, updated.click_tracking, updated.tls) == (
            True,
            False,
            "enforced",
        )
        assert to_json(updated, config)["tracking_subdomain"] == "links"
        assert get_domain(spool, TEAM, domain.id) == updated
        with pytest.raises(ApiError, match="`tls` field must be"):
            await update_domain(spool, TEAM, domain.id, tls="always")
        with pytest.raises(ApiError, match="`click_tracking` field must be a boolean"):
            await update_domain(spool, TEAM, domain.id, click_tracking="yes")

        assert reference_json(domain.id) == {"object": "domain", "id": domain.id}
        deleted = await delete_domain(spool, TEAM, domain.id)
        assert deleted.id == domain.id
        with pytest.raises(ApiError) as missing:
            get_domain(spool, TEAM, domain.id)
        assert (missing.value.status, missing.value.name) == (404, "not_found")
        with pytest.raises(ApiError):
            await delete_domain(spool, TEAM, domain.id)
        # The name is free again once the domain is gone.
        again = await create_domain(spool, config, TEAM, "acme.test")
        assert again.id != domain.id


async def test_teams_never_see_each_others_domains(tmp_path: Path) -> None:
    config = make_config(tmp_path, "127.0.0.1:53", dkim_key_bits=QUICK_KEY_BITS)
    async with open_spool(tmp_path / "spool") as spool:
        mine = await create_domain(spool, config, TEAM, "acme.test")
        theirs = await create_domain(spool, config, OTHER_TEAM, "other.test")
        assert mine.id != theirs.id
        # The key is of the size configured (domains.dkim_key_bits).
        published = base64.b64decode(mine.dkim_dns_txt.split("p=", 1)[1])
        public_key = serialization.load_der_public_key(published)
        assert isinstance(public_key, rsa.RSAPublicKey)
        assert public_key.key_size == QUICK_KEY_BITS
        for call in (
            lambda: get_domain(spool, OTHER_TEAM, mine.id),
            lambda: get_domain(spool, OTHER_TEAM, "../" + mine.id),
        ):
            with pytest.raises(ApiError, match="Domain not found"):
                call()
        with pytest.raises(ApiError, match="Domain not found"):
            await update_domain(spool, OTHER_TEAM, mine.id, open_tracking=True)
        with pytest.raises(ApiError, match="Domain not found"):
            await start_verification(spool, config, OTHER_TEAM, mine.id)
        with pytest.raises(ApiError, match="Domain not found"):
            await delete_domain(spool, OTHER_TEAM, mine.id)
        assert [d.id for d in list_domains(spool, TEAM)[0]] == [mine.id]
        assert [d.id for d in list_domains(spool, OTHER_TEAM)[0]] == [theirs.id]
        assert list_domains(spool, "team-c") == ([], False)


async def test_an_unverified_name_blocks_nobody_and_the_first_to_verify_owns_it(
    tmp_path: Path, dns_server: AuthoritativeDnsServer
) -> None:
    config = make_config(tmp_path, dns_server.nameserver, dkim_key_bits=QUICK_KEY_BITS)
    resolver = build_resolver(config)
    async with open_spool(tmp_path / "spool") as spool:
        squatted = await create_domain(spool, config, OTHER_TEAM, "acme.test")
        with pytest.raises(ApiError) as refused:  # the same team twice: the contract's 403
            await create_domain(spool, config, OTHER_TEAM, "ACME.test.")
        assert (refused.value.status, refused.value.name) == (403, "validation_error")
        assert refused.value.message == "The `acme.test` domain has been registered already."
        mine = await create_domain(spool, config, TEAM, "acme.test")  # not blocked
        for domain in (squatted, mine):
            await start_verification(spool, config, domain.team_id, domain.id)
        publish_required(dns_server, mine, config)
        verified = await verify_domain(spool, config, mine, resolver)
        assert verified is not None and verified.status == "verified"
        assert verified.failure_reason is None
        dropped = get_domain(spool, OTHER_TEAM, squatted.id)
        assert dropped.status == "failed" and dropped.failure_reason is not None
        assert "Another team verified acme.test first" in dropped.failure_reason
        # Its own checks keep it failed, whatever DNS says (here: its key is not published).
        checked = await verify_domain(spool, config, dropped, resolver)
        assert checked is not None and checked.status == "failed"
        # A verified name is refused to every other team, as the contract says.
        with pytest.raises(ApiError, match="registered already"):
            await create_domain(spool, config, "team-c", "acme.test")
        # A subdomain is another zone's records: another team may add it.
        await create_domain(spool, config, OTHER_TEAM, "mail.acme.test")
        await delete_domain(spool, TEAM, mine.id)
        await create_domain(spool, config, "team-c", "acme.test")


async def test_a_name_verified_by_two_teams_at_once_goes_to_one(
    tmp_path: Path, dns_server: AuthoritativeDnsServer
) -> None:
    config = make_config(tmp_path, dns_server.nameserver, dkim_key_bits=QUICK_KEY_BITS)
    resolver = build_resolver(config)
    async with open_spool(tmp_path / "spool") as spool:
        claims = [await create_domain(spool, config, team, "both.test") for team in TEAMS]
        for domain in claims:  # both keys at the selector: DNS proves both
            publish_required(dns_server, domain, config)
            await start_verification(spool, config, domain.team_id, domain.id)
        async with trio.open_nursery() as nursery:
            for domain in claims:
                nursery.start_soon(verify_domain, spool, config, domain, resolver)
        after = [get_domain(spool, d.team_id, d.id) for d in claims]
        assert sorted(d.status for d in after) == ["failed", "verified"]
        winner = next(d for d in after if d.status == "verified")
        assert spool.get("domains", b"verified/both.test") is not None
        with pytest.raises(ApiError, match="registered already"):
            await create_domain(spool, config, "team-c", "both.test")
        assert winner.failure_reason is None


async def test_names_verified_before_their_entries_were_kept_are_owned(tmp_path: Path) -> None:
    config = make_config(tmp_path, "127.0.0.1:53", dkim_key_bits=QUICK_KEY_BITS)
    async with open_spool(tmp_path / "spool") as spool:
        old = await create_domain(spool, config, TEAM, "old.test")
        await save_domain(spool, dataclasses.replace(old, status="verified"))
        # As an earlier version left it: an `owner/` entry for every name added, verified or
        # not, and neither `verified/` entries nor their mark.
        unverified = await create_domain(spool, config, TEAM, "unverified.test")
        batch = _core.WriteBatch()
        batch.delete("domains", b"verified-indexed")
        for domain in (old, unverified):
            DOMAIN_OWNERS.put(batch, f"owner/{domain.name}", DomainOwner(TEAM, domain.id))
        await spool.commit(batch)
        with pytest.raises(ApiError, match="registered already"):
            await create_domain(spool, config, OTHER_TEAM, "old.test")
        await create_domain(spool, config, OTHER_TEAM, "unverified.test")  # writes the entries
        assert spool.get("domains", b"verified/old.test") is not None
        assert spool.get("domains", b"verified/unverified.test") is None
        await delete_domain(spool, TEAM, old.id)
        assert spool.get("domains", b"owner/old.test") is None
        await create_domain(spool, config, OTHER_TEAM, "old.test")


async def test_list_is_newest_first_and_pages_both_ways(tmp_path: Path) -> None:
    config = make_config(tmp_path, "127.0.0.1:53", dkim_key_bits=QUICK_KEY_BITS)
    async with open_spool(tmp_path / "spool") as spool:
        created = [await create_domain(spool, config, TEAM, f"d{i}.test") for i in range(5)]
        newest_first = [d.id for d in reversed(created)]
        everything, more = list_domains(spool, TEAM)
        assert ([d.id for d in everything], more) == (newest_first, False)

        page, more = list_domains(spool, TEAM, limit=2)
        assert ([d.id for d in page], more) == (newest_first[:2], True)
        page, more = list_domains(spool, TEAM, limit=2, after=page[-1].id)
        assert ([d.id for d in page], more) == (newest_first[2:4], True)
        page, more = list_domains(spool, TEAM, limit=2, after=page[-1].id)
        assert ([d.id for d in page], more) == (newest_first[4:], False)
        page, more = list_domains(spool, TEAM, limit=2, before=newest_first[4])
        assert ([d.id for d in page], more) == (newest_first[2:4], True)
        page, more = list_domains(spool, TEAM, limit=3, before=newest_first[2])
        assert ([d.id for d in page], more) == (newest_first[:2], False)

        with pytest.raises(ApiError, match="between 1 and 100"):
            list_domains(spool, TEAM, limit=0)
        with pytest.raises(ApiError, match="cannot be combined"):
            list_domains(spool, TEAM, after=created[0].id, before=created[1].id)


# --- verification against a real DNS server ----------------------------------------------------


async def test_verification_follows_what_dns_publishes(
    tmp_path: Path, dns_server: AuthoritativeDnsServer
) -> None:
    config = make_config(tmp_path, dns_server.nameserver)
    resolver = build_resolver(config)
    clock = SettableClock()
    async with open_spool(tmp_path / "spool", clock) as spool:
        domain = await create_domain(spool, config, TEAM, "acme.test")
        # Checks count only once verification was asked for.
        assert await verify_domain(spool, config, domain, resolver) is None

        domain = await start_verification(spool, config, TEAM, domain.id)
        assert statuses(domain) == {
            "domain": "pending",
            "SPF/MX": "pending",
            "SPF/TXT": "pending",
            "DKIM/TXT": "pending",
            "DMARC/TXT": "pending",
        }
        # Nothing published: pending (DNS changes take time).
        checked = await verify_domain(spool, config, domain, resolver)
        assert statuses(checked)["domain"] == "pending"
        assert checked is not None
        assert checked.record_details["DKIM/TXT"] == (
            "no TXT record at postwire._domainkey.acme.test"
        )
        assert find_verified_domain_for_sender(spool, TEAM, "acme.test") is None

        # DKIM and SPF published, DMARC not: verified all the same.
        publish_required(dns_server, domain, config)
        checked = await verify_domain(spool, config, domain, resolver)
        assert statuses(checked) == {
            "domain": "verified",
            "SPF/MX": "verified",
            "SPF/TXT": "verified",
            "DKIM/TXT": "verified",
            "DMARC/TXT": "pending",
        }
        assert checked is not None
        assert checked.last_checked_at_ms == clock.ms
        assert to_json(checked, config)["status"] == "verified"
        assert {r["status"] for r in to_json(checked, config)["records"]} == {"verified"}  # type: ignore[union-attr]
        dns_server.publish("_dmarc.acme.test", "TXT", "v=DMARC1; p=quarantine")
        checked = await verify_domain(spool, config, domain, resolver)
        assert statuses(checked)["DMARC/TXT"] == "verified"

        # Any address under the verified domain may send; other teams' and names may not.
        for sender_domain in ("acme.test", "ACME.test", "mail.acme.test", "a.b.acme.test"):
            found = find_verified_domain_for_sender(spool, TEAM, sender_domain)
            assert found is not None and found.id == domain.id, sender_domain
        for sender_domain in ("notacme.test", "test", "acme.test.evil", "bad..acme.test"):
            assert find_verified_domain_for_sender(spool, TEAM, sender_domain) is None
        assert find_verified_domain_for_sender(spool, OTHER_TEAM, "acme.test") is None

        # The DKIM key replaced by another one: wrong, so pending within the window...
        other_key = _core.generate_dkim_key("rsa", 1024).dns_txt
        dns_server.publish("postwire._domainkey.acme.test", "TXT", other_key)
        checked = await verify_domain(spool, config, domain, resolver)
        assert statuses(checked)["DKIM/TXT"] == "pending"
        assert statuses(checked)["domain"] == "partially_verified"
        assert checked is not None
        assert "not this domain's key" in checked.record_details["DKIM/TXT"]
        assert find_verified_domain_for_sender(spool, TEAM, "mail.acme.test") is None
        # ... and failed once 72 hours have passed since verification started.
        clock.ms += FAILED_AFTER_MS
        checked = await verify_domain(spool, config, domain, resolver)
        assert statuses(checked)["DKIM/TXT"] == "failed"
        assert statuses(checked)["domain"] == "partially_failed"

        # Asking again restarts the window; the SPF record withdrawn: pending, not verified.
        dns_server.publish("postwire._domainkey.acme.test", "TXT", domain.dkim_dns_txt)
        dns_server.withdraw("send.acme.test", "TXT")
        await start_verification(spool, config, TEAM, domain.id)
        checked = await verify_domain(spool, config, domain, resolver)
        assert statuses(checked)["SPF/TXT"] == "pending"
        assert statuses(checked)["DKIM/TXT"] == "verified"
        assert statuses(checked)["domain"] == "partially_verified"
        assert find_verified_domain_for_sender(spool, TEAM, "acme.test") is None


async def test_no_answer_keeps_a_verified_domain_verified(
    tmp_path: Path, dns_server: AuthoritativeDnsServer
) -> None:
    config = make_config(tmp_path, dns_server.nameserver)
    async with open_spool(tmp_path / "spool") as spool:
        domain = await create_domain(spool, config, TEAM, "acme.test")
        publish_required(dns_server, domain, config)
        await start_verification(spool, config, TEAM, domain.id)
        checked = await verify_domain(spool, config, domain, build_resolver(config))
        assert statuses(checked)["domain"] == "verified"

        # A server that is not authoritative for the domain answers REFUSED.
        elsewhere = AuthoritativeDnsServer(zones=("elsewhere",))
        elsewhere.start()
        try:
            refusing = build_resolver(make_config(tmp_path, elsewhere.nameserver))
            checked = await verify_domain(spool, config, domain, refusing)
        finally:
            elsewhere.stop()
        assert statuses(checked) == {
            "domain": "verified",
            "SPF/MX": "verified",
            "SPF/TXT": "verified",
            "DKIM/TXT": "verified",
            "DMARC/TXT": "temporary_failure",
        }
        assert checked is not None
        assert "REFUSED" in checked.record_details["SPF/TXT"]

        # A new domain whose checks time out: temporary_failure records, pending domain.
        fresh = await create_domain(spool, config, TEAM, "fresh.test")
        await start_verification(spool, config, TEAM, fresh.id)
        silent = build_resolver(make_config(tmp_path, "127.0.0.1:9"))  # nothing listens
        silent.lifetime = 0.5
        checked = await verify_domain(spool, config, fresh, silent)
        assert statuses(checked) == {
            "domain": "pending",
            "SPF/MX": "temporary_failure",
            "SPF/TXT": "temporary_failure",
            "DKIM/TXT": "temporary_failure",
            "DMARC/TXT": "temporary_failure",
        }


# --- the service -------------------------------------------------------------------------------


async def wait_for_status(spool: Spool, domain_id: str, status: str) -> DomainRecord:
    with trio.fail_after(15):
        while True:
            domain = get_domain(spool, TEAM, domain_id)
            if domain.status == status:
                return domain
            await trio.sleep(0.02)


async def test_verifier_service_checks_on_request_at_start_and_periodically(
    tmp_path: Path, dns_server: AuthoritativeDnsServer
) -> None:
    config = make_config(tmp_path, dns_server.nameserver, interval=1)
    async with open_spool(tmp_path / "spool") as spool:
        # Asked for before the service runs: checked when it starts.
        early = await create_domain(spool, config, TEAM, "early.test")
        publish_required(dns_server, early, config)
        await start_verification(spool, config, TEAM, early.id)
        domain = await create_domain(spool, config, TEAM, "acme.test")

        deps = ServiceDeps(spool=spool)
        async with trio.open_nursery() as nursery:
            verifier: DomainVerifier = await nursery.start(serve_domain_verifier, config, deps)
            await wait_for_status(spool, early.id, "verified")

            # Not asked for: left alone, whatever DNS holds.
            publish_required(dns_server, domain, config)
            await trio.sleep(0.3)
            assert get_domain(spool, TEAM, domain.id).status == "not_started"

            requested = await verifier.request_verification(TEAM, domain.id)
            assert requested.status == "pending"
            assert reference_json(requested.id)["id"] == domain.id
            await wait_for_status(spool, domain.id, "verified")
            with pytest.raises(ApiError, match="Domain not found"):
                await verifier.request_verification(OTHER_TEAM, domain.id)

            # The periodic check (every second here) notices a record taken away.
            dns_server.withdraw("send.acme.test", "MX")
            gone = await wait_for_status(spool, domain.id, "partially_verified")
            assert gone.record_statuses["SPF/MX"] == "pending"
            assert find_verified_domain_for_sender(spool, TEAM, "acme.test") is None

            # A deleted domain is not brought back by a check.
            await delete_domain(spool, TEAM, early.id)
            await trio.sleep(1.5)
            with pytest.raises(ApiError):
                get_domain(spool, TEAM, early.id)

            # Stopping: the service returns by itself.
            deps.stopping.set()
            with trio.fail_after(10):
                while nursery.child_tasks:
                    await trio.sleep(0.01)
