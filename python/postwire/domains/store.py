"""Sending domains in the spool's "domains" table, one team's at a time.

Keys, all in table "domains":

    domain/<team_id>/<domain_id>   DomainRecord    ids are UUID v7, so a team's keys sort by age
    name/<team_id>/<name>          DomainNameEntry a sender's domain is found without a scan
    verified/<name>                DomainOwner     the team that verified the name first: no
                                                   other team can add it until that team deletes it
    verified-indexed               OwnersIndexed   written once every name verified before these
                                                   entries were kept has its entry

A name has one owner because its DNS zone has one: two teams holding it would publish their
DKIM keys at the same selector. Adding a name claims nothing: any team may add a name no team
has verified, and the first to prove it in DNS owns it (its verification inserts the entry, so
two verifying at once cannot both win); the others' domains of that name are then `failed`,
with a `failure_reason` (`domains.verification_state`). So a team that adds a name it does
not hold and never verifies it (a squatter) blocks nobody. Every function takes the caller's
team and reads no other team's keys, except for that one entry. Changes to one domain (API
updates, deletion, the verifier's results) are read-modify-write; a per-domain lock keeps them
from overwriting each other within the process that owns the spool. (`owner/<name>` entries,
written for every name added by earlier versions, are no longer read; deleting a domain
deletes its own.)
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, cast

import trio

from postwire import _core
from postwire.domains.records import (
    DnsRecord,
    DomainStatus,
    RecordStatus,
    dns_records,
    parse_domain_name,
    parse_return_path,
)
from postwire.domains.request_values import REGIONS as REGIONS
from postwire.domains.request_values import (
    parse_bool,
    parse_capabilities,
    parse_region,
    parse_tls,
    parse_tracking_subdomain,
)
from postwire.domains.setup_warnings import domain_warnings
from postwire.errors import ApiError, KeyExistsError, validation_error
from postwire.store.guards import never_after_change
from postwire.store.pages import newest_first_page, newest_first_page_parked
from postwire.store.tables import Table

if TYPE_CHECKING:
    from postwire.config import Config
    from postwire.store.guards import guarded
    from postwire.store.spool import Spool

MAX_PAGE: Final = 100


@dataclass(frozen=True, slots=True)
class DomainRecord:
    """A team's sending domain, its DKIM key and where its verification stands."""

    id: str
    team_id: str
    name: str  # canonical: lower case, punycode, no final dot
    region: str
    custom_return_path: str
    open_tracking: bool
    click_tracking: bool
    tls: str  # "opportunistic" | "enforced"
    # {"sending": "enabled"|"disabled", "receiving": "disabled"}: the contract's capabilities.
    capabilities: dict[str, str]
    tracking_subdomain: str | None
    status: str  # DomainStatus
    created_at: str  # contract text: "2024-05-01 12:00:00.123000+00"
    dkim_selector: str
    dkim_private_key_pem: str = field(repr=False)
    dkim_dns_txt: str
    # By `DnsRecord.key` ("SPF/MX", "DKIM/TXT", ...): RecordStatus, and what the last check saw.
    record_statuses: dict[str, str] = field(default_factory=dict)
    record_details: dict[str, str] = field(default_factory=dict)
    # Wall-clock ms: when verification was last requested (the policy's clock) and last checked.
    verification_started_at_ms: int | None = None
    last_checked_at_ms: int | None = None
    # Why the domain is `failed` whatever its DNS says: another team verified the name first.
    failure_reason: str | None = None

    @property
    def return_path_host(self) -> str:
        """The host of the domain's envelope senders, whose MX is Postwire's bounce host."""
        return f"{self.custom_return_path}.{self.name}"


@dataclass(frozen=True, slots=True)
class DomainNameEntry:
    domain_id: str


@dataclass(frozen=True, slots=True)
class DomainOwner:
    team_id: str
    domain_id: str


@dataclass(frozen=True, slots=True)
class OwnersIndexed:
    at_ms: int


DOMAINS: Final = Table("domains", DomainRecord)
DOMAIN_NAMES: Final = Table("domains", DomainNameEntry)
DOMAIN_OWNERS: Final = Table("domains", DomainOwner)
OWNERS_INDEXED: Final = Table("domains", OwnersIndexed)
OWNERS_INDEXED_KEY: Final = "verified-indexed"


