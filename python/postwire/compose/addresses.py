"""Mailboxes and addresses: the rules every front door applies alike (REST and SMTP)."""

from __future__ import annotations

import functools
import re

import idna

from postwire.compose.header_text import is_header_safe, is_unicode_text

Mailbox = tuple[str | None, str]
"""`(display name or None, address)`, as `_core.build_message` takes them."""

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-\u0080-\U0010ffff]"
_LOCAL_PART = re.compile(rf"{_ATEXT}+(?:\.{_ATEXT}+)*")
_ASCII_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
_QUOTED_NAME = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_SPACE = re.compile(r"\s")  # what str.isspace() finds, in one search


def parse_mailbox(value: str) -> Mailbox | None:
    """`a@b`, `Name <a@b>` or `"Quoted, Name" <a@b>` as `(name, address)`; None when `value`
    is not exactly one such mailbox.

    The address is a dot-atom local part (ASCII or UTF-8) and a domain of at least two labels
    (ASCII or IDN). An unquoted name may not hold `<>",;`: a comma or semicolon there reads as
    a list of addresses, which one string may not be.
    """
    text = value.strip(" \t")
    if not text.endswith(">"):
        return (None, text) if is_address(text) else None
    start = text.rfind("<")
    if start < 0:
        return None
    address = text[start + 1 : -1]
    name_part = text[:start].strip(" \t")
    name: str | None
    if not name_part:
        name = None
    elif name_part.startswith('"'):
        quoted = _QUOTED_NAME.fullmatch(name_part)
        if quoted is None:
            return None
        name = re.sub(r"\\(.)", r"\1", quoted[1], flags=re.DOTALL) or None
    elif any(char in name_part for char in '<>",;'):
        return None
    else:
        name = name_part
    if name is not None and not (is_header_safe(name) and is_unicode_text(name)):
        return None
    return (name, address) if is_address(address) else None


def is_address(address: str) -> bool:
    """A bare address (`local@domain`) Postwire sends to or from."""
    local, at, domain = address.rpartition("@")
    if not at or not is_unicode_text(address) or not is_header_safe(address):
        return False
    if _SPACE.search(address) or len(address.encode()) > 254:
        return False
    if len(local.encode()) > 64 or not _LOCAL_PART.fullmatch(local):
        return False
    labels = domain.split(".")
    if len(labels) < 2 or len(domain) > 253 or labels[-1].isdigit():
        return False
    if not all(_is_domain_label(label) for label in labels):
        return False
    if domain.isascii() and "xn--" not in domain.lower():
        return True
    try:  # an IDN, or an A-label that must decode to one
        a_label = _a_label(domain)
    except ValueError:
        return False
    return len(a_label) <= 253 and len(local.encode()) + 1 + len(a_label) <= 254


# Names that lead to no mailbox on the public internet, refused as recipients so that nobody
# can make Postwire talk SMTP to hosts of its own network: the special-use names localhost and
# invalid (RFC 6761), local (multicast DNS, RFC 6762), home.arpa (RFC 8375), onion (RFC 7686),
# internal (ICANN's private-use top-level domain), and the private suffixes in common use that
# are never delegated: localdomain, lan, home and corp. (test and example stay: they are for
# testing, where `delivery.routes` sends them somewhere.)
INTERNAL_DOMAIN_SUFFIXES = (
    "localhost",
    "invalid",
    "local",
    "home.arpa",
    "onion",
    "internal",
    "localdomain",
    "lan",
    "home",
    "corp",
)


# What `recipient_problem` says of text that is no address at all.
NOT_AN_ADDRESS = "Not an email address: local-part@domain, with a dot-atom local part"


def recipient_problem(address: str) -> str | None:
    """Why mail cannot be sent to `address` (a bare address, as RCPT TO or a parsed mailbox
    gives it), in words for the client; None when it can. A recipient is an address
    `is_address` accepts whose domain is a public name: not the null path, not an address
    literal, not a single label, not an internal name."""
    if address in ("", "<>"):
        return "The null path <> is not a recipient"
    local, at, domain = address.rpartition("@")
    if not at or not local:
        return NOT_AN_ADDRESS
    if domain.startswith("["):
        return "Address literals are not accepted as recipients: use the domain's name"
    name = domain.lower().rstrip(".")
    if "." not in name:
        return "A single-label domain is not a mail domain of the public internet"
    for suffix in INTERNAL_DOMAIN_SUFFIXES:
        if name == suffix or name.endswith("." + suffix):
            return f"Internal names (.{suffix}) are not mail domains of the public internet"
    if not is_address(address):
        return NOT_AN_ADDRESS
    return None


def ascii_domain(address: str) -> str:
    """`address` with its domain as SMTP and DNS carry it: an internationalized domain becomes
    its A-label (`ann@exämple.org` -> `ann@xn--exmple-cua.org`); the local part stays as given
    (a non-ASCII one still needs SMTPUTF8). Raises ValueError for a domain that is not a valid
    IDN; an address `is_address` accepts never raises."""
    local, _, domain = address.rpartition("@")
    if domain.isascii():
        return address
    return f"{local}@{_a_label(domain)}"


@functools.lru_cache(maxsize=4096)
def _a_label(domain: str) -> str:
    # IDNA 2008 with the UTS 46 mapping (case folding, full-width forms), not transitional:
    # `ß` stays `ß`, as browsers and the Rust core's builder (which writes the To: header) do.
    try:
        return idna.encode(domain, uts46=True, transitional=False).decode("ascii")
    except idna.IDNAError as error:
        raise ValueError(f"{domain!r} is not a valid internationalized domain: {error}") from None


def _is_domain_label(label: str) -> bool:
    if not 1 <= len(label) <= 63:
        return False
    if label.isascii():
        return _ASCII_LABEL.fullmatch(label) is not None
    # An IDN label: `_a_label` checks it fully (IDNA 2008).
    return all(char.isalnum() or char == "-" for char in label) and label[0] != "-" != label[-1]
