"""The DNS records a sending domain publishes, and what checking them means. Pure functions.

A domain asks for three required records and recommends one:

    SPF    MX   <return_path>.<domain>         10 <bounce host>        bounces come back to us
    SPF    TXT  <return_path>.<domain>         v=spf1 ip4:.. -all      envelope sender passes SPF
    DKIM   TXT  <selector>._domainkey.<domain> v=DKIM1; k=rsa; p=..    signatures verify
    DMARC  TXT  _dmarc.<domain>                v=DMARC1; p=none;       recommended, never required

The wire contract has no way to mark a record optional: its `record` values are SPF, DKIM,
Tracking, TrackingCAA and Receiving MX, and the Rust SDK refuses a domain whose `records` hold any
other. So the DMARC record is produced here (`required=False`) for the CLI and the dashboard, but
stays out of the domain's REST `records`, and it never counts toward the domain's status.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

import dns.exception
import dns.name

from postwire.errors import ApiError, validation_error

if TYPE_CHECKING:
    from postwire.config import Config

RecordStatus = Literal["not_started", "pending", "verified", "failed", "temporary_failure"]
DomainStatus = Literal[
    "not_started", "pending", "verified", "failed", "partially_verified", "partially_failed"
]
# What one look-up of one record found: the value asked for, nothing (NXDOMAIN, no record of
# that type), something else, or no answer at all (timeout, SERVFAIL).
CheckOutcome = Literal["found", "missing", "mismatch", "temporary_failure"]

DEFAULT_RETURN_PATH: Final = "send"
BOUNCE_MX_PRIORITY: Final = 10
DMARC_RECOMMENDED: Final = "v=DMARC1; p=none;"
# A record that is still absent or wrong this long after verification started is `failed`;
# before that it is `pending`, as DNS changes take time to be made and to propagate.
FAILED_AFTER_MS: Final = 72 * 3600 * 1000

_LDH_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class DnsRecord:
    """One record a domain should publish, in the contract's terms."""

    record: Literal["SPF", "DKIM", "DMARC"]
    # Relative to the domain, as the contract shows it ("send", "postwire._domainkey").
    name: str
    type: Literal["TXT", "MX"]
    value: str
    domain: str
    priority: int | None = None
    # Recommended records are shown but never checked toward the domain's status.
    required: bool = True

    @property
    def fqdn(self) -> str:
        """The absolute name to look up, without the final dot."""
        return f"{self.name}.{self.domain}"

    @property
    def key(self) -> str:
        """Where the record's status is kept in the domain: "SPF/MX", "DKIM/TXT", ..."""
        return f"{self.record}/{self.type}"

    def to_json(self, status: RecordStatus) -> dict[str, object]:
        """The contract's record object (section 5.3); `priority` only on MX records."""
        body: dict[str, object] = {
            "record": self.record,
            "name": self.name,
            "type": self.type,
            "ttl": "Auto",
            "status": status,
            "value": self.value,
        }
        if self.priority is not None:
            body["priority"] = self.priority
        return body


@dataclass(frozen=True, slots=True)
class RecordCheck:
    """The result of looking up one record: what was found, and in words for people."""

    record: DnsRecord
    outcome: CheckOutcome
    detail: str


def dns_records(
    domain: str,
    custom_return_path: str,
    dkim_txt: str,
    config: Config,
    *,
    dkim_selector: str | None = None,
) -> list[DnsRecord]:
    """The records `domain` publishes: SPF MX, SPF TXT, DKIM TXT (required), DMARC (recommended).

    `dkim_txt` is the key's TXT value (`DkimKey.dns_txt`); `dkim_selector` defaults to the
    configured one, but a domain keeps the selector it was created with. The SPF record lists
    `delivery.sending_ips` or else authorises `a:<delivery.helo_name>`.
    """
    selector = dkim_selector or config.domains.dkim_selector
    bounce_host = config.domains.bounce_host or config.delivery.helo_name.lower().rstrip(".")
    return [
        DnsRecord(
            "SPF", custom_return_path, "MX", bounce_host, domain, priority=BOUNCE_MX_PRIORITY
        ),
        DnsRecord("SPF", custom_return_path, "TXT", spf_value(config), domain),
        DnsRecord("DKIM", f"{selector}._domainkey", "TXT", dkim_txt, domain),
        DnsRecord("DMARC", "_dmarc", "TXT", DMARC_RECOMMENDED, domain, required=False),
    ]


def spf_value(config: Config) -> str:
    """`v=spf1 ip4:.. ip6:.. -all` from `delivery.sending_ips`, else `v=spf1 a:<helo> -all`."""
    ips = config.delivery.sending_ips
    if not ips:
        return f"v=spf1 a:{config.delivery.helo_name.lower().rstrip('.')} -all"
    mechanisms = [("ip6:" if ":" in ip else "ip4:") + ip for ip in ips]
    return "v=spf1 " + " ".join(mechanisms) + " -all"


# --- names -------------------------------------------------------------------------------------


