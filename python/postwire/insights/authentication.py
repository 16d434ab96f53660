"""Authentication findings of one sending identity from what DNS says (`dns_facts`). Pure.

Postwire signs every email with the key of the team's verified domain (d= that domain), and
sends it with an envelope sender under the domain's return-path subdomain (`send.<domain>`),
so DKIM and SPF pass when the domain's records are published; the From address is at or under
that domain. DMARC passes when DKIM or SPF passes and is aligned with From: relaxed alignment
(the default) asks both names to share an organizational domain, which the team's verified
domain stands in for here (Postwire keeps no public-suffix list); strict asks them equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from postwire.insights.catalogue import Finding, finding
from postwire.insights.dns_facts import AuthFacts, Identity, TxtLookup

_WHITESPACE = re.compile(r"\s+")
DMARC_POLICIES = ("none", "quarantine", "reject")


@dataclass(frozen=True, slots=True)
class DmarcRecord:
    policy: str  # p=, or sp= when the record is a parent domain's and has one
    pct: int
    adkim: str  # "r" | "s"
    aspf: str


def parse_dmarc(value: str, *, for_subdomain: bool) -> DmarcRecord | str:
    """The record's policy, or what makes it unusable (RFC 7489 section 6.3)."""
    tags: dict[str, str] = {}
    for part in value.split(";"):
        name, sep, tag_value = part.partition("=")
        if sep:
            tags.setdefault(name.strip().lower(), tag_value.strip())
    if value.split(";", 1)[0].replace(" ", "").lower() != "v=dmarc1":
        return "it does not start with v=DMARC1"
    policy = tags.get("p", "").lower()
    if policy not in DMARC_POLICIES:
        return "its p= tag is missing or not none, quarantine or reject"
    sub_policy = tags.get("sp", "").lower()
    if for_subdomain and sub_policy in DMARC_POLICIES:
        policy = sub_policy
    try:
        pct = min(max(int(tags.get("pct", "100")), 0), 100)
    except ValueError:
        pct = 100  # receivers ignore a malformed pct
    adkim = "s" if tags.get("adkim", "r").lower() == "s" else "r"
    aspf = "s" if tags.get("aspf", "r").lower() == "s" else "r"
    return DmarcRecord(policy, pct, adkim, aspf)


def _at_or_under(name: str, base: str) -> bool:
    return name == base or name.endswith("." + base)


def aligned(name: str, identity: Identity, mode: str) -> bool:
    """Whether `name` (d= or the return path) is aligned with the From domain."""
    if mode == "s":
        return name == identity.from_domain
    base = identity.signing_domain
    return _at_or_under(name, base) and _at_or_under(identity.from_domain, base)


def _dkim_key(txt: str) -> str | None:
    for part in txt.split(";"):
        tag, sep, value = part.partition("=")
        if sep and tag.strip() == "p":
            return _WHITESPACE.sub("", value)
    return None


def _unavailable(lookup: TxtLookup) -> Finding:
    return finding("dns_unavailable", name=lookup.name, detail=lookup.failed or "")


def _dkim_passes(facts: AuthFacts, found: list[Finding]) -> bool | None:
    """Whether receivers can verify the signature; None when DNS did not say."""
    lookup = facts.dkim
    if lookup.failed is not None:
        found.append(_unavailable(lookup))
        return None
    published = [key for key in map(_dkim_key, lookup.values) if key is not None]
    if not published:
        found.append(finding("dkim_key_missing", name=lookup.name))
        return False
    if _dkim_key(facts.identity.dkim_txt) not in published:
        found.append(finding("dkim_key_mismatch", name=lookup.name))
        return False
    return True


