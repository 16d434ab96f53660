"""Templates, their aliases and their published versions.

A template record holds the working copy (what `GET /templates/{id}` shows and `PATCH`
edits). Publishing snapshots the working copy as an immutable version in `template_versions`
(`{team}/{template}/{version}`); sends read only the version the template points at, so an
edit after publishing goes out only once published again. `current_version_id` names the
working copy's version: it is the published one until the next change to sent content, which
opens a new version id. An alias is a second key (`template_aliases`, `{team}/{alias}`),
inserted in the same commit as the record, so two templates never share one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from postwire._core import WriteBatch
from postwire.store.pages import newest_first_page, newest_first_page_parked
from postwire.store.spool import Spool
from postwire.store.tables import Table
from postwire.store.team_records import TeamRecords, team_key, team_prefix

# Fields a version freezes: what a send uses. Name and alias are the template's own.
SENT_FIELDS = ("sender", "subject", "reply_to", "html", "text", "variables")


@dataclass(frozen=True, slots=True)
class TemplateRecord:
    id: str
    team_id: str
    name: str
    alias: str | None
    sender: str | None  # the body's `from`
    subject: str | None
    reply_to: list[str] | None
    html: str
    text: str | None
    # Declarations as served: id, key, type, fallback_value, created_at, updated_at.
    variables: list[dict[str, Any]]
    created_at: str  # store.accounts.contract_timestamp
    updated_at: str
    current_version_id: str
    published_version_id: str | None = None
    published_at: str | None = None
    versions: int = 0  # published so far; the next is number versions + 1

    @property
    def status(self) -> Literal["draft", "published"]:
        return "draft" if self.published_version_id is None else "published"

    @property
    def has_unpublished_versions(self) -> bool:
        return self.current_version_id != self.published_version_id


@dataclass(frozen=True, slots=True)
class TemplateVersionRecord:
    id: str
    template_id: str
    team_id: str
    number: int
    published_at: str
    sender: str | None
    subject: str | None
    reply_to: list[str] | None
    html: str
    text: str | None
    variables: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TemplateAlias:
    template_id: str


TEMPLATES = Table("templates", TemplateRecord)
TEMPLATE_ALIASES = Table("template_aliases", TemplateAlias)
TEMPLATE_VERSIONS = Table("template_versions", TemplateVersionRecord)
_TEMPLATES: TeamRecords[TemplateRecord] = TeamRecords(TEMPLATES)


def template_key(team_id: str, template_id: str) -> str:
    return team_key(team_id, template_id)


def versions_prefix(team_id: str, template_id: str) -> str:
    return f"{team_id}/{template_id}/"


def get_template(spool: Spool, team_id: str, template_id: str) -> TemplateRecord | None:
    return _TEMPLATES.get(spool, team_id, template_id)


async def get_template_parked(
    spool: Spool, team_id: str, template_id: str
) -> TemplateRecord | None:
    """`get_template`, parked rather than blocking on a table store on the network."""
    return await _TEMPLATES.aget(spool, team_id, template_id)


def template_id_of_alias(spool: Spool, team_id: str, alias: str) -> str | None:
    found = TEMPLATE_ALIASES.get(spool, team_key(team_id, alias))
    return None if found is None else found.template_id


def find_template(spool: Spool, team_id: str, id_or_alias: str) -> TemplateRecord | None:
    """The team's template by id or alias (no alias looks like an id)."""
    record = get_template(spool, team_id, id_or_alias)
    if record is not None:
        return record
    template_id = template_id_of_alias(spool, team_id, id_or_alias)
    return None if template_id is None else get_template(spool, team_id, template_id)


def put_template(
    batch: WriteBatch, record: TemplateRecord, previous: TemplateRecord | None
) -> None:
    """Write `record`, moving its alias key when the alias changed from `previous`'s. A new
    alias is inserted: if another template holds it, the commit fails with KeyExistsError."""
    old_alias = None if previous is None else previous.alias
    if old_alias != record.alias:
        if old_alias is not None:
            TEMPLATE_ALIASES.delete(batch, team_key(record.team_id, old_alias))
        if record.alias is not None:
            TEMPLATE_ALIASES.insert(
                batch, team_key(record.team_id, record.alias), TemplateAlias(record.id)
            )
    _TEMPLATES.put(batch, record)