def domain_key(team_id: str, domain_id: str) -> str:
    return f"domain/{team_id}/{domain_id}"


def domain_lock_key(team_id: str, domain_id: str) -> str:
    """The key a read-change-write of the domain is guarded by (`Spool.guarded`): across
    processes and nodes, so that the service's verifier cannot write back a domain that
    `postwire domains delete` removed meanwhile, nor undo a change of the API's."""
    return f"domains/{domain_key(team_id, domain_id)}"


def guarded_domain(spool: Spool, team_id: str, domain_id: str) -> guarded:
    """Attempts of a guarded change of the domain (`Spool.guarded`)."""
    return spool.guarded(domain_lock_key(team_id, domain_id))


def name_key(team_id: str, name: str) -> str:
    return f"name/{team_id}/{name}"


def owner_key(name: str) -> str:
    return f"verified/{name}"


def _legacyowner_key(name: str) -> str:
    return f"owner/{name}"


def not_found() -> ApiError:
    return ApiError(404, "not_found", "Domain not found")


def format_timestamp(ms: int) -> str:
    """The contract's timestamp text for REST objects: `2024-05-01 12:00:00.123000+00`."""
    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
        milliseconds=ms
    )
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f+00")


# --- reads -------------------------------------------------------------------------------------


def load_domain(spool: Spool, team_id: str, domain_id: str) -> DomainRecord | None:
    """The team's domain with this id, or None."""
    if not domain_id or "/" in domain_id:
        return None
    return DOMAINS.get(spool, domain_key(team_id, domain_id))


async def load_domain_parked(spool: Spool, team_id: str, domain_id: str) -> DomainRecord | None:
    """`load_domain`, parked rather than blocking on a table store on the network."""
    if not domain_id or "/" in domain_id:
        return None
    return await DOMAINS.aget(spool, domain_key(team_id, domain_id))


def get_domain(spool: Spool, team_id: str, domain_id: str) -> DomainRecord:
    """The team's domain with this id; 404 `not_found` if the team has none."""
    domain = load_domain(spool, team_id, domain_id)
    if domain is None:
        raise not_found()
    return domain


async def get_domain_parked(spool: Spool, team_id: str, domain_id: str) -> DomainRecord:
    """`get_domain` with a parked read."""
    domain = await load_domain_parked(spool, team_id, domain_id)
    if domain is None:
        raise not_found()
    return domain


def list_domains(
    spool: Spool,
    team_id: str,
    *,
    limit: int | None = None,
    after: str | None = None,
    before: str | None = None,
) -> tuple[list[DomainRecord], bool]:
    """The team's domains, newest first, and whether more lie beyond the page.

    Without `limit` every domain (the contract's legacy list). `after=<id>` pages toward older
    domains, `before=<id>` toward newer ones; the cursor's own domain is left out.
    """
    _check_page(limit, after, before)
    rows, has_more = newest_first_page(
        DOMAINS, spool, f"domain/{team_id}/", after=after, before=before, limit=limit
    )
    return [record for _, record in rows], has_more


async def list_domains_parked(
    spool: Spool,
    team_id: str,
    *,
    limit: int | None = None,
    after: str | None = None,
    before: str | None = None,
) -> tuple[list[DomainRecord], bool]:
    """`list_domains` with parked reads."""
    _check_page(limit, after, before)
    rows, has_more = await newest_first_page_parked(
        DOMAINS, spool, f"domain/{team_id}/", after=after, before=before, limit=limit
    )
    return [record for _, record in rows], has_more


def _check_page(limit: int | None, after: str | None, before: str | None) -> None:
    if limit is not None and not 1 <= limit <= MAX_PAGE:
        raise validation_error(
            f"The pagination limit must be a number between 1 and {MAX_PAGE}, got {limit}."
        )
    if after is not None and before is not None:
        raise validation_error("The pagination cursors `after` and `before` cannot be combined.")


def scan_all_domains(spool: Spool) -> Iterator[DomainRecord]:
    """Every team's domains, page by page: for the verifier, which works for all teams."""
    cursor: str | None = None
    while True:
        rows = DOMAINS.scan(spool, prefix="domain/", cursor=cursor, limit=MAX_PAGE)
        for _, record in rows:
            yield record
        if len(rows) < MAX_PAGE:
            return
        cursor = rows[-1][0]


