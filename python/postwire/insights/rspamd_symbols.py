"""Plain-language explanations of the rspamd symbols senders most often hit.

rspamd names what it found in terse symbols (`MISSING_MID`, `R_SPF_FAIL`); a sender needs to
know what it means for their email and what to change. Symbols not listed here are explained
with rspamd's own description of them, when its answer carries one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SymbolExplanation:
    meaning: str  # what rspamd found, in a sender's words
    fix: str  # what to change


_E = SymbolExplanation

SYMBOL_EXPLANATIONS: dict[str, SymbolExplanation] = {
    # Headers
    "MISSING_MID": _E(
        "The email has no Message-ID header.",
        "Let Postwire add the Message-ID; do not remove it in custom headers.",
    ),
    "INVALID_MSGID": _E(
        "The Message-ID header is not in the form <id@domain>.",
        "Leave the Message-ID to Postwire or use the form <unique-id@your-domain>.",
    ),
    "MISSING_DATE": _E(
        "The email has no Date header.",
        "Let Postwire add the Date header; do not remove it in custom headers.",
    ),
    "DATE_IN_FUTURE": _E(
        "The Date header lies in the future.",
        "Check the clock of the machine that sets the Date header.",
    ),
    "DATE_IN_PAST": _E(
        "The Date header lies far in the past.",
        "Check the clock of the machine that sets the Date header.",
    ),
    "MISSING_TO": _E(
        "The email has no To header.",
        "Put at least one recipient in To rather than only in Bcc.",
    ),
    "R_UNDISC_RCPT": _E(
        "The recipients are hidden as 'undisclosed-recipients'.",
        "Send one email per recipient with their address in To.",
    ),
    "MISSING_SUBJECT": _E("The email has no subject.", "Give the email a subject."),
    "EMPTY_SUBJECT": _E("The subject is empty.", "Give the email a subject."),
    "SUBJ_ALL_CAPS": _E(
        "The subject is written in capital letters.",
        "Write the subject in normal sentence case.",
    ),
    "URL_IN_SUBJECT": _E("The subject contains a link.", "Keep links out of the subject."),
    "FAKE_REPLY": _E(
        "The subject starts with 'Re:' but the email is not a reply to anything.",
        "Do not prefix a first email with 'Re:' or 'Fwd:'.",
    ),
    "HAS_X_PRIO_ONE": _E(
        "The email is marked with the highest priority.",
        "Remove the X-Priority header; bulk mail should not claim to be urgent.",
    ),
    "FORGED_SENDER": _E(
        "The From address differs from the envelope sender (the return path).",
        "Usual when bounces go to a return-path subdomain, and it weighs little; keep that "
        "subdomain under the From domain so that SPF aligns.",
    ),
    "FORGED_RECIPIENTS": _E(
        "The To and Cc headers do not match the envelope recipients.",
        "Put the addresses you send to in To or Cc.",
    ),
    "REPLYTO_DOM_NEQ_FROM_DOM": _E(
        "Reply-To points to a different domain than From.",
        "Use a Reply-To address on the From domain, or leave Reply-To out.",
    ),
    "SPOOF_DISPLAY_NAME": _E(
        "The From display name contains an email address on another domain.",
        "Use a plain name as the display name, not an address.",
    ),
    "FREEMAIL_FROM": _E(
        "The From address is on a free mail provider (Gmail, Yahoo, ...).",
        "Send from an address on a domain you own and have verified in Postwire.",
    ),
    "FREEMAIL_REPLYTO": _E(
        "Reply-To is an address on a free mail provider.",
        "Use a Reply-To address on a domain you own.",
    ),
    "R_MISSING_CHARSET": _E(
        "A text part does not say which character set it uses.",
        "Declare the charset (charset=utf-8) on every text part.",
    ),
    "R_MIXED_CHARSET": _E(
        "The subject or a name mixes alphabets (e.g. Latin and Cyrillic look-alikes).",
        "Write names and subject in one alphabet.",
    ),
    "R_BAD_CTE_7BIT": _E(
        "A part declared 7bit contains 8-bit characters.",
        "Encode non-ASCII text as quoted-printable or base64.",
    ),
    "BROKEN_CONTENT_TYPE": _E(
        "The Content-Type header cannot be parsed.",
        "Let Postwire build the MIME structure instead of setting Content-Type yourself.",
    ),
    # Body and HTML
    "MIME_HTML_ONLY": _E(
        "The email has an HTML part but no plain-text part.",
        "Send a plain-text version alongside the HTML (the `text` field).",
    ),
    "R_PARTS_DIFFER": _E(
        "The plain-text and HTML versions say different things.",
        "Make the plain-text part a faithful version of the HTML.",
    ),
    "HTML_SHORT_LINK_IMG_1": _E(
        "A very short HTML part (under 1 KB) that is mostly a linked image.",
        "Add real text to the email; do not send a single clickable image.",
    ),
    "HTML_SHORT_LINK_IMG_2": _E(
        "A short HTML part (1-1.5 KB) that is mostly a linked image.",
        "Add real text to the email; do not send a single clickable image.",
    ),
    "HTML_SHORT_LINK_IMG_3": _E(
        "A short HTML part (1.5-2 KB) that is mostly a linked image.",
        "Add real text to the email; do not send a single clickable image.",
    ),
    "R_EMPTY_IMAGE": _E(
        "The email is an image with (almost) no text.",
        "Add text that carries the message; images may not be shown.",
    ),
    "MANY_INVISIBLE_PARTS": _E(
        "Much of the HTML is hidden from the reader (display:none, tiny or white text).",
        "Remove hidden text; filters read it as an attempt to fool them.",
    ),
    "ZERO_FONT": _E(
        "The HTML contains text in a zero-size font.",
        "Remove invisible text; preheaders should use a hidden element, not font-size 0.",
    ),
    "HTTP_TO_IP": _E(
        "A link goes to a bare IP address instead of a domain name.",
        "Link to a domain name (and set api.public_url to one for tracking).",
    ),
    "R_SUSPICIOUS_URL": _E(
        "A link has an obfuscated or numeric host.",
        "Link to plain domain names.",
    ),
    "PHISHING": _E(
        "A link's text shows one domain while it leads to another.",
        "Make the visible text of each link match where it goes.",
    ),
    "HAS_ONION_URI": _E("The email links to a .onion address.", "Remove .onion links."),
    "MIME_BAD_ATTACHMENT": _E(
        "An attachment has a type filters treat as dangerous.",
        "Do not attach executables or scripts; link to a download page instead.",
    ),
    "MIME_BAD_EXTENSION": _E(
        "An attachment has a file extension filters treat as dangerous (.exe, .js, ...).",
        "Do not attach such files; link to a download page instead.",
    ),
    "MIME_DOUBLE_BAD_EXTENSION": _E(
        "An attachment hides its real type behind two extensions (invoice.pdf.exe).",
        "Give attachments a single, honest extension.",
    ),
    "MIME_BAD": _E(
        "A part has a content type filters treat as dangerous.",
        "Send only common document and image types as attachments.",
    ),
    # Authentication (a receiver's view of SPF, DKIM, DMARC)
    "R_SPF_FAIL": _E(
        "SPF says the sending server is not allowed to send for this domain.",
        "Publish the SPF record Postwire shows for the domain's return path.",
    ),
    "R_SPF_SOFTFAIL": _E(
        "SPF soft-fails: the sending server is probably not allowed for this domain.",
        "Publish the SPF record Postwire shows for the domain's return path.",
    ),
    "R_SPF_NA": _E(
        "The envelope sender's domain has no SPF record.",
        "Publish the SPF record Postwire shows for the domain's return path.",
    ),
    "R_SPF_PERMFAIL": _E(
        "The SPF record is malformed.",
        "Fix the SPF record's syntax (one record, at most 10 DNS lookups).",
    ),
    "R_DKIM_REJECT": _E(
        "The DKIM signature does not verify.",
        "Publish the DKIM record Postwire shows and do not change the email after signing.",
    ),
    "R_DKIM_PERMFAIL": _E(
        "The DKIM signature cannot be checked (missing or broken key record).",
        "Publish the DKIM record Postwire shows for the domain.",
    ),
    "R_DKIM_NA": _E(
        "The email has no DKIM signature.",
        "Verify the sending domain in Postwire so that it signs the email.",
    ),
    "DMARC_POLICY_REJECT": _E(
        "The email fails DMARC and the domain asks receivers to reject such mail.",
        "Align DKIM or SPF with the From domain (verify the domain in Postwire).",
    ),
    "DMARC_POLICY_QUARANTINE": _E(
        "The email fails DMARC and the domain asks receivers to treat it as spam.",
        "Align DKIM or SPF with the From domain (verify the domain in Postwire).",
    ),
    "DMARC_POLICY_SOFTFAIL": _E(
        "The email fails DMARC (the domain's policy is none).",
        "Align DKIM or SPF with the From domain (verify the domain in Postwire).",
    ),
    "DMARC_NA": _E(
        "The From domain has no DMARC record.",
        "Publish a DMARC record (_dmarc.your-domain), e.g. v=DMARC1; p=none.",
    ),
    # Good signs (they lower the score; shown as passed checks)
    "R_DKIM_ALLOW": _E(
        "The DKIM signature verifies against the domain's published key.",
        "Nothing to do.",
    ),
    "R_SPF_ALLOW": _E("SPF allows the sending server for this domain.", "Nothing to do."),
    "DMARC_POLICY_ALLOW": _E("The email passes the domain's DMARC policy.", "Nothing to do."),
    "ARC_ALLOW": _E("The email's ARC chain verifies.", "Nothing to do."),
    "MIME_GOOD": _E("The email's parts have well-known content types.", "Nothing to do."),
    # The sending server
    "HFILTER_HOSTNAME_UNKNOWN": _E(
        "The sending server's IP has no matching reverse DNS name.",
        "Give the server's IP a PTR record that resolves back to it (delivery.helo_name).",
    ),
    "RDNS_NONE": _E(
        "The sending server's IP has no reverse DNS name.",
        "Ask your hosting provider for a PTR record matching delivery.helo_name.",
    ),
    "ONCE_RECEIVED": _E(
        "The email passed through a single server with no further history.",
        "Usually harmless for direct sending; make sure reverse DNS is set.",
    ),
    # Reputation services
    "BAYES_SPAM": _E(
        "rspamd's statistical filter finds the wording close to spam it has seen.",
        "Rewrite the content in plainer, less promotional words.",
    ),
    "FUZZY_DENIED": _E(
        "The content matches mail reported as spam elsewhere.",
        "Do not reuse content from mail that was reported; write your own.",
    ),
}

# Families of symbols that share one meaning: a domain or an IP listed on a block list.
_PREFIX_EXPLANATIONS: tuple[tuple[str, SymbolExplanation], ...] = (
    (
        "URIBL_",
        _E(
            "A domain linked in the email is on a URI block list.",
            "Remove links to that domain (look for shorteners and third-party redirects).",
        ),
    ),
    (
        "SURBL_",
        _E(
            "A domain linked in the email is on the SURBL block list.",
            "Remove links to that domain (look for shorteners and third-party redirects).",
        ),
    ),
    (
        "DBL_",
        _E(
            "A domain linked in the email is on Spamhaus' domain block list.",
            "Remove links to that domain (look for shorteners and third-party redirects).",
        ),
    ),
    (
        "RBL_",
        _E(
            "The sending server's IP is on a block list.",
            "Find out why the IP was listed, stop the cause and request delisting.",
        ),
    ),
    (
        "RECEIVED_SPAMHAUS",
        _E(
            "A server the email passed through is on a Spamhaus block list.",
            "Find out why the IP was listed, stop the cause and request delisting.",
        ),
    ),
)


def explain_symbol(name: str, description: str | None) -> SymbolExplanation:
    """What `name` means for a sender and what to do; rspamd's own `description` of it when
    Postwire has no explanation of its own."""
    known = SYMBOL_EXPLANATIONS.get(name)
    if known is not None:
        return known
    for prefix, explanation in _PREFIX_EXPLANATIONS:
        if name.startswith(prefix):
            return explanation
    meaning = f"{description.strip().rstrip('.')}." if description else "rspamd matched this rule."
    return _E(meaning, f"See rspamd's documentation of {name}.")
