"""What DNS says about one sending identity: the DKIM key, the return path's SPF record and the
From domain's DMARC record, looked up with dnspython through `dns.nameservers` (the same
uncached resolver domain verification uses: a check must see what DNS says now)."""

from __future__ import annotations

from dataclasses import dataclass

import dns.exception
import dns.rdtypes.ANY.TXT
import dns.resolver
import trio

from postwire.domains.verification import DnsResolver


@dataclass(frozen=True, slots=True)
class TxtLookup:
    """The TXT values at `name`; `failed` says why there is no answer (timeout, SERVFAIL),
    as opposed to an answer that there is no record (empty `values`)."""

    name: str
    values: tuple[str, ...] = ()
    failed: str | None = None


@dataclass(frozen=True, slots=True)
class Identity:
    """Who an email claims to be and how Postwire signs and sends it."""

    from_domain: str  # the From address's domain, lower case
    signing_domain: str  # the DKIM d= (the team's verified domain)
    selector: str
    dkim_txt: str  # the key record Postwire's signature needs published
    return_path_host: str  # the envelope sender's domain (`send.example.com`)
    spf_expected: str  # the SPF record Postwire asks for at the return path


@dataclass(frozen=True, slots=True)
class AuthFacts:
    identity: Identity
    dkim: TxtLookup
    spf: TxtLookup
    dmarc: TxtLookup  # where the DMARC record was found, or the From domain's name if none


async def lookup_txt(resolver: DnsResolver, name: str) -> TxtLookup:
    try:
        answer = await resolver.resolve(name, "TXT")
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return TxtLookup(name)
    except dns.exception.Timeout:
        return TxtLookup(name, failed="timed out")
    except (dns.exception.DNSException, OSError) as exc:
        return TxtLookup(name, failed=str(exc) or type(exc).__name__)
    values = [
        b"".join(rdata.strings).decode("utf-8", errors="replace")  # long values come split
        for rdata in answer
        if isinstance(rdata, dns.rdtypes.ANY.TXT.TXT)
    ]
    return TxtLookup(name, tuple(values))


def _dmarc_records(lookup: TxtLookup) -> tuple[str, ...]:
    return tuple(v for v in lookup.values if v.strip().lower().startswith("v=dmarc1"))


async def lookup_dmarc(resolver: DnsResolver, from_domain: str) -> TxtLookup:
    """The DMARC record for `from_domain`: at `_dmarc.<from_domain>`, else at each parent
    down to two labels (the DMARCbis tree walk; it finds the organizational domain's record
    without a public-suffix list). Only records starting `v=DMARC1` count."""
    labels = from_domain.split(".")
    first: TxtLookup | None = None
    for start in range(max(len(labels) - 1, 1)):
        lookup = await lookup_txt(resolver, "_dmarc." + ".".join(labels[start:]))
        first = first or lookup
        if lookup.failed is not None:
            return lookup
        records = _dmarc_records(lookup)
        if records:
            return TxtLookup(lookup.name, records)
    return TxtLookup(first.name if first else f"_dmarc.{from_domain}")


async def gather_auth_facts(resolver: DnsResolver, identity: Identity) -> AuthFacts:
    """Look up the three at once."""
    found: dict[str, TxtLookup] = {}

    async def look(kind: str, name: str) -> None:
        found[kind] = await lookup_txt(resolver, name)

    async def look_dmarc() -> None:
        found["dmarc"] = await lookup_dmarc(resolver, identity.from_domain)

    async with trio.open_nursery() as nursery:
        dkim_name = f"{identity.selector}._domainkey.{identity.signing_domain}"
        nursery.start_soon(look, "dkim", dkim_name)
        nursery.start_soon(look, "spf", identity.return_path_host)
        nursery.start_soon(look_dmarc)
    return AuthFacts(identity, found["dkim"], found["spf"], found["dmarc"])