def find_domain_by_name(spool: Spool, team_id: str, name: str) -> DomainRecord | None:
    """The team's domain called exactly `name` (canonical form), or None."""
    entry = DOMAIN_NAMES.get(spool, name_key(team_id, name))
    return None if entry is None else load_domain(spool, team_id, entry.domain_id)


def find_verified_domain_for_sender(
    spool: Spool, team_id: str, from_address_domain: str
) -> DomainRecord | None:
    """The team's verified domain that an address at `from_address_domain` may send from.

    Once a domain is verified, any address under it may send: `a.b.example.com` is covered by
    a verified `example.com`. The closest verified domain wins. None if there is none, or the
    domain is not a valid name.
    """
    for name in _covering_names(from_address_domain):
        entry = DOMAIN_NAMES.get(spool, name_key(team_id, name))
        domain = None if entry is None else load_domain(spool, team_id, entry.domain_id)
        if domain is not None and domain.status == "verified":
            return domain
    return None


async def find_verified_domain_for_sender_parked(
    spool: Spool, team_id: str, from_address_domain: str
) -> DomainRecord | None:
    """`find_verified_domain_for_sender`, parked rather than blocking on a table store on the
    network: intake asks it for every message. Read from the store each time, never cached,
    so a domain deleted or no longer verified stops sending at once, on every node."""
    for name in _covering_names(from_address_domain):
        entry = await DOMAIN_NAMES.aget(spool, name_key(team_id, name))
        domain = (
            None if entry is None else await load_domain_parked(spool, team_id, entry.domain_id)
        )
        if domain is not None and domain.status == "verified":
            return domain
    return None


def _covering_names(from_address_domain: str) -> list[str]:
    """The names of the domains that may cover an address at `from_address_domain`, closest
    first: the name and its parents (registered domains have at least two labels); none if
    it is not a valid name."""
    try:
        name = parse_domain_name(from_address_domain)
    except ApiError:
        return []
    labels = name.split(".")
    return [".".join(labels[start:]) for start in range(len(labels) - 1)]


def domain_dns_records(domain: DomainRecord, config: Config) -> list[DnsRecord]:
    """The records this domain publishes, with its own DKIM selector and key."""
    return dns_records(
        domain.name,
        domain.custom_return_path,
        domain.dkim_dns_txt,
        config,
        dkim_selector=domain.dkim_selector,
    )


# --- writes ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewDomain:
    """The checked values of a domain to add: `new_domain_record`'s arguments."""

    name: str
    region: str
    custom_return_path: str
    open_tracking: bool
    click_tracking: bool
    tls: str
    capabilities: dict[str, str]
    tracking_subdomain: str | None


def parse_new_domain(body: Mapping[str, object]) -> NewDomain:
    """The values of a `POST /domains` body as parsed from JSON (absent or None: the default),
    checked: 422 `validation_error` names the field."""
    return NewDomain(
        name=parse_domain_name(body.get("name")),
        region=parse_region(body.get("region")),
        custom_return_path=parse_return_path(body.get("custom_return_path")),
        open_tracking=parse_bool("open_tracking", body.get("open_tracking")) or False,
        click_tracking=parse_bool("click_tracking", body.get("click_tracking")) or False,
        tls=parse_tls(body.get("tls")) or "opportunistic",
        capabilities=parse_capabilities(body.get("capabilities"), {}),
        tracking_subdomain=parse_tracking_subdomain(body.get("tracking_subdomain")),
    )


async def new_domain_record(
    spool: Spool,
    config: Config,
    team_id: str,
    name: str,
    *,
    region: str,
    custom_return_path: str,
    open_tracking: bool,
    click_tracking: bool,
    tls: str,
    capabilities: dict[str, str],
    tracking_subdomain: str | None,
) -> DomainRecord:
    """A new domain of `team_id`, its values already validated, with a fresh RSA DKIM key of
    `domains.dkim_key_bits` (made off the Trio thread) and status `not_started`; not stored."""
    bits = config.domains.dkim_key_bits
    key = await trio.to_thread.run_sync(_core.generate_dkim_key, "rsa", bits)
    return DomainRecord(
        id=_core.new_id(),
        team_id=team_id,
        name=name,
        region=region,
        custom_return_path=custom_return_path,
        open_tracking=open_tracking,
        click_tracking=click_tracking,
        tls=tls,
        capabilities=capabilities,
        tracking_subdomain=tracking_subdomain,
        status="not_started",
        created_at=format_timestamp(spool.clock_ms()),
        dkim_selector=config.domains.dkim_selector,
        dkim_private_key_pem=key.private_key_pem,
        dkim_dns_txt=key.dns_txt,
    )


