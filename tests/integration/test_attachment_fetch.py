"""`fetch_attachment` and `resolve_attachments` against a real HTTP/1.1 server on loopback."""

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from ipaddress import ip_network
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import trio

from postwire import _core
from postwire.api.attachments import fetch_attachment
from postwire.api.send_request import parse_send_request, resolve_attachments
from postwire.errors import ApiError

FILE = b"%PDF-1.4 attachment bytes \x00\xff"
BIG = b"x" * 10_000
NOW = datetime(2026, 3, 6, 15, 0, tzinfo=UTC)

Handler = Callable[[trio.SocketStream, str, dict[str, str]], Awaitable[None]]


async def respond(
    stream: trio.SocketStream, status: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> None:
    head = {"Connection": "close", **(headers or {})}
    if "Content-Length" not in head and body is not None:
        head["Content-Length"] = str(len(body))
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in head.items())]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + body)


async def handle_connection(stream: trio.SocketStream) -> None:
    """One request per connection: read its head, answer by path, close."""
    async with stream:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            data += chunk
        request_line, *header_lines = data.split(b"\r\n\r\n")[0].decode().split("\r\n")
        target = request_line.split(" ")[1]
        headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
        url = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        match url.path:
            case "/file.pdf":
                await respond(stream, "200 OK", FILE, {"Content-Type": "application/pdf"})
            case "/host":
                await respond(stream, "200 OK", headers["host"].encode())
            case "/big":
                await respond(stream, "200 OK", BIG)
            case "/big-undeclared":
                # No Content-Length: the body ends when the connection closes.
                await stream.send_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
                for _ in range(10):
                    await stream.send_all(BIG[:1000])
            case "/slow":
                await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
                await trio.sleep(30)
            case "/redirect":
                await respond(stream, "302 Found", b"", {"Location": query["to"]})
            case "/loop":
                await respond(stream, "301 Moved Permanently", b"", {"Location": "/loop"})
            case _:
                await respond(stream, "404 Not Found", b"missing")


@pytest.fixture
async def server(nursery: trio.Nursery) -> str:
    listeners = await nursery.start(partial(trio.serve_tcp, handle_connection, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def fetch(url: str, **kwargs: Any) -> bytes:
    options: dict[str, Any] = {"allow_private": True, "max_bytes": 1_000_000, "timeout": 5.0}
    options.update(kwargs)
    return await fetch_attachment(url, **options)


async def refusal(url: str, **kwargs: Any) -> str:
    with pytest.raises(ApiError) as caught:
        await fetch(url, **kwargs)
    assert (caught.value.status, caught.value.name) == (422, "invalid_attachment")
    return caught.value.message


async def test_fetch_works_when_private_addresses_are_allowed(server: str) -> None:
    assert await fetch(f"{server}/file.pdf") == FILE


async def test_loopback_is_refused_by_default(server: str) -> None:
    message = await refusal(f"{server}/file.pdf", allow_private=False)
    assert message == (
        "The attachment at `path` could not be fetched: the host `127.0.0.1` is a private, "
        "loopback or reserved address."
    )


async def test_the_connection_goes_to_the_vetted_address_and_keeps_the_host_name(
    server: str,
) -> None:
    port = urlsplit(server).port
    lookups: list[tuple[str, int]] = []

    async def resolve(host: str, port: int) -> list[str]:
        lookups.append((host, port))
        return {"files.test": ["127.0.0.1"]}[host]

    # files.test exists in no DNS: only the vetted address can have been connected to.
    body = await fetch(f"http://files.test:{port}/host", resolve=resolve)
    assert body == f"files.test:{port}".encode()
    assert lookups == [("files.test", port)]


async def test_an_unreachable_address_falls_through_to_the_next_vetted_one(server: str) -> None:
    port = urlsplit(server).port

    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.2", "127.0.0.1"]  # nothing listens on 127.0.0.2

    assert await fetch(f"http://files.test:{port}/file.pdf", resolve=resolve) == FILE


async def test_redirects_are_followed_and_vetted(server: str) -> None:
    allowed = [ip_network("127.0.0.1/32")]
    # Within the allowed network a redirect is followed...
    assert (
        await fetch(
            f"{server}/redirect?to=/file.pdf", allow_private=False, allowed_networks=allowed
        )
        == FILE
    )
    # ...but one to another loopback address or to cloud metadata is refused.
    port = urlsplit(server).port
    for target, host in [
        (f"http://127.0.0.2:{port}/file.pdf", "127.0.0.2"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("http://[::1]/", "::1"),
    ]:
        message = await refusal(
            f"{server}/redirect?to={target}", allow_private=False, allowed_networks=allowed
        )
        assert f"the host `{host}` is a private, loopback or reserved address" in message


async def test_redirect_to_another_scheme_is_refused(server: str) -> None:
    message = await refusal(f"{server}/redirect?to=file:///etc/passwd")
    assert message.endswith("it redirects to a URL that is not http or https.")


async def test_at_most_three_redirects(server: str) -> None:
    message = await refusal(f"{server}/loop")
    assert message.endswith("it redirects more than 3 times.")


async def test_an_error_status_is_refused(server: str) -> None:
    message = await refusal(f"{server}/nothing-here.pdf")
    assert message.endswith("the server answered 404.")


@pytest.mark.parametrize("path", ["/big", "/big-undeclared"])
async def test_a_body_over_the_limit_is_refused(server: str, path: str) -> None:
    assert await fetch(f"{server}{path}", max_bytes=len(BIG)) == BIG
    message = await refusal(f"{server}{path}", max_bytes=len(BIG) - 1)
    assert message.endswith(f"it is larger than {len(BIG) - 1} bytes.")


async def test_the_timeout_is_honoured(server: str) -> None:
    started = trio.current_time()
    message = await refusal(f"{server}/slow", timeout=0.5)
    assert message.endswith("it took longer than 0.5 seconds.")
    assert trio.current_time() - started < 5


async def test_resolve_attachments_fetches_in_order_within_the_size_budget(server: str) -> None:
    body = {
        "from": "sender@example.com",
        "to": "ann@example.org",
        "subject": "Report",
        "text": "Attached.",
        "attachments": [
            {"path": f"{server}/file.pdf"},
            {"content": [1, 2, 3], "filename": "inline.bin"},
            {"path": f"{server}/big", "filename": "big.txt", "content_type": "text/plain"},
        ],
    }
    request = parse_send_request(body, now=NOW)
    resolved = await resolve_attachments(request, allow_private=True)
    assert not resolved.has_remote_attachments
    summary = [
        (a.filename, a.content_type, a.content)
        for a in resolved.attachments
        if isinstance(a, _core.Attachment)
    ]
    assert summary == [
        ("file.pdf", None, FILE),
        ("inline.bin", None, b"\x01\x02\x03"),
        ("big.txt", "text/plain", BIG),
    ]
    assert resolved.size == request.size + 4 * ((len(FILE) + 2) // 3) + 4 * ((len(BIG) + 2) // 3)

    # The same request with room for the first file only.
    with pytest.raises(ApiError) as caught:
        await resolve_attachments(request, allow_private=True, max_total_bytes=request.size + 100)
    assert caught.value.message.startswith(
        "The attachment at `attachments[2].path` could not be fetched: it is larger than"
    )

    # And with private addresses refused, as in production.
    with pytest.raises(ApiError) as caught:
        await resolve_attachments(request, allow_private=False)
    assert caught.value.message.startswith("The attachment at `attachments[0].path`")
