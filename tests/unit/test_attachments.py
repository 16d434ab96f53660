"""Attachments: content encodings, the attachment object of the send body, refused file types and
the SSRF guard's address rules. No sockets: fetches here are refused before any connection."""

import base64
from datetime import UTC, datetime
from ipaddress import ip_address, ip_network
from typing import Any

import pytest

from postwire import _core
from postwire.api.attachments import (
    FORBIDDEN_EXTENSIONS,
    base64_size,
    decode_attachment_content,
    fetch_attachment,
    filename_from_url,
    refuse_forbidden_file_type,
)
from postwire.api.send_request import parse_batch_request, parse_send_request
from postwire.compose.request import RemoteAttachment, SendRequest
from postwire.errors import ApiError
from postwire.outbound_http import is_refused_address

NOW = datetime(2026, 3, 6, 15, 0, tzinfo=UTC)
PDF = b"%PDF-1.4\n\x00\xff\xfe binary"


def send_body(*attachments: Any) -> dict[str, Any]:
    return {
        "from": "Acme <sender@example.com>",
        "to": "ann@example.org",
        "subject": "Report",
        "html": '<p>See <img src="cid:logo"></p>',
        "attachments": list(attachments),
    }


def parse_attachments(*attachments: Any) -> tuple[_core.Attachment | RemoteAttachment, ...]:
    return parse_send_request(send_body(*attachments), now=NOW).attachments