async def create_domain(
    spool: Spool,
    config: Config,
    team_id: str,
    name: object,
    *,
    region: object = None,
    custom_return_path: object = None,
    open_tracking: object = None,
    click_tracking: object = None,
    tls: object = None,
    capabilities: object = None,
    tracking_subdomain: object = None,
) -> DomainRecord:
    """Add a domain to the team with a fresh RSA-2048 DKIM key; status `not_started`.

    Arguments are the request body's values as parsed from JSON (None: absent), validated here:
    422 `validation_error` names the field. 403 `validation_error` if this team already has a
    domain of that name, or another team verified it (the contract's answer; which team is not
    said). Another team's unverified domain of that name blocks nothing.
    """
    values = parse_new_domain(
        {
            "name": name,
            "region": region,
            "custom_return_path": custom_return_path,
            "open_tracking": open_tracking,
            "click_tracking": click_tracking,
            "tls": tls,
            "capabilities": capabilities,
            "tracking_subdomain": tracking_subdomain,
        }
    )
    canonical = values.name
    if (
        find_domain_by_name(spool, team_id, canonical) is not None
        or verified_owner(spool, canonical) is not None
    ):
        raise _registered_already(canonical)  # before spending a key generation on it
    domain = await new_domain_record(spool, config, team_id, **dataclasses.asdict(values))
    domain_id = domain.id
    batch = _core.WriteBatch()
    index_owners(spool, batch)
    DOMAIN_NAMES.insert(batch, name_key(team_id, canonical), DomainNameEntry(domain_id))
    DOMAINS.put(batch, domain_key(team_id, domain_id), domain)
    try:
        await spool.commit(batch)
    except KeyExistsError:  # a concurrent create of the same name in this team won
        raise _registered_already(canonical) from None
    return domain


def verified_owner(spool: Spool, name: str) -> DomainOwner | None:
    """The team (and its domain) that verified `name` first, or None while no team has."""
    owner = DOMAIN_OWNERS.get(spool, owner_key(name))
    if owner is not None:
        return owner
    unindexed = _unindexed_owners(spool)
    return None if unindexed is None else unindexed.get(name)


def _unindexed_owners(spool: Spool) -> dict[str, DomainOwner] | None:
    """Owners of the names verified before `verified/` entries were kept, until a commit writes
    them with the `verified-indexed` mark (`_index_owners`): each verified name, held by the
    first team in key order that has it verified. None once the mark is there."""
    if OWNERS_INDEXED.get(spool, OWNERS_INDEXED_KEY) is not None:
        return None
    owners: dict[str, DomainOwner] = {}
    for domain in scan_all_domains(spool):
        if domain.status == "verified" and domain.failure_reason is None:
            owners.setdefault(domain.name, DomainOwner(domain.team_id, domain.id))
    return owners


def index_owners(spool: Spool, batch: _core.WriteBatch) -> None:
    """Add the entries of names verified before they were kept to `batch`, once."""
    owners = _unindexed_owners(spool)
    if owners is None:
        return
    for name, owner in owners.items():
        DOMAIN_OWNERS.put(batch, owner_key(name), owner)
    OWNERS_INDEXED.put(batch, OWNERS_INDEXED_KEY, OwnersIndexed(spool.clock_ms()))


async def save_domain(spool: Spool, domain: DomainRecord) -> None:
    """Store `domain` as it is, with its name entry: for a domain whose state Postwire sets
    itself rather than from DNS (the sandbox's own, verified by construction)."""
    async for attempt in guarded_domain(spool, domain.team_id, domain.id):
        with attempt:
            batch = _core.WriteBatch()
            DOMAIN_NAMES.put(
                batch, name_key(domain.team_id, domain.name), DomainNameEntry(domain.id)
            )
            DOMAINS.put(batch, domain_key(domain.team_id, domain.id), domain)
            await spool.commit(batch)


def _registered_already(name: str) -> ApiError:
    return validation_error(f"The `{name}` domain has been registered already.", status=403)


