"""Sending domains below the HTTP layer: their DNS records, their storage, their verification.

- `records`: pure; the records a domain publishes, name rules, statuses and the policy.
- `store`: domains in the spool, per team; the contract's JSON.
- `verification`: DNS checks, and `serve_domain_verifier`, which keeps statuses current.
"""

from postwire.domains.records import (
    DnsRecord,
    DomainStatus,
    RecordCheck,
    RecordStatus,
    dns_records,
    domain_status,
    next_record_status,
    parse_domain_name,
    parse_return_path,
)
from postwire.domains.store import (
    DomainRecord,
    create_domain,
    delete_domain,
    domain_dns_records,
    find_verified_domain_for_sender,
    get_domain,
    list_domains,
    reference_json,
    start_verification,
    to_json,
    update_domain,
)
from postwire.domains.verification import (
    DnsResolver,
    DomainVerifier,
    build_resolver,
    check_records,
    serve_domain_verifier,
    verify_domain,
)

__all__ = [
    "DnsRecord",
    "DnsResolver",
    "DomainRecord",
    "DomainStatus",
    "DomainVerifier",
    "RecordCheck",
    "RecordStatus",
    "build_resolver",
    "check_records",
    "create_domain",
    "delete_domain",
    "dns_records",
    "domain_dns_records",
    "domain_status",
    "find_verified_domain_for_sender",
    "get_domain",
    "list_domains",
    "next_record_status",
    "parse_domain_name",
    "parse_return_path",
    "reference_json",
    "serve_domain_verifier",
    "start_verification",
    "to_json",
    "update_domain",
    "verify_domain",
]