def _spf_passes(facts: AuthFacts, found: list[Finding]) -> bool | None:
    lookup = facts.spf
    host = facts.identity.return_path_host
    if lookup.failed is not None:
        found.append(_unavailable(lookup))
        return None
    records = [v for v in lookup.values if v.strip().lower().split(" ", 1)[0] == "v=spf1"]
    if not records:
        found.append(finding("spf_missing", host=host))
        return False
    expected = facts.identity.spf_expected
    wanted = [m for m in expected.lower().split()[1:] if m.lstrip("+-~?") != "all"]
    listed = set(records[0].lower().split())
    if len(records) > 1 or not all(mechanism in listed for mechanism in wanted):
        found.append(finding("spf_mismatch", host=host, expected=expected))
        return False
    return True


def _dmarc(facts: AuthFacts, found: list[Finding]) -> DmarcRecord | None:
    lookup = facts.dmarc
    identity = facts.identity
    if lookup.failed is not None:
        found.append(_unavailable(lookup))
        return None
    if not lookup.values:
        found.append(finding("dmarc_missing", name=lookup.name, domain=identity.signing_domain))
        return None
    domain = lookup.name.removeprefix("_dmarc.")
    if len(lookup.values) > 1:
        found.append(finding("dmarc_invalid", name=lookup.name, problem="it has several records"))
        return None
    parsed = parse_dmarc(lookup.values[0], for_subdomain=domain != identity.from_domain)
    if isinstance(parsed, str):
        found.append(finding("dmarc_invalid", name=lookup.name, problem=parsed))
        return None
    if parsed.policy == "none":
        found.append(finding("dmarc_policy_none", name=lookup.name, domain=domain))
    else:
        note = "" if parsed.pct == 100 else f", applied to {parsed.pct}% of failing mail"
        found.append(
            finding("dmarc_policy_enforced", name=lookup.name, policy=parsed.policy, pct_note=note)
        )
        if parsed.pct < 100:
            found.append(finding("dmarc_partial_pct", pct=parsed.pct))
    return parsed


def authentication_findings(facts: AuthFacts) -> list[Finding]:
    """DKIM, SPF and DMARC as receivers will see them for an email of this identity."""
    identity = facts.identity
    found: list[Finding] = []
    dmarc_found: list[Finding] = []
    dmarc = _dmarc(facts, dmarc_found)
    adkim = dmarc.adkim if dmarc is not None else "r"
    aspf = dmarc.aspf if dmarc is not None else "r"
    mode_names = {"r": "relaxed", "s": "strict"}

    dkim_ok = _dkim_passes(facts, found)
    dkim_aligned = aligned(identity.signing_domain, identity, adkim)
    if dkim_ok and dkim_aligned:
        found.append(
            finding(
                "dkim_aligned",
                signing_domain=identity.signing_domain,
                selector=identity.selector,
                from_domain=identity.from_domain,
            )
        )
    elif dkim_ok:
        found.append(
            finding(
                "dkim_not_aligned",
                signing_domain=identity.signing_domain,
                from_domain=identity.from_domain,
                mode=mode_names[adkim],
            )
        )

    spf_ok = _spf_passes(facts, found)
    spf_aligned = aligned(identity.return_path_host, identity, aspf)
    if spf_ok and spf_aligned:
        found.append(
            finding("spf_aligned", host=identity.return_path_host, from_domain=identity.from_domain)
        )
    elif spf_ok:
        found.append(
            finding(
                "spf_not_aligned",
                host=identity.return_path_host,
                from_domain=identity.from_domain,
                mode=mode_names[aspf],
            )
        )

    found += dmarc_found
    if dmarc is not None:
        through = [
            name
            for name, ok, is_aligned in (
                ("DKIM", dkim_ok, dkim_aligned),
                ("SPF", spf_ok, spf_aligned),
            )
            if ok and is_aligned
        ]
        if through:
            found.append(finding("dmarc_pass", through=" and ".join(through)))
        elif dkim_ok is not None and spf_ok is not None:  # both known, neither passing
            found.append(
                finding("dmarc_fail", from_domain=identity.from_domain, policy=dmarc.policy)
            )
    return found
