"""Attachment bytes: the content encodings the SDKs send, refused file types, and `path` URLs
fetched with a guard against server-side request forgery.

The JSON attachment object itself is read by `postwire.api.send_request`; this module turns its
`content` into bytes and its `path` into bytes fetched from the network.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

import httpx
import trio

from postwire.errors import ApiError, validation_error
from postwire.outbound_http import (
    IPNetwork,
    RefusedTarget,
    Resolver,
    as_http_url,
    parse_http_url,
    resolve_host,
    send_to_first_reachable,
    vetted_addresses,
)

MAX_REDIRECTS = 3

# Resend's list of extensions it refuses to send (DOCS knowledge-base, "What attachment types
# are not supported?"): executables, scripts, shortcuts, installers and the like.
# fmt: off
FORBIDDEN_EXTENSIONS = frozenset((
    "adp", "app", "asp", "bas", "bat", "cer", "chm", "cmd", "com", "cpl", "crt", "csh", "der",
    "exe", "fxp", "gadget", "hlp", "hta", "inf", "ins", "isp", "its", "js", "jse", "ksh", "lib",
    "lnk", "mad", "maf", "mag", "mam", "maq", "mar", "mas", "mat", "mau", "mav", "maw", "mda",
    "mdb", "mde", "mdt", "mdw", "mdz", "msc", "msh", "msh1", "msh2", "mshxml", "msh1xml",
    "msh2xml", "msi", "msp", "mst", "ops", "pcd", "pif", "plg", "prf", "prg", "reg", "scf", "scr",
    "sct", "shb", "shs", "sys", "ps1", "ps1xml", "ps2", "ps2xml", "psc1", "psc2", "tmp", "url",
    "vb", "vbe", "vbs", "vps", "vsmacros", "vss", "vst", "vsw", "vxd", "ws", "wsc", "wsf", "wsh",
    "xnk",
))
# fmt: on


def decode_attachment_content(value: object, field: str) -> bytes:
    """The bytes of an attachment's `content`: a base64 string, an array of byte values
    (Python's `list(bytes)`, Go, Rust, Ruby) or Node's Buffer JSON `{"type": "Buffer",
    "data": [...]}`. Raises 422 `validation_error` naming `field` otherwise."""
    if isinstance(value, str):
        return _decode_base64(value, field)
    if isinstance(value, list):
        return _bytes_from_ints(value, field)
    if isinstance(value, dict) and value.get("type") == "Buffer" and "data" in value:
        data = value["data"]
        if isinstance(data, list):
            return _bytes_from_ints(data, f"{field}.data")
    raise validation_error(
        f"The `{field}` field must be a base64 string, an array of bytes or a Buffer."
    )


def _decode_base64(text: str, field: str) -> bytes:
    # SDKs and hand-written clients wrap lines, drop the padding or use the URL-safe alphabet;
    # each is accepted, anything else is refused rather than silently dropped.
    compact = "".join(text.split()).replace("-", "+").replace("_", "/")
    compact += "=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise validation_error(f"The `{field}` field is not valid base64.") from None


def _bytes_from_ints(values: list[object], field: str) -> bytes:
    # bool is an int subclass: `true` is not a byte.
    if all(type(value) is int and 0 <= value <= 255 for value in values):
        return bytes(values)  # type: ignore[arg-type]  # checked element by element above
    raise validation_error(f"The `{field}` field must only hold integers from 0 to 255.")


def base64_size(byte_count: int) -> int:
    """Length of `byte_count` bytes once base64-encoded (the contract's measure of size)."""
    return 4 * ((byte_count + 2) // 3)


def refuse_forbidden_file_type(filename: str, field: str) -> None:
    """Raise 422 `invalid_attachment` when `filename` ends in an extension Resend refuses.
    Trailing dots and spaces, which Windows ignores, are ignored here too."""
    stem, dot, extension = filename.rstrip(". ").rpartition(".")
    if dot and stem and extension.lower() in FORBIDDEN_EXTENSIONS:
        raise ApiError(
            422,
            "invalid_attachment",
            f"The `{field}` file type `.{extension.lower()}` is not supported.",
        )


def filename_from_url(url: str) -> str | None:
    """The last segment of the URL's path, decoded; None when there is none."""
    name = unquote(urlsplit(url).path.rpartition("/")[2])
    return name or None


async def fetch_attachment(
    url: str,
    *,
    allow_private: bool,
    max_bytes: int,
    timeout: float,
    allowed_networks: Sequence[IPNetwork] = (),
    resolve: Resolver = resolve_host,
    field: str = "path",
) -> bytes:
    """GET `url` (http or https) and return its body, at most `max_bytes`, within `timeout`
    seconds in all (resolution, redirects and body included).

    Each hop's host is resolved once and every address vetted (unless `allow_private`); the
    connection then goes to a vetted address while the Host header and TLS server name keep the
    URL's host, so a second DNS answer cannot redirect it (DNS rebinding). At most 3 redirects
    are followed, each vetted the same way. Failures raise 422 `invalid_attachment` naming
    `field`.
    """
    target = parse_http_url(url)
    if target is None:
        raise _fetch_error(field, "it is not an http or https URL")
    with trio.move_on_after(timeout):
        async with httpx.AsyncClient(
            trust_env=False,  # a proxy from the environment would connect to unvetted hosts
            follow_redirects=False,
            timeout=httpx.Timeout(timeout),
        ) as client:
            return await _fetch_following_redirects(
                client,
                target,
                allow_private=allow_private,
                max_bytes=max_bytes,
                allowed_networks=allowed_networks,
                resolve=resolve,
                field=field,
            )
    raise _fetch_error(field, f"it took longer than {timeout:g} seconds")


async def _fetch_following_redirects(
    client: httpx.AsyncClient,
    url: httpx.URL,
    *,
    allow_private: bool,
    max_bytes: int,
    allowed_networks: Sequence[IPNetwork],
    resolve: Resolver,
    field: str,
) -> bytes:
    for _ in range(MAX_REDIRECTS + 1):
        port = url.port or (443 if url.scheme == "https" else 80)
        # raw_host: an IDN in its punycode form, an IPv6 address without brackets.
        host = url.raw_host.decode("ascii")
        try:
            addresses = await vetted_addresses(
                host,
                port,
                allow_private=allow_private,
                allowed_networks=allowed_networks,
                resolve=resolve,
            )
            response = await send_to_first_reachable(client, url, addresses)
        except RefusedTarget as refusal:
            raise _fetch_error(field, str(refusal)) from None
        try:
            if response.has_redirect_location:
                url = _redirect_target(url, response.headers["location"], field)
                continue
            if response.status_code != 200:
                raise _fetch_error(field, f"the server answered {response.status_code}")
            return await _read_limited(response, max_bytes, field)
        except httpx.HTTPError:
            raise _fetch_error(field, "the transfer failed") from None
        finally:
            await response.aclose()
    raise _fetch_error(field, f"it redirects more than {MAX_REDIRECTS} times")


def _redirect_target(url: httpx.URL, location: str, field: str) -> httpx.URL:
    try:
        target = as_http_url(url.join(location))
    except (httpx.InvalidURL, ValueError):
        target = None
    if target is None:
        raise _fetch_error(field, "it redirects to a URL that is not http or https")
    return target


async def _read_limited(response: httpx.Response, max_bytes: int, field: str) -> bytes:
    too_large = _fetch_error(field, f"it is larger than {max_bytes} bytes")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            raise too_large
    return bytes(body)


def _fetch_error(field: str, reason: str) -> ApiError:
    return ApiError(
        422, "invalid_attachment", f"The attachment at `{field}` could not be fetched: {reason}."
    )