def refusal(*attachments: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_send_request(send_body(*attachments), now=NOW)
    return caught.value


# --- content encodings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (base64.b64encode(PDF).decode(), PDF),
        (base64.urlsafe_b64encode(b"\xfb\xff\xbf").decode(), b"\xfb\xff\xbf"),
        (base64.b64encode(b"ab").decode().rstrip("="), b"ab"),  # padding left out
        ("\n".join(["SGVsbG8s", "IHdvcmxk", "IQ=="]), b"Hello, world!"),  # wrapped lines
        ("", b""),
        (list(PDF), PDF),  # Python SDK: list(bytes); Go, Rust and Ruby too
        ([], b""),
        ({"type": "Buffer", "data": list(PDF)}, PDF),  # Node Buffer JSON
    ],
)
def test_content_encodings(content: object, expected: bytes) -> None:
    assert decode_attachment_content(content, "attachments[0].content") == expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not base64!", "The `attachments[0].content` field is not valid base64."),
        ("abcde", "The `attachments[0].content` field is not valid base64."),
        ([0, 256], "The `attachments[0].content` field must only hold integers from 0 to 255."),
        ([-1], "The `attachments[0].content` field must only hold integers from 0 to 255."),
        ([1.5], "The `attachments[0].content` field must only hold integers from 0 to 255."),
        ([True], "The `attachments[0].content` field must only hold integers from 0 to 255."),
        (["1"], "The `attachments[0].content` field must only hold integers from 0 to 255."),
        (
            {"type": "Buffer", "data": [300]},
            "The `attachments[0].content.data` field must only hold integers from 0 to 255.",
        ),
        (
            42,
            "The `attachments[0].content` field must be a base64 string, an array of bytes or "
            "a Buffer.",
        ),
        (
            {"type": "Blob", "data": [1]},
            "The `attachments[0].content` field must be a base64 string, an array of bytes or "
            "a Buffer.",
        ),
    ],
)
def test_bad_content_is_a_validation_error(content: object, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        decode_attachment_content(content, "attachments[0].content")
    assert (caught.value.status, caught.value.name, caught.value.message) == (
        422,
        "validation_error",
        message,
    )


@pytest.mark.parametrize(("size", "encoded"), [(0, 0), (1, 4), (2, 4), (3, 4), (4, 8), (300, 400)])
def test_base64_size_matches_the_encoder(size: int, encoded: int) -> None:
    assert base64_size(size) == encoded == len(base64.b64encode(bytes(size)))


# --- the attachment object -----------------------------------------------------------------


def test_every_spelling_the_sdks_send() -> None:
    attachments = parse_attachments(
        {"content": base64.b64encode(PDF).decode(), "filename": "report.pdf"},
        {"content": list(b"a,b\n"), "filename": "data.csv", "content_type": "text/csv"},
        {"content": [1, 2], "filename": "x.bin", "contentType": "application/octet-stream"},
        {"content": {"type": "Buffer", "data": [137, 80]}, "filename": "logo.png",
         "content_id": "logo"},
        {"content": [1], "filename": "pic.png", "inline_content_id": "pic"},
        {"content": [1], "filename": False},  # Node: filename?: string | false
    )  # fmt: skip
    assert all(isinstance(a, _core.Attachment) for a in attachments)
    summary = [
        (a.content, a.filename, a.content_type, a.content_id)
        for a in attachments
        if isinstance(a, _core.Attachment)
    ]
    assert summary == [
        (PDF, "report.pdf", None, None),
        (b"a,b\n", "data.csv", "text/csv", None),
        (b"\x01\x02", "x.bin", "application/octet-stream", None),
        (b"\x89P", "logo.png", None, "logo"),
        (b"\x01", "pic.png", None, "pic"),
        (b"\x01", None, None, None),
    ]


def test_an_empty_spelling_gives_way_to_the_other() -> None:
    (attachment,) = parse_attachments(
        {
            "content": [1],
            "filename": "logo.png",
            "content_type": "",
            "contentType": "image/png",
            "content_id": "",
            "inline_content_id": "logo",
        }
    )
    assert isinstance(attachment, _core.Attachment)
    assert (attachment.content_type, attachment.content_id) == ("image/png", "logo")


def test_content_type_parameters_are_dropped_and_case_folded() -> None:
    (attachment,) = parse_attachments(
        {"content": [1], "filename": "a.txt", "content_type": "Text/Plain; charset=UTF-8"}
    )
    assert isinstance(attachment, _core.Attachment)
    assert attachment.content_type == "text/plain"


def test_content_wins_over_path() -> None:
    (attachment,) = parse_attachments({"content": [7], "path": "https://example.com/a.pdf"})
    assert isinstance(attachment, _core.Attachment)
    assert attachment.content == b"\x07"


def test_path_is_kept_for_fetching_and_named_after_the_url() -> None:
    request = parse_send_request(
        send_body(
            {"content": [1], "filename": "first.txt"},
            {"path": "https://files.example.com/reports/Q1%20report.pdf?sig=abc"},
            {"path": "http://files.example.com/x", "filename": "given.pdf",
             "content_type": "application/pdf", "content_id": "x"},
            {"path": "https://files.example.com/"},
        ),
        now=NOW,
    )  # fmt: skip
    assert request.has_remote_attachments
    assert request.attachments[1:] == (
        RemoteAttachment(
            "https://files.example.com/reports/Q1%20report.pdf?sig=abc",
            "Q1 report.pdf",
            None,
            None,
            "attachments[1]",
        ),
        RemoteAttachment(
            "http://files.example.com/x", "given.pdf", "application/pdf", "x", "attachments[2]"
        ),
        RemoteAttachment("https://files.example.com/", None, None, None, "attachments[3]"),
    )
    assert request.size == len(send_body()["subject"]) + len(send_body()["html"]) + 4


def test_a_url_filename_with_line_breaks_is_not_used() -> None:
    (attachment,) = parse_attachments({"path": "https://example.com/a%0D%0AX-Evil:%201.pdf"})
    assert isinstance(attachment, RemoteAttachment)
    assert attachment.filename is None


@pytest.mark.parametrize(
    ("attachment", "status", "name", "message"),
    [
        (
            {"filename": "a.pdf"},
            422,
            "invalid_attachment",
            "Attachment must have either a `content` or `path`.",
        ),
        (
            {"content": None, "path": None},
            422,
            "invalid_attachment",
            "Attachment must have either a `content` or `path`.",
        ),
        (
            "report.pdf",
            422,
            "validation_error",
            "The `attachments[0]` field must be an attachment object.",
        ),
        (
            {"content": [1], "filename": "setup.exe"},
            422,
            "invalid_attachment",
            "The `attachments[0].filename` file type `.exe` is not supported.",
        ),
        (
            {"path": "https://example.com/dl/INSTALL.MSI"},
            422,
            "invalid_attachment",
            "The `attachments[0].path` file type `.msi` is not supported.",
        ),
        (
            {"content": [1], "filename": 7},
            422,
            "validation_error",
            "The `attachments[0].filename` field must be a string.",
        ),
        (
            {"content": [1], "filename": "a\r\nContent-Type: text/html"},
            422,
            "validation_error",
            "The `attachments[0].filename` field must not contain line breaks or NUL characters.",
        ),
        (
            {"content": [1], "filename": "a\x00.pdf"},
            422,
            "validation_error",
            "The `attachments[0].filename` field must not contain line breaks or NUL characters.",
        ),
        (
            {"content": [1], "filename": "a\x1b.pdf"},
            422,
            "validation_error",
            "The `attachments[0].filename` field must not contain control characters.",
        ),
        (
            {"content": [1], "filename": "é" * 128 + ".pdf"},
            422,
            "validation_error",
            "The `attachments[0].filename` field must be at most 255 bytes long.",
        ),
        (
            {"content": [1], "content_type": "pdf"},
            422,
            "validation_error",
            "The `attachments[0].content_type` field must be a MIME type such as "
            "`application/pdf`.",
        ),
        (
            {"content": [1], "contentType": "multipart/mixed"},
            422,
            "validation_error",
            "The `attachments[0].content_type` field must be a MIME type such as "
            "`application/pdf`.",
        ),
        (
            {"content": [1], "content_type": "text/plain\r\nX-Evil: 1"},
            422,
            "validation_error",
            "The `attachments[0].content_type` field must be a MIME type such as "
            "`application/pdf`.",
        ),
        (
            {"content": [1], "content_id": "x" * 128},
            422,
            "validation_error",
            "The `attachments[0].content_id` field must be 1 to 127 characters without spaces.",
        ),
        (
            {"content": [1], "inline_content_id": "logo\r\nBcc: victim@example.com"},
            422,
            "validation_error",
            "The `attachments[0].content_id` field must not contain line breaks or NUL characters.",
        ),
        (
            {"path": "ftp://example.com/a.pdf"},
            422,
            "validation_error",
            "The `attachments[0].path` field must be an http or https URL.",
        ),
        (
            {"path": "/etc/passwd"},
            422,
            "validation_error",
            "The `attachments[0].path` field must be an http or https URL.",
        ),
        (
            {"path": "http://[::1/a.pdf"},
            422,
            "validation_error",
            "The `attachments[0].path` field must be an http or https URL.",
        ),
        (
            {"path": "https://example.com/\ud800.pdf"},
            422,
            "validation_error",
            "The `attachments[0].path` field must be an http or https URL.",
        ),
        (
            {"content": [1], "filename": "\ud800.pdf"},
            422,
            "validation_error",
            "The `attachments[0].filename` field must be valid Unicode text.",
        ),
        (
            {"path": ["https://example.com/a.pdf"]},
            422,
            "validation_error",
            "The `attachments[0].path` field must be an http or https URL.",
        ),
    ],
)
def test_refused_attachment_objects(
    attachment: object, status: int, name: str, message: str
) -> None:
    error = refusal(attachment)
    assert (error.status, error.name, error.message) == (status, name, message)


def test_the_index_of_the_refused_attachment_is_named() -> None:
    error = refusal({"content": [1]}, {"content": [1]}, {"content": "%%"})
    assert error.message == "The `attachments[2].content` field is not valid base64."


def test_attachments_must_be_an_array() -> None:
    body = send_body()
    body["attachments"] = {"content": [1]}
    with pytest.raises(ApiError) as caught:
        parse_send_request(body, now=NOW)
    assert caught.value.message == "The `attachments` field must be an array of attachment objects."


def test_attachments_are_refused_when_not_allowed() -> None:
    with pytest.raises(ApiError) as caught:
        parse_send_request(send_body({"content": [1]}), now=NOW, allow_attachments=False)
    assert caught.value.message == "The `attachments` field is not supported for batch emails."
    # An empty or null list is no attachment at all.
    for empty in ([], None):
        body = send_body()
        body["attachments"] = empty
        assert parse_send_request(body, now=NOW, allow_attachments=False).attachments == ()


def test_batch_items_may_not_carry_attachments() -> None:
    with pytest.raises(ApiError) as caught:
        parse_batch_request([send_body(), send_body({"content": [1]})], now=NOW, mode="strict")
    assert caught.value.message == (
        "Email at index 1: The `attachments` field is not supported for batch emails."
    )


def test_total_size_counts_attachments_after_base64() -> None:
    body = send_body({"content": list(bytes(300)), "filename": "a.bin"})
    base = len(body["subject"]) + len(body["html"])
    request = parse_send_request(body, now=NOW, max_total_bytes=base + 400)
    assert isinstance(request, SendRequest)
    assert request.size == base + 400
    with pytest.raises(ApiError) as caught:
        parse_send_request(body, now=NOW, max_total_bytes=base + 399)
    assert caught.value.status == 422
    assert "after base64 encoding" in caught.value.message


def test_the_default_limit_is_40_mb() -> None:
    body = send_body({"content": base64.b64encode(bytes(30 * 2**20)).decode(), "filename": "a"})
    with pytest.raises(ApiError) as caught:
        parse_send_request(body, now=NOW)
    assert caught.value.message == (
        "The email must not be larger than 40 MB, attachments counted after base64 encoding."
    )


# --- refused file types --------------------------------------------------------------------


@pytest.mark.parametrize(
    "filename",
    ["setup.exe", "SETUP.EXE", "run.bat", "script.js", "x.tar.vbs", "evil.exe.", "a.exe "],
)
def test_forbidden_file_types(filename: str) -> None:
    with pytest.raises(ApiError) as caught:
        refuse_forbidden_file_type(filename, "attachments[0].filename")
    assert (caught.value.status, caught.value.name) == (422, "invalid_attachment")


@pytest.mark.parametrize(
    "filename", ["report.pdf", "archive.tar.gz", "exe", ".js", "notes.json", "setup.exe.pdf"]
)
def test_allowed_file_types(filename: str) -> None:
    refuse_forbidden_file_type(filename, "attachments[0].filename")


def test_the_forbidden_list_is_resends() -> None:
    assert len(FORBIDDEN_EXTENSIONS) == 89
    assert {"exe", "js", "vbs", "ps1", "msi", "lnk", "scr", "xnk"} <= FORBIDDEN_EXTENSIONS


@pytest.mark.parametrize(
    ("url", "filename"),
    [
        ("https://example.com/a/b/report.pdf", "report.pdf"),
        ("https://example.com/a%20b.pdf?x=1#f", "a b.pdf"),
        ("https://example.com/", None),
        ("https://example.com", None),
    ],
)
def test_filename_from_url(url: str, filename: str | None) -> None:
    assert filename_from_url(url) == filename


# --- the SSRF guard ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.8.9.10",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # carrier-grade NAT
        "100.100.100.200",  # Alibaba metadata
        "0.0.0.0",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "192.0.2.1",  # documentation
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",  # AWS metadata over IPv6
        "ff02::1",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:169.254.169.254",
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "2001:db8::1",  # documentation
    ],
)
def test_refused_addresses(address: str) -> None:
    assert is_refused_address(ip_address(address))


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses(address: str) -> None:
    assert not is_refused_address(ip_address(address))


