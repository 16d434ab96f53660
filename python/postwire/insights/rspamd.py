"""Content scoring by rspamd: an email is scanned by the operator's own rspamd and its score,
action and heaviest symbols become insights.

The message goes to rspamd's `/checkv2` endpoint (its normal worker, port 11333 by default)
with the envelope in the headers rspamd reads (From, Rcpt, Helo, IP, Queue-Id). rspamd's
`insights.rspamd_url` is the operator's own configuration, not a tenant's input, so no SSRF
guard applies. A scan never raises into its caller: an rspamd that cannot be reached, is too
slow or answers nonsense gives one `rspamd_unavailable` insight instead.
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx
import trio

from postwire.config import Config
from postwire.insights.model import Insight, Severity
from postwire.insights.rspamd_symbols import explain_symbol

log = logging.getLogger("postwire.insights")

RSPAMD_CODES = ("rspamd_score", "rspamd_symbol", "rspamd_unavailable")
"""Every insight code a scan can produce (docs/insights.md explains each)."""

SCAN_TIMEOUT_SECONDS = 5.0  # a whole scan; rspamd's own checks usually take well under 1 s
MAX_SYMBOL_INSIGHTS = 5

# rspamd's actions, mildest to harshest, and how much each matters to a sender.
_ACTION_SEVERITY: dict[str, Severity] = {
    "no action": "ok",
    "greylist": "info",
    "soft reject": "info",
    "add header": "warning",
    "rewrite subject": "warning",
    "reject": "error",
}
_ACTION_FIX = {
    "no action": "",
    "greylist": "Receivers like this one delay such mail; the symbols below say why.",
    "soft reject": "Receivers like this one delay such mail; the symbols below say why.",
    "add header": "Receivers like this one would mark it as spam; fix the symbols below.",
    "rewrite subject": "Receivers like this one would mark it as spam; fix the symbols below.",
    "reject": "Receivers like this one would refuse it; fix the symbols below.",
}


class RspamdAnswerError(ValueError):
    """rspamd's answer is not the `/checkv2` JSON it documents."""


@dataclass(frozen=True, slots=True)
class RspamdSymbol:
    name: str
    score: float
    description: str | None


@dataclass(frozen=True, slots=True)
class RspamdResult:
    score: float
    required_score: float
    action: str
    symbols: tuple[RspamdSymbol, ...]