def parse_domain_name(name: object) -> str:
    """The domain's canonical name: lower case, IDN in punycode, no final dot.

    Raises 422 `validation_error` unless it has at least two labels of letters, digits and
    hyphens (not at either end), each at most 63 characters, 253 in all, and a top-level label
    that is not all digits (an IP address is not a domain).
    """
    if not isinstance(name, str) or not name.strip():
        raise validation_error("The `name` field must be a domain name, such as example.com.")
    return _parse_domain_text(name)


# Every SMTP and API email parses its sender's domain: a few names, over and over.
@functools.lru_cache(maxsize=4096)
def _parse_domain_text(name: str) -> str:
    text = name.strip()
    if text.endswith("."):
        text = text[:-1]  # the absolute form of the same name
    try:
        # UTS 46 mapping and IDNA 2008: "Bücher.Example" -> "xn--bcher-kva.example".
        ascii_name = dns.name.from_unicode(text, idna_codec=dns.name.IDNA_2008).to_text(
            omit_final_dot=True
        )
    except dns.exception.DNSException:
        raise _invalid_name(name, "it is not a valid internationalised domain name") from None
    ascii_name = ascii_name.lower()
    labels = ascii_name.split(".")
    if len(labels) < 2:
        raise _invalid_name(name, "it needs at least two labels, such as example.com")
    if len(ascii_name) > 253:
        raise _invalid_name(name, "it is longer than 253 characters")
    for label in labels:
        if not _LDH_LABEL.match(label):
            raise _invalid_name(
                name,
                "each label must be 1 to 63 letters, digits or hyphens, not starting or "
                "ending with a hyphen",
            )
        if label.startswith("xn--") and not _is_valid_a_label(label):
            raise _invalid_name(name, f"{label!r} is not valid punycode")
    if labels[-1].isdigit():
        raise _invalid_name(name, "an IP address is not a domain name")
    return ascii_name


def _is_valid_a_label(label: str) -> bool:
    try:
        dns.name.IDNA_2008.decode(label.encode())
    except dns.exception.DNSException:
        return False
    return True


def _invalid_name(name: str, why: str) -> ApiError:
    return validation_error(f"The `{name}` domain name is invalid: {why}.")


def parse_return_path(value: object) -> str:
    """The return-path subdomain label (default `send`); 422 unless a single LDH label."""
    if value is None:
        return DEFAULT_RETURN_PATH
    return parse_subdomain_label("custom_return_path", value)


def parse_subdomain_label(field_name: str, value: object) -> str:
    """One DNS label under the domain, lower-cased; 422 `validation_error` naming the field."""
    if isinstance(value, str):
        label = value.strip().lower()
        if _LDH_LABEL.match(label):
            return label
    raise validation_error(
        f"The `{field_name}` field must be a single subdomain label of letters, digits and "
        "hyphens, at most 63 characters."
    )


# --- statuses ----------------------------------------------------------------------------------


def domain_status(
    records: Iterable[DnsRecord], statuses: Mapping[str, RecordStatus]
) -> DomainStatus:
    """The domain's status from its required records' statuses; recommended ones never count.

    All verified: verified. Some verified and some failed: partially_failed; some verified and
    the rest still open: partially_verified. None verified: failed if any failed, not_started
    if none was ever checked, else pending (temporary failures are still pending).
    """
    required = [statuses.get(r.key, "not_started") for r in records if r.required]
    if not required or all(s == "not_started" for s in required):
        return "not_started"
    verified = sum(s == "verified" for s in required)
    failed = any(s == "failed" for s in required)
    if verified == len(required):
        return "verified"
    if verified:
        return "partially_failed" if failed else "partially_verified"
    return "failed" if failed else "pending"


def next_record_status(
    previous: RecordStatus,
    outcome: CheckOutcome,
    *,
    verification_started_at_ms: int,
    now_ms: int,
) -> RecordStatus:
    """A record's status after a check: the verification policy.

    Found: verified. Missing or wrong: pending for `FAILED_AFTER_MS` after verification started
    (it may still be propagating), failed after that; a verified record that disappears later
    in life thus fails at once. No answer (timeout, SERVFAIL) says nothing about the record, so
    a verified or failed record keeps its status, and any other becomes temporary_failure.
    """
    if outcome == "found":
        return "verified"
    if outcome == "temporary_failure":
        return previous if previous in ("verified", "failed") else "temporary_failure"
    if now_ms - verification_started_at_ms < FAILED_AFTER_MS:
        return "pending"
    return "failed"


def statuses_after_checks(
    previous: Mapping[str, RecordStatus],
    checks: Sequence[RecordCheck],
    *,
    verification_started_at_ms: int,
    now_ms: int,
) -> dict[str, RecordStatus]:
    """Every record's status after `checks`; records not checked keep theirs."""
    statuses = dict(previous)
    for check in checks:
        statuses[check.record.key] = next_record_status(
            previous.get(check.record.key, "not_started"),
            check.outcome,
            verification_started_at_ms=verification_started_at_ms,
            now_ms=now_ms,
        )
    return statuses
