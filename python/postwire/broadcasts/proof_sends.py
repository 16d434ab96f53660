"""Test sends of a broadcast ("proofs"): the broadcast's content to a few typed addresses,
before it goes to its segment.

A proof goes through the normal send path as an ordinary email of the team (it is listed on
the Emails page, signed with the domain's key, tracked like any other), with the subject
prefixed `[Test] `. Its placeholders are filled the way the engine fills them: as a chosen
contact (its names and properties), or else with the recipient's address as `contact.email`
and every other field's fallback. Its unsubscribe link leads to a page that says the link is
not valid: a proof unsubscribes nobody, and it carries no `List-Unsubscribe` fields.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from postwire.accept import Acceptor, PreparedEmail
from postwire.broadcasts.messages import compile_broadcast
from postwire.compose.addresses import recipient_problem
from postwire.errors import ApiError, validation_error
from postwire.store.broadcasts import BroadcastRecord
from postwire.store.contact_properties import team_properties
from postwire.store.contacts import ContactRecord
from postwire.store.spool import Spool
from postwire.templates.placeholders import contact_values
from postwire.unsubscribe.links import unsubscribe_url

MAX_PROOF_RECIPIENTS: Final = 5
SUBJECT_PREFIX: Final = "[Test] "
# Where a proof's unsubscribe link leads: a token no contact has.
PROOF_UNSUBSCRIBE_TOKEN: Final = "test-send"
_SEPARATORS: Final = re.compile(r"[\s,;]+")


def parse_proof_recipients(raw: str) -> list[str]:
    """The addresses typed (separated by commas, semicolons or line breaks), each once; a
    readable refusal when there are none, too many, or one cannot receive mail."""
    addresses = list(dict.fromkeys(part for part in _SEPARATORS.split(raw.strip()) if part))
    if not addresses:
        raise validation_error("Type at least one address to send the test to.")
    if len(addresses) > MAX_PROOF_RECIPIENTS:
        raise validation_error(
            f"A test goes to at most {MAX_PROOF_RECIPIENTS} addresses; {len(addresses)} were given."
        )
    for address in addresses:
        problem = recipient_problem(address)
        if problem is not None:
            raise validation_error(f"{address}: {problem}.")
    return addresses


async def send_proofs(
    spool: Spool,
    acceptor: Acceptor,
    record: BroadcastRecord,
    recipients: list[str],
    *,
    contact: ContactRecord | None,
    public_url: str,
    now: datetime,
) -> list[str]:
    """Accept one proof per recipient (on disk when this returns); their email ids. Refused
    as the broadcast itself would be: no content, a from address not on a verified domain."""
    if not record.html and not record.text:
        raise validation_error("The broadcast has no content yet: write it in the editor.")
    content = compile_broadcast(replace(record, subject=SUBJECT_PREFIX + record.subject))
    properties = team_properties(spool, record.team_id)
    fallbacks = {key: prop.fallback_value for key, prop in properties.items()}
    link = unsubscribe_url(public_url, PROOF_UNSUBSCRIBE_TOKEN)
    requests = []
    for address in recipients:
        if contact is not None:
            values = contact_values(
                contact.email, contact.first_name, contact.last_name, contact.properties,
                fallbacks, link,
            )  # fmt: skip
        else:
            values = contact_values(address, None, None, {}, fallbacks, link)
        # An ordinary email of the team: not counted as one of the broadcast's messages.
        requests.append(replace(content.request_for(address, values, ()), broadcast_id=None))

    async def prepare() -> tuple[list[PreparedEmail], dict[str, Any]]:
        prepared = []
        for outcome in await acceptor.prepare_many(record.team_id, None, requests, now):
            if isinstance(outcome, ApiError):
                raise outcome
            prepared.append(outcome)
        return prepared, {"ids": [email.record.id for email in prepared]}

    answer = await acceptor.accept(prepare, idempotent=None, status=200, now=now)
    ids: list[str] = answer["ids"]
    return ids
