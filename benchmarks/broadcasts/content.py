"""What the benchmark's broadcast says: a newsletter of about 3 KiB of HTML that uses the
personalization placeholders (a contact field with a fallback, a contact property, the
unsubscribe link), its text generated from the HTML as the API does, and the contacts it goes
to."""

from __future__ import annotations

from benchmarks.delivery.rounds import DOMAIN, RECIPIENT_DOMAIN

SENDER = f"Acme News <news@{DOMAIN}>"
SUBJECT = "{{{contact.first_name|Hello}}}, the Acme November update"
# A contact property every contact has (its fallback covers those that do not).
PROPERTY_KEY = "plan"
PROPERTY_FALLBACK = "free"
# One contact in this many is unsubscribed: skipped and counted, never mailed.
UNSUBSCRIBED_EVERY = 100
# One in this many has no first name: the fallback fills in.
NAMELESS_EVERY = 7

_STORY = (
    '<tr><td style="padding:12px 24px;font-family:Helvetica,Arial,sans-serif;font-size:15px;'
    'line-height:22px;color:#333333">'
    '<h2 style="margin:0 0 8px;font-size:18px">{title}</h2>'
    '<p style="margin:0">{text} <a href="https://acme.example.com/blog/{slug}" '
    'style="color:#0b6bcb">Read more</a></p></td></tr>'
)
_STORIES = [
    (
        "Faster exports",
        "CSV and JSON exports now stream as they are made, so a year of data "
        "starts downloading in a second instead of a minute.",
        "faster-exports",
    ),
    (
        "Teams and roles",
        "Invite your colleagues and give each one the access they need: "
        "owners, editors and viewers, with an audit log of every change.",
        "teams-and-roles",
    ),
    (
        "A new home for your reports",
        "Saved reports live in folders you share, and each one "
        "can be mailed to you every Monday morning.",
        "reports",
    ),
    (
        "Holiday support hours",
        "Our team answers every day of December, with shorter hours on "
        "the 24th, 25th, 31st and 1st. Urgent issues are always answered within the hour.",
        "holidays",
    ),
]

HTML = (
    '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Acme update</title></head>'
    '<body style="margin:0;padding:0;background:#f4f4f4">'
    '<table role="presentation" width="100%" cellpadding="0" cellspacing="0">'
    '<tr><td align="center"><table role="presentation" width="600" cellpadding="0" '
    'cellspacing="0" style="background:#ffffff">'
    '<tr><td style="padding:24px;font-family:Helvetica,Arial,sans-serif;font-size:16px">'
    "<p>Hi {{{contact.first_name|there}}},</p>"
    "<p>Here is what changed at Acme this month for your {{{contact.plan}}} plan.</p></td></tr>"
    + "".join(_STORY.format(title=t, text=x, slug=s) for t, x, s in _STORIES)
    + '<tr><td style="padding:24px;font-family:Helvetica,Arial,sans-serif;font-size:12px;'
    'color:#888888">You receive this because you signed up at acme.example.com. '
    '<a href="{{{RESEND_UNSUBSCRIBE_URL}}}" style="color:#888888">Unsubscribe</a> at any '
    "time.<br>Acme Inc., 1 Market Street, San Francisco, CA 94105</td></tr>"
    "</table></td></tr></table></body></html>"
)


def contact_email(number: int) -> str:
    return f"c{number:07d}@{RECIPIENT_DOMAIN}"


def first_name(number: int) -> str | None:
    return None if number % NAMELESS_EVERY == 0 else f"Ann{number}"


def is_unsubscribed(number: int) -> bool:
    return number % UNSUBSCRIBED_EVERY == UNSUBSCRIBED_EVERY - 1


def plan(number: int) -> str | None:
    return None if number % 3 == 0 else ("pro", "team")[number % 2]


def mailed(contacts: int) -> int:
    """How many of contacts 0..contacts-1 a broadcast mails (the unsubscribed are skipped)."""
    return contacts - contacts // UNSUBSCRIBED_EVERY


def broadcast_body(segment_id: str, name: str) -> dict[str, object]:
    """`POST /broadcasts` as the SDKs send it: a draft, sent by `POST /broadcasts/{id}/send`."""
    return {
        "segment_id": segment_id,
        "from": SENDER,
        "subject": SUBJECT,
        "html": HTML,
        "name": name,
    }


def transactional_email(number: int) -> dict[str, object]:
    """One `POST /emails` of the latency probe: a short receipt."""
    return {
        "from": f"Acme <receipts@{DOMAIN}>",
        "to": [f"probe{number}@{RECIPIENT_DOMAIN}"],
        "subject": f"Your receipt #{number}",
        "html": f"<p>Thank you for your order #{number}.</p><p>Acme</p>",
    }
