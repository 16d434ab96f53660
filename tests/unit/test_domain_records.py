"""Sending domains, the pure parts: records, names, statuses, the verification policy."""

from __future__ import annotations

from pathlib import Path

import dns.message
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.resolver
import pytest

from postwire.config import Config, DeliveryConfig, DomainsConfig
from postwire.domains.records import (
    FAILED_AFTER_MS,
    CheckOutcome,
    DnsRecord,
    DomainStatus,
    RecordCheck,
    RecordStatus,
    dns_records,
    domain_status,
    next_record_status,
    parse_domain_name,
    parse_return_path,
    statuses_after_checks,
)
from postwire.domains.store import format_timestamp
from postwire.domains.verification import check_record, check_records
from postwire.errors import ApiError

DKIM_TXT = "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAtest+key/AB=="


def config(**delivery: object) -> Config:
    return Config(
        data_dir=Path("/nonexistent"),
        delivery=DeliveryConfig(helo_name="MX.Postwire.test.", **delivery),  # type: ignore[arg-type]
    )


# --- records -----------------------------------------------------------------------------------


def test_records_of_a_domain_with_the_default_config() -> None:
    records = dns_records("example.com", "send", DKIM_TXT, config())
    assert records == [
        DnsRecord("SPF", "send", "MX", "mx.postwire.test", "example.com", priority=10),
        DnsRecord("SPF", "send", "TXT", "v=spf1 a:mx.postwire.test -all", "example.com"),
        DnsRecord("DKIM", "postwire._domainkey", "TXT", DKIM_TXT, "example.com"),
        DnsRecord("DMARC", "_dmarc", "TXT", "v=DMARC1; p=none;", "example.com", required=False),
    ]
    assert [r.fqdn for r in records] == [
        "send.example.com",
        "send.example.com",
        "postwire._domainkey.example.com",
        "_dmarc.example.com",
    ]
    assert [r.key for r in records] == ["SPF/MX", "SPF/TXT", "DKIM/TXT", "DMARC/TXT"]


def test_records_follow_sending_ips_bounce_host_and_selector() -> None:
    cfg = Config(
        data_dir=Path("/nonexistent"),
        delivery=DeliveryConfig(
            helo_name="mx.postwire.test", sending_ips=("192.0.2.1", "2001:db8::1")
        ),
        domains=DomainsConfig(bounce_host="bounces.postwire.test", dkim_selector="s2024"),
    )
    mx, spf, dkim, _ = dns_records("example.com", "bounce", DKIM_TXT, cfg)
    assert (mx.name, mx.value, mx.priority) == ("bounce", "bounces.postwire.test", 10)
    assert spf.value == "v=spf1 ip4:192.0.2.1 ip6:2001:db8::1 -all"
    assert dkim.name == "s2024._domainkey"
    # A domain keeps the selector it was created with.
    _, _, dkim, _ = dns_records("example.com", "send", DKIM_TXT, cfg, dkim_selector="old")
    assert dkim.fqdn == "old._domainkey.example.com"


def test_record_json_is_the_contracts_record_object() -> None:
    mx, spf, *_ = dns_records("example.com", "send", DKIM_TXT, config())
    assert mx.to_json("pending") == {
        "record": "SPF",
        "name": "send",
        "type": "MX",
        "ttl": "Auto",
        "status": "pending",
        "value": "mx.postwire.test",
        "priority": 10,
    }
    assert spf.to_json("verified") == {
        "record": "SPF",
        "name": "send",
        "type": "TXT",
        "ttl": "Auto",
        "status": "verified",
        "value": "v=spf1 a:mx.postwire.test -all",
    }


def test_timestamps_are_the_contracts_text() -> None:
    assert format_timestamp(0) == "1970-01-01 00:00:00.000000+00"
    assert format_timestamp(1_696_636_076_678) == "2023-10-06 23:47:56.678000+00"


# --- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("example.com", "example.com"),
        ("Mail.EXAMPLE.com", "mail.example.com"),
        ("example.com.", "example.com"),
        ("  example.com ", "example.com"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("BÜCHER.example", "xn--bcher-kva.example"),
        ("münchen。de", "xn--mnchen-3ya.de"),  # ideographic full stop
        ("\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com", "example.com"),  # full-width
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("a-b.c-d.example", "a-b.c-d.example"),
        ("123.example", "123.example"),
        ("a" * 63 + ".com", "a" * 63 + ".com"),
        (".".join(["a" * 61] * 4) + ".co", ".".join(["a" * 61] * 4) + ".co"),  # 250 chars
    ],
)
def test_valid_domain_names(given: str, canonical: str) -> None:
    assert parse_domain_name(given) == canonical


