"""rspamd's `/checkv2` answers become insights: the summary's severity follows the action, the
heaviest symbols are explained in plain words, and any answer that is not a verdict becomes
`rspamd_unavailable`, never an exception."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
import trio

from postwire.config import Config, InsightsConfig
from postwire.insights.model import Insight
from postwire.insights.rspamd import (
    MAX_SYMBOL_INSIGHTS,
    RSPAMD_CODES,
    RspamdAnswerError,
    insights_from_answer,
    parse_result,
    scan_headers,
    scan_message,
)
from postwire.insights.rspamd_symbols import SYMBOL_EXPLANATIONS, explain_symbol


def answer(action: str = "no action", score: float = 1.0, **symbols: float) -> bytes:
    return json.dumps(
        {
            "is_skipped": False,
            "score": score,
            "required_score": 15.0,
            "action": action,
            "symbols": {
                name: {"name": name, "score": weight, "metric_score": weight}
                for name, weight in symbols.items()
            },
            "messages": {},
        }
    ).encode()


@pytest.mark.parametrize(
    ("action", "severity"),
    [
        ("no action", "ok"),
        ("greylist", "info"),
        ("soft reject", "info"),
        ("add header", "warning"),
        ("rewrite subject", "warning"),
        ("reject", "error"),
        ("some future action", "info"),
    ],
)
def test_summary_severity_follows_the_action(action: str, severity: str) -> None:
    summary = insights_from_answer(200, answer(action, score=3.24))[0]
    assert summary.code == "rspamd_score"
    assert summary.severity == severity
    assert summary.message == f"rspamd scored 3.2 of 15 ({action})"
    assert (summary.fix == "") == (action == "no action")


def test_heaviest_symbols_follow_the_summary_explained() -> None:
    insights = insights_from_answer(
        200,
        answer(
            "greylist",
            score=6.1,
            MISSING_MID=2.5,
            SUBJ_ALL_CAPS=2.175,
            MISSING_DATE=1.0,
            MIME_HTML_ONLY=0.2,
            MIME_GOOD=-0.1,
            RCVD_COUNT_ZERO=0.0,
            FROM_HAS_DN=0.0,
        ),
    )
    assert [i.code for i in insights] == ["rspamd_score"] + ["rspamd_symbol"] * 5
    symbols = insights[1:]
    assert [i.message.split(" ")[0] for i in symbols] == [
        "MISSING_MID",
        "SUBJ_ALL_CAPS",
        "MISSING_DATE",
        "MIME_HTML_ONLY",
        "MIME_GOOD",
    ]
    assert symbols[0] == Insight(
        code="rspamd_symbol",
        severity="warning",
        message="MISSING_MID (+2.5): The email has no Message-ID header.",
        fix=SYMBOL_EXPLANATIONS["MISSING_MID"].fix,
    )
    # A symbol that lowers the score is shown as a check passed, with nothing to fix.
    assert symbols[-1].severity == "ok"
    assert symbols[-1].message.startswith("MIME_GOOD (-0.1): ")
    assert symbols[-1].fix == ""


def test_at_most_five_symbols_by_absolute_weight() -> None:
    weights = {f"SYM_{n}": float(n) for n in range(1, 9)}
    weights["BIG_HELP"] = -20.0
    insights = insights_from_answer(200, answer("reject", score=16, **weights))
    names = [i.message.split(" ")[0] for i in insights[1:]]
    assert len(names) == MAX_SYMBOL_INSIGHTS
    assert names == ["BIG_HELP", "SYM_8", "SYM_7", "SYM_6", "SYM_5"]


def test_unknown_symbol_uses_rspamds_description() -> None:
    body = json.dumps(
        {
            "score": 4.0,
            "required_score": 15,
            "action": "no action",
            "symbols": {
                "NEW_RULE": {"score": 4.0, "description": "Something rspamd knows"},
                "NO_WORDS": {"score": 3.0},
            },
        }
    ).encode()
    _, described, bare = insights_from_answer(200, body)
    assert described.message == "NEW_RULE (+4): Something rspamd knows."
    assert described.fix == "See rspamd's documentation of NEW_RULE."
    assert bare.message == "NO_WORDS (+3): rspamd matched this rule."


def test_block_list_families_are_explained() -> None:
    for name in ("URIBL_BLACK", "DBL_SPAM", "SURBL_MULTI", "RBL_SPAMHAUS_XBL"):
        explanation = explain_symbol(name, "some list")
        assert "block list" in explanation.meaning, name


def test_every_explanation_is_one_plain_line() -> None:
    assert len(SYMBOL_EXPLANATIONS) >= 40
    for name, explanation in SYMBOL_EXPLANATIONS.items():
        for text in (explanation.meaning, explanation.fix):
            assert text and "\n" not in text and text.endswith("."), name


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, b"oops", "HTTP 500: 'oops'"),
        (500, b'{"error": "invalid command"}', "HTTP 500: invalid command$"),
        (200, b"<html>", "not JSON"),
        (200, b"[1, 2]", "not a JSON object"),
        (200, b'{"is_skipped": true, "action": "no action"}', "skipped"),
        (200, b'{"error": "bad message"}', "bad message"),
        (200, b'{"score": 1, "required_score": 15}', "no action"),
        (200, b'{"score": "1", "required_score": 15, "action": "reject"}', "numeric score"),
        (200, b'{"score": true, "required_score": 15, "action": "reject"}', "numeric score"),
        (200, b'{"score": 1, "required_score": 15, "action": "x", "symbols": []}', "symbols"),
        (
            200,
            b'{"score": 1, "required_score": 15, "action": "x", "symbols": {"A": 1}}',
            "symbol A",
        ),
    ],
)
def test_answers_that_are_no_verdict_are_refused(status: int, body: bytes, reason: str) -> None:
    with pytest.raises(RspamdAnswerError, match=reason):
        insights_from_answer(status, body)


def test_parse_result_reads_score_and_action() -> None:
    result = parse_result(answer("add header", score=7.5, R_SPF_FAIL=1.0))
    assert (result.score, result.required_score, result.action) == (7.5, 15.0, "add header")
    assert [s.name for s in result.symbols] == ["R_SPF_FAIL"]


def test_headers_carry_the_envelope_and_refuse_line_breaks() -> None:
    headers = scan_headers(
        sender="news@example.test",
        recipients=["a@example.org", "b@exämple.org", "evil@x\r\nX-Injected: 1"],
        helo="mail.example.test",
        client_ip="192.0.2.1",
        queue_id=None,
    )
    assert headers == [
        (b"From", b"news@example.test"),
        (b"Rcpt", b"a@example.org"),
        (b"Rcpt", "b@exämple.org".encode()),
        (b"Helo", b"mail.example.test"),
        (b"IP", b"192.0.2.1"),
        (b"Pass", b"all"),
    ]


def config_for(url: str, tmp_path: Path) -> Config:
    return Config(data_dir=tmp_path, insights=InsightsConfig(rspamd_url=url))


async def test_scan_sends_the_message_and_envelope(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=answer("no action", score=0.5, MIME_GOOD=-0.1))

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        insights = await scan_message(
            config_for("http://rspamd.test:11333/", tmp_path),
            b"Subject: hi\r\n\r\nbody\r\n",
            sender="a@example.test",
            recipients=["b@example.org", "c@example.org"],
            queue_id="em_1",
            client=client,
        )
    assert [i.code for i in insights] == ["rspamd_score", "rspamd_symbol"]
    (request,) = seen
    assert str(request.url) == "http://rspamd.test:11333/checkv2"
    assert request.content == b"Subject: hi\r\n\r\nbody\r\n"
    assert request.headers.get_list("Rcpt") == ["b@example.org", "c@example.org"]
    assert request.headers["Queue-Id"] == "em_1"


@pytest.mark.parametrize(
    ("url", "handler_answer", "reason"),
    [
        ("http://rspamd.test:11333", httpx.ConnectError("refused"), "cannot connect"),
        ("http://rspamd.test:11333", httpx.ReadTimeout("slow"), "did not answer in time"),
        ("http://rspamd.test:11333", httpx.Response(502, content=b"bad gateway"), "HTTP 502"),
        ("http://rspamd.test:11333", httpx.Response(200, content=b"pong"), "not JSON"),
    ],
)
async def test_scan_never_raises(
    tmp_path: Path, url: str, handler_answer: object, reason: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(handler_answer, Exception):
            raise handler_answer
        assert isinstance(handler_answer, httpx.Response)
        return handler_answer

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        insights = await scan_message(
            config_for(url, tmp_path), b"x", sender="a@example.test", recipients=[], client=client
        )
    (insight,) = insights
    assert insight.code == "rspamd_unavailable"
    assert insight.severity == "info"
    assert reason in insight.message


@pytest.mark.parametrize("url", ["", "not a url", "ftp://rspamd.test/"])
async def test_scan_with_a_broken_url_is_unavailable(tmp_path: Path, url: str) -> None:
    insights = await scan_message(
        config_for(url, tmp_path), b"x", sender="a@example.test", recipients=["b@example.org"]
    )
    assert [i.code for i in insights] == ["rspamd_unavailable"]


def test_codes_are_listed() -> None:
    assert RSPAMD_CODES == ("rspamd_score", "rspamd_symbol", "rspamd_unavailable")


async def test_a_slow_rspamd_is_given_up_on(tmp_path: Path) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await trio.sleep(60)
        return httpx.Response(200, content=answer())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        insights = await scan_message(
            config_for("http://rspamd.test:11333", tmp_path),
            b"x",
            sender="a@example.test",
            recipients=[],
            client=client,
            timeout=0.2,
        )
    assert [i.code for i in insights] == ["rspamd_unavailable"]
    assert "no answer within 0.2 s" in insights[0].message


def test_docs_list_every_code_and_explained_symbol() -> None:
    docs = (Path(__file__).parents[3] / "docs" / "insights.md").read_text()
    section = docs[docs.index("## Content scoring with rspamd") :]
    for code in RSPAMD_CODES:
        assert f"| `{code}` |" in section, code
    for name in SYMBOL_EXPLANATIONS:
        assert f"`{name}`" in section, name


async def test_an_outage_is_logged_once_for_the_operator(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The team sees why rspamd gave no verdict but not its address; the operator's log
    names it once when the outage starts and once when it ends."""
    up = [False]

    def handler(request: httpx.Request) -> httpx.Response:
        if not up[0]:
            raise httpx.ConnectError("refused")
        return httpx.Response(200, content=answer())

    config = config_for("http://rspamd.internal:11333", tmp_path)
    caplog.set_level(logging.INFO, logger="postwire.insights")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        up[0] = True  # whatever an earlier test left behind ends here
        await scan_message(config, b"x", sender="a@example.test", recipients=[], client=client)
        caplog.clear()
        for state in (False, False, False, True, True):
            up[0] = state
            insights = await scan_message(
                config, b"x", sender="a@example.test", recipients=[], client=client
            )
            assert "rspamd.internal" not in insights[0].message
    assert [r.getMessage() for r in caplog.records] == [
        "rspamd at http://rspamd.internal:11333 gives no verdicts: cannot connect (refused)",
        "rspamd at http://rspamd.internal:11333 gives verdicts again",
    ]