async def scan_message(
    config: Config,
    message: bytes,
    *,
    sender: str,
    recipients: Sequence[str],
    helo: str | None = None,
    client_ip: str | None = None,
    queue_id: str | None = None,
    client: httpx.AsyncClient | None = None,
    timeout: float = SCAN_TIMEOUT_SECONDS,
) -> list[Insight]:
    """The insights rspamd's verdict on `message` gives: a summary of its score, then its
    heaviest symbols; `[rspamd_unavailable]` when it gives none. `client` lets a caller that
    scans many emails reuse its connections."""
    url = config.insights.rspamd_url.rstrip("/") + "/checkv2"
    headers = scan_headers(
        sender=sender, recipients=recipients, helo=helo, client_ip=client_ip, queue_id=queue_id
    )
    reason = f"no answer within {timeout:g} s"
    with trio.move_on_after(timeout):
        try:
            if client is None:
                # No proxy from the environment: rspamd is the operator's, usually on loopback.
                own = httpx.AsyncClient(timeout=timeout, verify=_tls_context(), trust_env=False)
                async with own:
                    response = await own.post(url, content=message, headers=headers)
            else:
                response = await client.post(url, content=message, headers=headers)
            insights = insights_from_answer(response.status_code, response.content)
            _log_available(config.insights.rspamd_url)
            return insights
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = _describe_http_error(exc)
        except RspamdAnswerError as exc:
            reason = str(exc)
    _log_unavailable(config.insights.rspamd_url, reason)
    return [unavailable_insight(reason)]


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One context (the system's trusted CAs) for every scan: making one costs tens of
    milliseconds of CPU, which a client of its own per email would pay each time."""
    return ssl.create_default_context()


def scan_headers(
    *,
    sender: str,
    recipients: Sequence[str],
    helo: str | None,
    client_ip: str | None,
    queue_id: str | None,
) -> list[tuple[bytes, bytes]]:
    """The request headers through which rspamd learns the envelope; one `Rcpt` per recipient.
    Values with line breaks or other control characters are left out (no header injection)."""
    fields: list[tuple[str, str | None]] = [
        ("From", sender),
        *(("Rcpt", recipient) for recipient in recipients),
        ("Helo", helo),
        ("IP", client_ip),
        ("Queue-Id", queue_id),
        # Run every check even once the verdict is clear, so that every symbol is reported.
        ("Pass", "all"),
    ]
    return [
        (name.encode(), value.encode())
        for name, value in fields
        if value and not any(ord(char) < 0x20 or ord(char) == 0x7F for char in value)
    ]


def insights_from_answer(status: int, body: bytes) -> list[Insight]:
    """The insights of one `/checkv2` answer; `RspamdAnswerError` when it is not one."""
    if status != 200:
        raise RspamdAnswerError(f"rspamd answered HTTP {status}: {_error_text(body)}")
    return result_insights(parse_result(body))


def parse_result(body: bytes) -> RspamdResult:
    try:
        answer = json.loads(body)
    except ValueError:
        raise RspamdAnswerError(f"rspamd's answer is not JSON: {_snippet(body)}") from None
    if not isinstance(answer, dict):
        raise RspamdAnswerError("rspamd's answer is not a JSON object")
    if answer.get("is_skipped") is True:
        raise RspamdAnswerError("rspamd skipped the message (its settings exclude it)")
    if "error" in answer and "score" not in answer:
        raise RspamdAnswerError(f"rspamd could not scan the message: {answer['error']}")
    action = answer.get("action")
    if not isinstance(action, str):
        raise RspamdAnswerError("rspamd's answer has no action")
    symbols = answer.get("symbols", {})
    if not isinstance(symbols, dict):
        raise RspamdAnswerError("rspamd's symbols are not a JSON object")
    return RspamdResult(
        score=_number(answer, "score"),
        required_score=_number(answer, "required_score"),
        action=action,
        symbols=tuple(_symbol(name, fields) for name, fields in symbols.items()),
    )


def result_insights(result: RspamdResult) -> list[Insight]:
    """A summary of the verdict, then the symbols that weigh most (up to five)."""
    severity = _ACTION_SEVERITY.get(result.action, "info")
    summary = Insight(
        code="rspamd_score",
        severity=severity,
        message=(
            f"rspamd scored {result.score:.1f} of {result.required_score:g} ({result.action})"
        ),
        fix=_ACTION_FIX.get(result.action, "See the symbols below."),
    )
    return [summary, *(symbol_insight(symbol) for symbol in top_symbols(result.symbols))]


def top_symbols(
    symbols: Sequence[RspamdSymbol], limit: int = MAX_SYMBOL_INSIGHTS
) -> list[RspamdSymbol]:
    """The symbols that moved the score, heaviest first (by absolute weight; on a tie, by
    name so that the order is stable)."""
    weighing = [symbol for symbol in symbols if symbol.score != 0]
    weighing.sort(key=lambda symbol: (-abs(symbol.score), symbol.name))
    return weighing[:limit]


def symbol_insight(symbol: RspamdSymbol) -> Insight:
    explanation = explain_symbol(symbol.name, symbol.description)
    if symbol.score > 0:
        return Insight(
            code="rspamd_symbol",
            severity="warning",
            message=f"{symbol.name} (+{symbol.score:g}): {explanation.meaning}",
            fix=explanation.fix,
        )
    # A symbol that lowers the score is something done right: shown, nothing to fix.
    return Insight(
        code="rspamd_symbol",
        severity="ok",
        message=f"{symbol.name} ({symbol.score:g}): {explanation.meaning}",
        fix="",
    )


def unavailable_insight(reason: str) -> Insight:
    # The team reading it sees why, not where: rspamd's address is the operator's business.
    return Insight(
        code="rspamd_unavailable",
        severity="info",
        message=f"rspamd did not score this email: {reason}",
        fix="Ask the operator to check that rspamd runs and insights.rspamd_url points at its "
        "normal worker.",
    )


# The operator hears of an outage once, when it starts or its reason changes, and once when it
# ends, rather than once for every email scanned meanwhile.
_outage: list[str] = []


def _log_unavailable(rspamd_url: str, reason: str) -> None:
    if _outage != [reason]:
        _outage[:] = [reason]
        log.warning("rspamd at %s gives no verdicts: %s", rspamd_url, reason)


def _log_available(rspamd_url: str) -> None:
    if _outage:
        _outage.clear()
        log.info("rspamd at %s gives verdicts again", rspamd_url)


def _number(answer: Mapping[str, object], key: str) -> float:
    value = answer.get(key)
    # bool is an int to Python, never a score to rspamd.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RspamdAnswerError(f"rspamd's answer has no numeric {key}")
    return float(value)


def _symbol(name: str, fields: object) -> RspamdSymbol:
    if not isinstance(fields, dict):
        raise RspamdAnswerError(f"rspamd's symbol {name} is not a JSON object")
    description = fields.get("description")
    return RspamdSymbol(
        name=name,
        score=_number(fields, "score"),
        description=description if isinstance(description, str) else None,
    )


def _describe_http_error(exc: httpx.HTTPError | httpx.InvalidURL) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "it did not answer in time"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({exc or 'connection refused'})"
    return f"{type(exc).__name__}: {exc}"


def _error_text(body: bytes) -> str:
    """rspamd's own words for a refusal (`{"error": "invalid command", ...}`), else the start
    of whatever answered."""
    try:
        answer = json.loads(body)
    except ValueError:
        return _snippet(body)
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        return str(answer["error"])
    return _snippet(body)


def _snippet(body: bytes, limit: int = 80) -> str:
    text = body[:limit].decode("utf-8", errors="replace").strip()
    return repr(text + ("…" if len(body) > limit else ""))