@pytest.mark.parametrize(
    "given",
    [
        "",
        "   ",
        None,
        42,
        "localhost",
        "com.",
        "a..b.com",
        ".example.com",
        "-a.example.com",
        "a-.example.com",
        "ex_ample.com",
        "exa mple.com",
        "example.com/x",
        "user@example.com",
        "*.example.com",
        "a" * 64 + ".com",
        ".".join(["a" * 62] * 4) + ".com",  # 255 chars
        "192.0.2.1",
        "xn--zz.com",  # not valid punycode
    ],
)
def test_invalid_domain_names(given: object) -> None:
    with pytest.raises(ApiError) as refused:
        parse_domain_name(given)
    assert (refused.value.status, refused.value.name) == (422, "validation_error")
    assert "domain name" in refused.value.message


def test_invalid_domain_name_message_names_it() -> None:
    with pytest.raises(ApiError, match="The `localhost` domain name is invalid: it needs at least"):
        parse_domain_name("localhost")


@pytest.mark.parametrize(
    ("given", "label"), [(None, "send"), ("send", "send"), ("Bounces", "bounces"), ("m-1", "m-1")]
)
def test_return_path(given: object, label: str) -> None:
    assert parse_return_path(given) == label


@pytest.mark.parametrize("given", ["", "a.b", "-x", "x_y", "a" * 64, 5, ["send"]])
def test_invalid_return_path(given: object) -> None:
    with pytest.raises(ApiError, match="`custom_return_path` field must be a single subdomain"):
        parse_return_path(given)


# --- statuses ----------------------------------------------------------------------------------

RECORDS = dns_records("example.com", "send", DKIM_TXT, config())


@pytest.mark.parametrize(
    ("spf_mx", "spf_txt", "dkim", "expected"),
    [
        ("not_started", "not_started", "not_started", "not_started"),
        ("pending", "pending", "pending", "pending"),
        ("pending", "temporary_failure", "not_started", "pending"),
        ("temporary_failure", "temporary_failure", "temporary_failure", "pending"),
        ("verified", "verified", "verified", "verified"),
        ("verified", "pending", "verified", "partially_verified"),
        ("verified", "temporary_failure", "not_started", "partially_verified"),
        ("verified", "failed", "verified", "partially_failed"),
        ("failed", "failed", "failed", "failed"),
        ("failed", "pending", "pending", "failed"),
        ("failed", "temporary_failure", "not_started", "failed"),
    ],
)
def test_domain_status_from_required_records(
    spf_mx: RecordStatus, spf_txt: RecordStatus, dkim: RecordStatus, expected: DomainStatus
) -> None:
    statuses = {"SPF/MX": spf_mx, "SPF/TXT": spf_txt, "DKIM/TXT": dkim}
    assert domain_status(RECORDS, statuses) == expected
    # DMARC is recommended only: whatever its status, the domain's is the same.
    for dmarc in ("not_started", "pending", "failed", "verified", "temporary_failure"):
        assert domain_status(RECORDS, {**statuses, "DMARC/TXT": dmarc}) == expected  # type: ignore[dict-item]


def test_records_never_checked_count_as_not_started() -> None:
    assert domain_status(RECORDS, {}) == "not_started"
    assert domain_status(RECORDS, {"DKIM/TXT": "verified"}) == "partially_verified"


HOUR = 3600 * 1000
YOUNG = FAILED_AFTER_MS - 1
OLD = FAILED_AFTER_MS


@pytest.mark.parametrize(
    ("previous", "outcome", "age_ms", "expected"),
    [
        # Found is verified, whatever came before and however long it took.
        ("not_started", "found", 0, "verified"),
        ("pending", "found", OLD, "verified"),
        ("failed", "found", 10 * OLD, "verified"),
        # Missing or wrong: pending while DNS may still be catching up, failed after.
        ("pending", "missing", 0, "pending"),
        ("pending", "missing", YOUNG, "pending"),
        ("pending", "missing", OLD, "failed"),
        ("pending", "mismatch", HOUR, "pending"),
        ("pending", "mismatch", OLD, "failed"),
        ("verified", "missing", YOUNG, "pending"),
        ("verified", "mismatch", OLD, "failed"),  # a verified domain loses its record later
        ("failed", "missing", OLD, "failed"),
        # No answer says nothing about the record: definite statuses stay.
        ("verified", "temporary_failure", OLD, "verified"),
        ("failed", "temporary_failure", OLD, "failed"),
        ("pending", "temporary_failure", 0, "temporary_failure"),
        ("not_started", "temporary_failure", OLD, "temporary_failure"),
        ("temporary_failure", "temporary_failure", OLD, "temporary_failure"),
        ("temporary_failure", "missing", YOUNG, "pending"),
    ],
)
def test_verification_policy(
    previous: RecordStatus, outcome: CheckOutcome, age_ms: int, expected: RecordStatus
) -> None:
    started = 1_700_000_000_000
    status = next_record_status(
        previous, outcome, verification_started_at_ms=started, now_ms=started + age_ms
    )
    assert status == expected