def publish(record: TemplateRecord, now: str) -> tuple[TemplateVersionRecord, TemplateRecord]:
    """The working copy frozen as the next version, and the template pointing sends at it."""
    version = TemplateVersionRecord(
        id=record.current_version_id,
        template_id=record.id,
        team_id=record.team_id,
        number=record.versions + 1,
        published_at=now,
        sender=record.sender,
        subject=record.subject,
        reply_to=record.reply_to,
        html=record.html,
        text=record.text,
        variables=record.variables,
    )
    published = replace(
        record,
        published_version_id=version.id,
        published_at=now,
        versions=version.number,
        updated_at=now,
    )
    return version, published


def put_version(batch: WriteBatch, version: TemplateVersionRecord) -> None:
    key = versions_prefix(version.team_id, version.template_id) + version.id
    TEMPLATE_VERSIONS.insert(batch, key, version)


def get_version(
    spool: Spool, team_id: str, template_id: str, version_id: str
) -> TemplateVersionRecord | None:
    return TEMPLATE_VERSIONS.get(spool, versions_prefix(team_id, template_id) + version_id)


def published_version(spool: Spool, record: TemplateRecord) -> TemplateVersionRecord | None:
    if record.published_version_id is None:
        return None
    return get_version(spool, record.team_id, record.id, record.published_version_id)


def delete_template(batch: WriteBatch, spool: Spool, record: TemplateRecord) -> None:
    """Remove the template, its alias and every version of it."""
    _TEMPLATES.delete(batch, record)
    if record.alias is not None:
        TEMPLATE_ALIASES.delete(batch, team_key(record.team_id, record.alias))
    prefix = versions_prefix(record.team_id, record.id)
    cursor: str | None = None
    while rows := TEMPLATE_VERSIONS.scan(spool, prefix=prefix, cursor=cursor, limit=1000):
        for key, _ in rows:
            TEMPLATE_VERSIONS.delete(batch, key)
        cursor = rows[-1][0]


def templates_page(
    spool: Spool, team_id: str, *, after: str | None, before: str | None, limit: int
) -> tuple[list[TemplateRecord], bool]:
    rows, has_more = newest_first_page(
        TEMPLATES, spool, team_prefix(team_id), after=after, before=before, limit=limit
    )
    return [record for _, record in rows], has_more


async def templates_page_parked(
    spool: Spool, team_id: str, *, after: str | None, before: str | None, limit: int
) -> tuple[list[TemplateRecord], bool]:
    """`templates_page`, parked rather than blocking on a table store on the network."""
    rows, has_more = await newest_first_page_parked(
        TEMPLATES, spool, team_prefix(team_id), after=after, before=before, limit=limit
    )
    return [record for _, record in rows], has_more


def versions_page(
    spool: Spool,
    record: TemplateRecord,
    *,
    after: str | None,
    before: str | None,
    limit: int,
) -> tuple[list[TemplateVersionRecord], bool]:
    prefix = versions_prefix(record.team_id, record.id)
    rows, has_more = newest_first_page(
        TEMPLATE_VERSIONS, spool, prefix, after=after, before=before, limit=limit
    )
    return [version for _, version in rows], has_more


async def versions_page_parked(
    spool: Spool, record: TemplateRecord, *, after: str | None, before: str | None, limit: int
) -> tuple[list[TemplateVersionRecord], bool]:
    """`versions_page`, parked rather than blocking on a table store on the network."""
    prefix = versions_prefix(record.team_id, record.id)
    rows, has_more = await newest_first_page_parked(
        TEMPLATE_VERSIONS, spool, prefix, after=after, before=before, limit=limit
    )
    return [version for _, version in rows], has_more