async def update_domain(
    spool: Spool,
    team_id: str,
    domain_id: str,
    *,
    open_tracking: object = None,
    click_tracking: object = None,
    tls: object = None,
    capabilities: object = None,
    tracking_subdomain: object = None,
) -> DomainRecord:
    """Change what PATCH /domains/{id} may change (None: leave it); return the new record."""
    opens = parse_bool("open_tracking", open_tracking)
    clicks = parse_bool("click_tracking", click_tracking)
    tls_mode = parse_tls(tls)
    tracking_label = parse_tracking_subdomain(tracking_subdomain)
    async for attempt in guarded_domain(spool, team_id, domain_id):
        with attempt:
            domain = get_domain(spool, team_id, domain_id)
            updated = dataclasses.replace(
                domain,
                open_tracking=domain.open_tracking if opens is None else opens,
                click_tracking=domain.click_tracking if clicks is None else clicks,
                tls=tls_mode or domain.tls,
                capabilities=parse_capabilities(capabilities, domain.capabilities),
                tracking_subdomain=tracking_label or domain.tracking_subdomain,
            )
            if updated == domain:
                return domain
            batch = _core.WriteBatch()
            DOMAINS.put(batch, domain_key(team_id, domain_id), updated)
            await spool.commit(batch)
            return updated
    never_after_change()


async def delete_domain(spool: Spool, team_id: str, domain_id: str) -> DomainRecord:
    """Remove the domain, its key and its name, which another team may then add; return what
    was removed. 404 if none."""
    async for attempt in guarded_domain(spool, team_id, domain_id):
        with attempt:
            domain = get_domain(spool, team_id, domain_id)
            batch = _core.WriteBatch()
            DOMAINS.delete(batch, domain_key(team_id, domain_id))
            DOMAIN_NAMES.delete(batch, name_key(team_id, domain.name))
            for key in (owner_key(domain.name), _legacyowner_key(domain.name)):
                if DOMAIN_OWNERS.get(spool, key) == DomainOwner(team_id, domain_id):
                    DOMAIN_OWNERS.delete(batch, key)
            await spool.commit(batch)
            return domain
    never_after_change()


def record_statuses(domain: DomainRecord) -> dict[str, RecordStatus]:
    return cast(dict[str, RecordStatus], dict(domain.record_statuses))


# --- the contract's JSON (section 5) -----------------------------------------------------------


def to_json(
    domain: DomainRecord, config: Config, *, include_records: bool = True
) -> dict[str, object]:
    """The domain object of GET /domains/{id} (and POST /domains), or a list item.

    With `include_records` False, the shape of a GET /domains item: no `object`, no
    `tracking_subdomain`, no `records`. `config` supplies the records' values (SPF, bounce
    host), so a change of sending IPs shows at once. With records, `warnings` (not in the
    contract) lists what in the config keeps them or the domain's tracking from working, when
    anything does. Never the private key.
    """
    common: dict[str, object] = {
        "id": domain.id,
        "name": domain.name,
        "status": cast(DomainStatus, domain.status),
        "created_at": domain.created_at,
        "region": domain.region,
        "open_tracking": domain.open_tracking,
        "click_tracking": domain.click_tracking,
    }
    if domain.failure_reason is not None:
        common["failure_reason"] = domain.failure_reason
    capabilities = dict(domain.capabilities)
    if not include_records:
        return {**common, "capabilities": capabilities}
    statuses = record_statuses(domain)
    records = [
        record.to_json(statuses.get(record.key, "not_started"))
        for record in domain_dns_records(domain, config)
        if record.required
    ]
    # No tracking subdomain: none in the object (the Node SDK types it optional, not nullable).
    tracking = (
        {}
        if domain.tracking_subdomain is None
        else {"tracking_subdomain": domain.tracking_subdomain}
    )
    body: dict[str, object] = {
        "object": "domain",
        **common,
        **tracking,
        "capabilities": capabilities,
        "records": records,
    }
    warnings = domain_warnings(
        config, open_tracking=domain.open_tracking, click_tracking=domain.click_tracking
    )
    if warnings:
        body["warnings"] = [warning.to_json() for warning in warnings]
    return body


def reference_json(domain_id: str, *, deleted: bool = False) -> dict[str, object]:
    """The body of PATCH and POST .../verify (`{"object", "id"}`), and of DELETE (`deleted`)."""
    body: dict[str, object] = {"object": "domain", "id": domain_id}
    if deleted:
        body["deleted"] = True
    return body