def test_statuses_after_checks_keep_records_not_checked() -> None:
    mx, _, dkim, _ = RECORDS
    checks = [RecordCheck(mx, "found", ""), RecordCheck(dkim, "missing", "")]
    statuses = statuses_after_checks(
        {"SPF/TXT": "verified", "DKIM/TXT": "verified"},
        checks,
        verification_started_at_ms=0,
        now_ms=HOUR,
    )
    assert statuses == {"SPF/MX": "verified", "SPF/TXT": "verified", "DKIM/TXT": "pending"}


# --- what a check makes of DNS answers (a stand-in resolver; the real one is in integration) ---


class ScriptedResolver:
    """Answers from a table: (name, type) -> rdata texts, or an exception to raise."""

    def __init__(self, table: dict[tuple[str, str], list[str] | Exception]) -> None:
        self.table = table

    async def resolve(self, qname: str, rdtype: str) -> dns.resolver.Answer:
        entry = self.table.get((qname, rdtype), dns.resolver.NXDOMAIN())
        if isinstance(entry, Exception):
            raise entry
        name = dns.name.from_text(qname)
        response = dns.message.make_response(dns.message.make_query(name, rdtype))
        rrset = response.find_rrset(
            response.answer, name, dns.rdataclass.IN, dns.rdatatype.from_text(rdtype), create=True
        )
        for text in entry:
            rrset.add(dns.rdata.from_text("IN", rdtype, text), 60)
        return dns.resolver.Answer(
            name, dns.rdatatype.from_text(rdtype), dns.rdataclass.IN, response
        )


def quoted(value: str, size: int = 255) -> str:
    return " ".join(f'"{value[i : i + size]}"' for i in range(0, len(value), size))


MX, SPF, DKIM, DMARC = RECORDS


@pytest.mark.parametrize(
    ("record", "answers", "outcome"),
    [
        (MX, ["10 mx.postwire.test."], "found"),
        (MX, ["10 MX.Postwire.Test.", "20 backup.example.com."], "found"),
        (MX, ["20 mx.postwire.test."], "mismatch"),  # priority differs
        (MX, ["10 other.example.com."], "mismatch"),
        (SPF, ['"v=spf1 a:mx.postwire.test -all"'], "found"),
        (SPF, ['"v=spf1  a:MX.postwire.test" " -all"', '"google-site-verification=x"'], "found"),
        (SPF, ['"v=spf1 a:mx.postwire.test ~all"'], "mismatch"),
        (SPF, ['"v=spf1 a:mx.postwire.test -all"', '"v=spf1 -all"'], "mismatch"),  # two SPF
        (SPF, ['"google-site-verification=x"'], "missing"),
        (DKIM, [quoted(DKIM_TXT, 40)], "found"),  # split into several strings
        (DKIM, [quoted(DKIM_TXT.replace("p=MIIB", "p= MII B"))], "found"),  # folded p=
        (DKIM, ['"p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAtest+key/AB=="'], "found"),
        (
            DKIM,
            ['"v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAother"'],
            "mismatch",
        ),
        (DKIM, ['"v=DKIM1; k=rsa; p="'], "mismatch"),  # a revoked key
        (DMARC, ['"v=DMARC1; p=reject; rua=mailto:d@example.com"'], "found"),
        (DMARC, ['"something else"'], "missing"),
    ],
)
async def test_check_compares_what_dns_holds(
    record: DnsRecord, answers: list[str], outcome: CheckOutcome
) -> None:
    resolver = ScriptedResolver({(record.fqdn, record.type): answers})
    check = await check_record(record, resolver)
    assert check.outcome == outcome, check.detail


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (dns.resolver.NXDOMAIN(), "missing"),
        (dns.resolver.NoAnswer(), "missing"),
        (dns.resolver.LifetimeTimeout(timeout=5.0, errors=[]), "temporary_failure"),
        (dns.resolver.NoNameservers(), "temporary_failure"),  # SERVFAIL, REFUSED
        (OSError("network is unreachable"), "temporary_failure"),
    ],
)
async def test_check_of_failed_lookups(error: Exception, outcome: CheckOutcome) -> None:
    check = await check_record(SPF, ScriptedResolver({(SPF.fqdn, "TXT"): error}))
    assert check.outcome == outcome


async def test_check_records_keeps_the_order_of_records() -> None:
    resolver = ScriptedResolver({(MX.fqdn, "MX"): ["10 mx.postwire.test."]})
    checks = await check_records(RECORDS, resolver)
    assert [c.record for c in checks] == RECORDS
    assert [c.outcome for c in checks] == ["found", "missing", "missing", "missing"]
