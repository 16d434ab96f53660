"""Authentication findings from DNS facts: published, missing and wrong records, DMARC
policies, alignment and whether the email passes DMARC."""

from __future__ import annotations

import dataclasses

from postwire.insights.authentication import authentication_findings, parse_dmarc
from postwire.insights.dns_facts import AuthFacts, Identity, TxtLookup

KEY = "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAtest"
IDENTITY = Identity(
    from_domain="example.com",
    signing_domain="example.com",
    selector="postwire",
    dkim_txt=KEY,
    return_path_host="send.example.com",
    spf_expected="v=spf1 a:mx.postwire.test -all",
)
GOOD = AuthFacts(
    IDENTITY,
    dkim=TxtLookup("postwire._domainkey.example.com", (KEY,)),
    spf=TxtLookup("send.example.com", ("v=spf1 a:mx.postwire.test -all",)),
    dmarc=TxtLookup("_dmarc.example.com", ("v=DMARC1; p=reject; rua=mailto:d@example.com",)),
)


def codes(facts: AuthFacts) -> list[str]:
    return [f.code for f in authentication_findings(facts)]


def test_everything_published_and_aligned() -> None:
    assert codes(GOOD) == ["dkim_aligned", "spf_aligned", "dmarc_policy_enforced", "dmarc_pass"]
    (passing,) = [f for f in authentication_findings(GOOD) if f.code == "dmarc_pass"]
    assert passing.insight().message == "This email passes DMARC through aligned DKIM and SPF."


def test_no_dmarc_record() -> None:
    facts = dataclasses.replace(GOOD, dmarc=TxtLookup("_dmarc.example.com"))
    assert codes(facts) == ["dkim_aligned", "spf_aligned", "dmarc_missing"]
    (missing,) = [f for f in authentication_findings(facts) if f.code == "dmarc_missing"]
    insight = missing.insight()
    assert insight.severity == "error"
    assert "_dmarc.example.com" in insight.message and "v=DMARC1; p=none;" in insight.fix


def test_dmarc_policy_none_and_pct() -> None:
    none = dataclasses.replace(GOOD, dmarc=TxtLookup("_dmarc.example.com", ("v=DMARC1; p=none",)))
    assert "dmarc_policy_none" in codes(none)
    partial = dataclasses.replace(
        GOOD, dmarc=TxtLookup("_dmarc.example.com", ("v=DMARC1; p=quarantine; pct=25",))
    )
    assert {"dmarc_policy_enforced", "dmarc_partial_pct"} <= set(codes(partial))


def test_invalid_dmarc_records() -> None:
    assert parse_dmarc("p=reject; v=DMARC1", for_subdomain=False) == (
        "it does not start with v=DMARC1"
    )
    assert isinstance(parse_dmarc("v=DMARC1; p=block", for_subdomain=False), str)
    several = dataclasses.replace(
        GOOD, dmarc=TxtLookup("_dmarc.example.com", ("v=DMARC1; p=none", "v=DMARC1; p=reject"))
    )
    assert "dmarc_invalid" in codes(several)


def test_a_parents_sp_applies_to_a_subdomain() -> None:
    record = parse_dmarc("v=DMARC1; p=reject; sp=none", for_subdomain=True)
    assert not isinstance(record, str) and record.policy == "none"


def test_missing_and_wrong_dkim_key_fail_dmarc_with_spf_gone_too() -> None:
    facts = dataclasses.replace(
        GOOD,
        dkim=TxtLookup("postwire._domainkey.example.com", ("v=DKIM1; k=rsa; p=OTHER",)),
        spf=TxtLookup("send.example.com"),
    )
    assert codes(facts) == [
        "dkim_key_mismatch",
        "spf_missing",
        "dmarc_policy_enforced",
        "dmarc_fail",
    ]
    facts = dataclasses.replace(facts, dkim=TxtLookup("postwire._domainkey.example.com"))
    assert codes(facts)[0] == "dkim_key_missing"


def test_spf_without_postwires_servers() -> None:
    facts = dataclasses.replace(GOOD, spf=TxtLookup("send.example.com", ("v=spf1 mx -all",)))
    assert codes(facts) == ["dkim_aligned", "spf_mismatch", "dmarc_policy_enforced", "dmarc_pass"]


def test_strict_alignment() -> None:
    strict = TxtLookup("_dmarc.example.com", ("v=DMARC1; p=reject; aspf=s; adkim=s",))
    facts = dataclasses.replace(GOOD, dmarc=strict)
    # d=example.com equals From: DKIM aligns; the return path send.example.com does not.
    assert codes(facts) == [
        "dkim_aligned",
        "spf_not_aligned",
        "dmarc_policy_enforced",
        "dmarc_pass",
    ]
    sub = dataclasses.replace(
        facts, identity=dataclasses.replace(IDENTITY, from_domain="news.example.com")
    )
    assert codes(sub) == [
        "dkim_not_aligned",
        "spf_not_aligned",
        "dmarc_policy_enforced",
        "dmarc_fail",
    ]


def test_dns_that_does_not_answer_is_not_a_failure() -> None:
    facts = dataclasses.replace(
        GOOD, dkim=TxtLookup("postwire._domainkey.example.com", failed="timed out")
    )
    assert codes(facts) == ["dns_unavailable", "spf_aligned", "dmarc_policy_enforced", "dmarc_pass"]
    both = dataclasses.replace(facts, spf=TxtLookup("send.example.com", failed="SERVFAIL"))
    assert "dmarc_fail" not in codes(both)
