"""Every insight Postwire can find: its area, severity, one-line message and fix.

This is the single source of the insights' wording: checks name a code and the values its
message needs (`finding("dmarc_missing", name="_dmarc.example.com")`), the store keeps only
that, and the API, the dashboard and docs/insights.md all show the text made here. A test
checks that docs/insights.md lists every code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from postwire.insights.model import Insight, Severity

Area = Literal["authentication", "content", "recipients", "scoring"]
# The order areas are shown in, and their headings.
AREAS: Final[dict[Area, str]] = {
    "authentication": "Authentication",
    "content": "Content",
    "recipients": "Recipients and history",
    "scoring": "Content scoring (rspamd)",
}
SEVERITY_ORDER: Final[dict[str, int]] = {"error": 0, "warning": 1, "info": 2, "ok": 3}


@dataclass(frozen=True, slots=True)
class Entry:
    area: Area
    severity: Severity
    message: str  # a str.format template over the finding's values
    fix: str  # the same; "" when there is nothing to do


CATALOGUE: Final[dict[str, Entry]] = {
    # --- authentication ------------------------------------------------------------------------
    "dkim_aligned": Entry(
        "authentication",
        "ok",
        "Signed with DKIM by {signing_domain} (selector {selector}), whose key is published "
        "and aligned with the From domain {from_domain}.",
        "",
    ),
    "dkim_key_missing": Entry(
        "authentication",
        "error",
        "No DKIM key is published at {name}: receivers cannot verify this email's signature.",
        "Publish the DKIM TXT record shown on the domain's page, then verify the domain again.",
    ),
    "dkim_key_mismatch": Entry(
        "authentication",
        "error",
        "The DKIM key published at {name} is not the one Postwire signs with: the signature "
        "will not verify.",
        "Replace the TXT record at {name} with the value shown on the domain's page.",
    ),
    "dkim_not_aligned": Entry(
        "authentication",
        "error",
        "The DKIM signing domain {signing_domain} is not aligned with the From domain "
        "{from_domain} ({mode} alignment), so DKIM cannot make this email pass DMARC.",
        "Send from an address at {signing_domain}, or relax the DMARC record's adkim to r.",
    ),
    "spf_aligned": Entry(
        "authentication",
        "ok",
        "SPF at the return path {host} authorises Postwire's servers and is aligned with the "
        "From domain {from_domain}.",
        "",
    ),
    "spf_missing": Entry(
        "authentication",
        "error",
        "No SPF record is published at the return path {host}: SPF fails for this email.",
        "Publish the SPF TXT record shown on the domain's page at {host}.",
    ),
    "spf_mismatch": Entry(
        "authentication",
        "error",
        "The SPF record at {host} does not list Postwire's sending servers ({expected}).",
        "Replace the TXT record at {host} with the value shown on the domain's page.",
    ),
    "spf_not_aligned": Entry(
        "authentication",
        "warning",
        "The return path {host} is not aligned with the From domain {from_domain} ({mode} "
        "alignment), so SPF cannot make this email pass DMARC.",
        "Relax the DMARC record's aspf to r (the default), so the return-path subdomain aligns.",
    ),
    "dmarc_missing": Entry(
        "authentication",
        "error",
        "No DMARC record at {name}: Gmail and Yahoo require one from bulk senders, and "
        "receivers get no policy for mail that fails authentication.",
        'Publish a TXT record at _dmarc.{domain} such as "v=DMARC1; p=none;", then move to '
        "quarantine or reject once reports show all your mail passes.",
    ),
    "dmarc_invalid": Entry(
        "authentication",
        "error",
        "The DMARC record at {name} cannot be used: {problem}.",
        'Publish one TXT record starting with "v=DMARC1;" and a p= tag of none, quarantine '
        "or reject.",
    ),
    "dmarc_policy_none": Entry(
        "authentication",
        "info",
        "The DMARC policy at {name} is p=none: receivers report failures but act on none of "
        "them, so others can send as {domain}.",
        "Once the aggregate reports show your mail passes, move the policy to quarantine, "
        "then reject.",
    ),
    "dmarc_policy_enforced": Entry(
        "authentication",
        "ok",
        "The DMARC policy at {name} is p={policy}{pct_note}.",
        "",
    ),
    "dmarc_partial_pct": Entry(
        "authentication",
        "info",
        "The DMARC policy applies to {pct}% of failing mail only (pct={pct}).",
        "Raise pct to 100 once reports show your mail passes.",
    ),
    "dmarc_pass": Entry(
        "authentication",
        "ok",
        "This email passes DMARC through aligned {through}.",
        "",
    ),
    "dmarc_fail": Entry(
        "authentication",
        "error",
        "This email fails DMARC: neither its DKIM signature nor its SPF check is both passing "
        "and aligned with {from_domain}; receivers apply the policy {policy}.",
        "Fix the DKIM and SPF findings above; either one aligned and passing is enough.",
    ),
    "dns_unavailable": Entry(
        "authentication",
        "info",
        "DNS did not answer for {name} ({detail}); that part of authentication was not checked.",
        "Nothing to do if it passes at the next check; otherwise check the domain's DNS servers.",
    ),
    "domain_removed": Entry(
        "authentication",
        "info",
        "The domain this email was sent from has since been removed; its authentication is "
        "no longer checked.",
        "",
    ),
    # --- content -------------------------------------------------------------------------------
    "text_part_missing": Entry(
        "content",
        "warning",
        "The email has HTML but no plain-text part: some filters score HTML-only mail as spam, "
        "and some readers show nothing.",
        "Send a text version too: the API makes one from the HTML when the request has no text; "
        "over SMTP, add a text/plain alternative.",
    ),
    "text_part_differs": Entry(
        "content",
        "warning",
        "The plain-text part shares only {percent}% of its words with the HTML: filters treat "
        "parts that say different things as a spam sign.",
        "Make the text part say what the HTML says, or send no text to have it made from the HTML.",
    ),
    "text_part_matches": Entry(
        "content",
        "ok",
        "The plain-text part says what the HTML says ({percent}% of its words are shared).",
        "",
    ),
    "html_clipped": Entry(
        "content",
        "warning",
        "The HTML is {size_kb} KB: Gmail clips messages over 102 KB and hides the rest, "
        "unsubscribe link included.",
        "Trim the HTML under 102 KB: inline less CSS, remove comments and unused markup.",
    ),
    "image_missing_alt": Entry(
        "content",
        "warning",
        "{count} image(s) have no alt text ({examples}): readers with images off or with a "
        "screen reader see nothing.",
        'Give every image an alt attribute describing it (alt="" for decoration).',
    ),
    "image_heavy": Entry(
        "content",
        "warning",
        "The email is mostly images: {images} image(s) and {words} words of text. Filters "
        "distrust image-heavy mail, and it shows nothing with images off.",
        "Put the message in text, with images as support (about 60% text or more).",
    ),
    "link_domain_unaligned": Entry(
        "content",
        "warning",
        "Links point to {domains}, not to the sender's domain {from_domain}: filters compare "
        "link domains with the From domain.",
        "Link to pages under {from_domain} where you can, or check these domains are yours.",
    ),
    "shortener_link": Entry(
        "content",
        "warning",
        "Links use URL shorteners ({domains}): spammers hide destinations behind them, so "
        "filters distrust them.",
        "Link to the full address instead (click tracking already measures clicks).",
    ),
    "http_link": Entry(
        "content",
        "warning",
        "{count} link(s) use plain http:// ({examples}): browsers warn and filters score it.",
        "Link with https:// addresses.",
    ),
    "list_unsubscribe_missing": Entry(
        "content",
        "error",
        "This bulk email has no List-Unsubscribe header: Gmail and Yahoo require one-click "
        "unsubscribe (RFC 8058) from bulk senders.",
        "Send it as a broadcast (Postwire adds the headers), or add List-Unsubscribe with an "
        "https URL and List-Unsubscribe-Post: List-Unsubscribe=One-Click.",
    ),
    "list_unsubscribe_broken": Entry(
        "content",
        "error",
        "The List-Unsubscribe header does not allow one-click unsubscribe: {problem}.",
        "Give List-Unsubscribe an https URL that answers a POST, and add "
        "List-Unsubscribe-Post: List-Unsubscribe=One-Click (RFC 8058).",
    ),
    "list_unsubscribe_ok": Entry(
        "content",
        "ok",
        "One-click unsubscribe is offered (List-Unsubscribe with an https URL and "
        "List-Unsubscribe-Post).",
        "",
    ),
    "tracking_on_ip": Entry(
        "content",
        "warning",
        "Tracking and unsubscribe links are served from an IP address ({host}): filters "
        "treat links to bare IP addresses as a strong spam sign.",
        "The operator sets api.public_url to an https address on a domain name.",
    ),
    "tracking_unreachable": Entry(
        "content",
        "error",
        "Tracking and unsubscribe links point to {host}, which recipients cannot reach "
        "(loopback or private address): opens, clicks and unsubscribes will not work.",
        "The operator sets api.public_url to the public https address of this Postwire.",
    ),
    "content_not_checked": Entry(
        "content",
        "info",
        "The content was not checked: this email was delivered before its insights were "
        "computed and its message was not kept for them (the spool was short of room, or "
        "insights were off).",
        "",
    ),
    # --- recipients ----------------------------------------------------------------------------
    "recipient_bounced_before": Entry(
        "recipients",
        "error",
        "{address} bounced permanently before and is suppressed: it is not sent to.",
        "Remove the address from your list; remove the suppression only if you know it "
        "works again.",
    ),
    "recipient_complained_before": Entry(
        "recipients",
        "error",
        "{address} marked an earlier email as spam and is suppressed: it is not sent to.",
        "Stop mailing this address.",
    ),
    "recipient_bounced_recently": Entry(
        "recipients",
        "warning",
        "{count} of the {total} emails this team sent to {address} before this one bounced; the "
        "address was not suppressed (a full mailbox, a refused content, or a deferral that ran "
        "out of time).",
        "Read the bounces on those emails' pages; stop mailing the address if it keeps bouncing.",
    ),
    "recipient_suppressed": Entry(
        "recipients",
        "warning",
        "{address} is on the suppression list (added by hand): it is not sent to.",
        "Remove the suppression if the address should receive mail again.",
    ),
    "role_address": Entry(
        "recipients",
        "warning",
        "{address} is a role address ({role}@): several people or none read it, and "
        "complaints from such addresses are common.",
        "Send to a person's address; never add role addresses to marketing lists.",
    ),
    "recipient_domain_bounces": Entry(
        "recipients",
        "warning",
        "{percent}% of Postwire's recent deliveries to {domain} bounced ({bounced} of "
        "{total} in the last {hours} hours).",
        "Clean the addresses at {domain} from your list, and check the bounces' replies.",
    ),
    "recipient_domain_deferrals": Entry(
        "recipients",
        "info",
        "{percent}% of Postwire's recent deliveries to {domain} were deferred ({delayed} of "
        "{total} in the last {hours} hours): its servers are slowing your mail down.",
        "Send to {domain} more slowly, and check its replies for rate limits or reputation.",
    ),
    # --- scoring: rspamd's own findings keep their text; these are Postwire's ---------------------
    "rspamd_skipped": Entry(
        "scoring",
        "info",
        "Not scanned by rspamd: this email was delivered before its insights were computed "
        "and its message was not kept for them.",
        "",
    ),
}


def finding(code: str, **values: object) -> Finding:
    """A finding of `code` with the values its message and fix name (checked here, so a
    wrong name fails in the check's tests, not on a page)."""
    entry = CATALOGUE[code]
    entry.message.format(**values)
    entry.fix.format(**values)
    return Finding(code, {name: str(value) for name, value in values.items()})


@dataclass(frozen=True, slots=True)
class Finding:
    """What a check found: a catalogue code and the values of its message, as stored."""

    code: str
    values: dict[str, str]

    def insight(self) -> Insight:
        entry = CATALOGUE[self.code]
        return Insight(
            self.code,
            entry.severity,
            entry.message.format(**self.values),
            entry.fix.format(**self.values),
        )


def area_of(code: str) -> Area:
    """The area an insight belongs to; rspamd's own codes are `scoring`."""
    entry = CATALOGUE.get(code)
    return entry.area if entry is not None else "scoring"
