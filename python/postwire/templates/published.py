"""The published version of a team's template, as a send uses it."""

from __future__ import annotations

from postwire.store.spool import Spool
from postwire.store.templates import find_template, published_version
from postwire.templates.sending import TemplateContent, TemplateLookup


def published_templates(spool: Spool, team_id: str) -> TemplateLookup:
    """Finds the team's template by id or alias; a template never published is not found."""

    def lookup(id_or_alias: str) -> TemplateContent | None:
        record = find_template(spool, team_id, id_or_alias)
        version = None if record is None else published_version(spool, record)
        if version is None:
            return None
        return TemplateContent(
            template_id=version.template_id,
            sender=version.sender,
            subject=version.subject,
            reply_to=version.reply_to,
            html=version.html,
            text=version.text,
            variables=version.variables,
        )

    return lookup