def test_allowed_networks_let_an_operators_own_hosts_through_but_never_metadata() -> None:
    allowed = [ip_network("10.0.0.0/8"), ip_network("169.254.0.0/16")]
    assert not is_refused_address(ip_address("10.1.2.3"), allowed)
    assert is_refused_address(ip_address("10.1.2.3"), [ip_network("10.9.0.0/16")])
    assert is_refused_address(ip_address("169.254.169.254"), allowed)
    assert not is_refused_address(ip_address("169.254.1.1"), allowed)


def resolver(answers: dict[str, list[str]], calls: list[tuple[str, int]]) -> Any:
    async def resolve(host: str, port: int) -> list[str]:
        calls.append((host, port))
        if host not in answers:
            raise OSError("no such host")
        return answers[host]

    return resolve


async def fetch_refusal(url: str, answers: dict[str, list[str]], **kwargs: Any) -> ApiError:
    calls: list[tuple[str, int]] = []
    options: dict[str, Any] = {"allow_private": False, "max_bytes": 1000, "timeout": 5.0}
    options.update(kwargs)
    with pytest.raises(ApiError) as caught:
        await fetch_attachment(url, resolve=resolver(answers, calls), **options)
    assert (caught.value.status, caught.value.name) == (422, "invalid_attachment")
    return caught.value


async def test_a_host_resolving_to_a_private_address_is_refused_before_connecting() -> None:
    error = await fetch_refusal("http://files.test/a.pdf", {"files.test": ["10.0.0.5"]})
    assert error.message == (
        "The attachment at `path` could not be fetched: the host `files.test` is a private, "
        "loopback or reserved address."
    )


async def test_one_private_answer_among_public_ones_refuses_the_host() -> None:
    error = await fetch_refusal(
        "https://files.test/a.pdf",
        {"files.test": ["93.184.216.34", "127.0.0.1"]},
        field="attachments[3].path",
    )
    assert error.message.startswith("The attachment at `attachments[3].path` could not be")


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://[::1]:8080/", "::1"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("http://[fd00:ec2::254]/", "fd00:ec2::254"),
        ("http://0.0.0.0/", "0.0.0.0"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
    ],
)
async def test_address_literals_are_vetted_too(url: str, host: str) -> None:
    error = await fetch_refusal(url, {host: [host]})
    assert "private, loopback or reserved" in error.message


async def test_an_unresolvable_host() -> None:
    error = await fetch_refusal("https://nowhere.test/a.pdf", {})
    assert error.message.endswith("the host `nowhere.test` could not be resolved.")


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "gopher://x.test/", "http:///x", "http://[::1/"]
)
async def test_only_http_and_https_urls(url: str) -> None:
    error = await fetch_refusal(url, {})
    assert error.message.endswith("it is not an http or https URL.")
