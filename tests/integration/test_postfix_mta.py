"""The private Postfix instance (tests/postfix_mta.py) on its own: it accepts a message for a
routed domain, fails to relay it onward (550 5.1.1), and returns a DSN over TLS to a receiver
standing in for Postwire; `parse_report` reads that DSN."""

from __future__ import annotations

import contextlib
import email
import email.policy
import os
import smtplib
import time
from collections.abc import Callable, Iterator

import pytest

from postwire.inbound.reports import DeliveryStatusReport, RecipientStatus, parse_report
from tests.postfix_mta import PostfixMta, postfix_unavailable, running_postfix
from tests.smtp_receiver import ScriptedSmtpReceiver

VERP = "bounces+0192f0e4-0000-7000-8000-000000000001@send.mail-example.test"
MESSAGE = (
    b"From: Shop <shop@mail-example.test>\r\n"
    b"To: ann@example.org, bob@example.org\r\n"
    b"Subject: Order 1\r\n"
    b"Message-ID: <order-1@mail-example.test>\r\n"
    b"\r\n"
    b"Thanks for your order.\r\n"
)


@pytest.fixture(autouse=True)
def _needs_postfix() -> None:
    if (why := postfix_unavailable()) is not None:
        pytest.fail(why, pytrace=False)  # `make test` installs Postfix


@pytest.fixture
def remote_site(smtp_receiver: Callable[..., ScriptedSmtpReceiver]) -> ScriptedSmtpReceiver:
    """The recipients' site behind Postfix: it has bob but not ann."""
    return smtp_receiver(refuse_recipients={"ann@example.org": "550 5.1.1 no such user"})


@pytest.fixture
def postfix_for(
    remote_site: ScriptedSmtpReceiver,
) -> Iterator[Callable[[ScriptedSmtpReceiver], PostfixMta]]:
    """Starts Postfix routing example.org to `remote_site` and the bounce domain, with TLS
    required, to the given receiver."""
    with contextlib.ExitStack() as stack:

        def start(bounce_receiver: ScriptedSmtpReceiver) -> PostfixMta:
            routes = {"example.org": f"{remote_site.host}:{remote_site.port}"}
            tls_routes = {"send.mail-example.test": f"127.0.0.1:{bounce_receiver.port}"}
            return stack.enter_context(running_postfix(routes, tls_routes))

        yield start


def send_through(mta: PostfixMta) -> None:
    with smtplib.SMTP(mta.host, mta.port, timeout=10) as client:
        refused = client.sendmail(VERP, ["ann@example.org", "bob@example.org"], MESSAGE)
    assert refused == {}, "Postfix accepts both: it learns of ann's failure only when relaying"


def wait_until(condition: Callable[[], object], mta: PostfixMta, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "Postfix's log:\n" + mta.maillog()
        time.sleep(0.1)


def test_dsn_of_a_relayed_550_reaches_the_bounce_domain_over_tls(
    postfix_for: Callable[[ScriptedSmtpReceiver], PostfixMta],
    remote_site: ScriptedSmtpReceiver,
    smtp_receiver: Callable[..., ScriptedSmtpReceiver],
) -> None:
    postwire = smtp_receiver(starttls=True)
    mta = postfix_for(postwire)
    send_through(mta)
    wait_until(postwire.received, mta)

    (dsn,) = postwire.received()
    assert dsn.mail_from == "<>", "a DSN has the null return path"
    assert dsn.rcpt_tos == [VERP]
    assert f"TLS connection established to 127.0.0.1[127.0.0.1]:{postwire.port}" in mta.maillog()
    message = email.message_from_bytes(dsn.content, policy=email.policy.compat32)
    assert message.get_content_type() == "multipart/report"
    assert message.get_param("report-type") == "delivery-status"
    # bob was delivered onward; only ann is in the report.
    ((delivered_to_bob),) = remote_site.received()
    assert delivered_to_bob.rcpt_tos == ["bob@example.org"]

    report = parse_report(dsn.content)
    assert report == DeliveryStatusReport(
        reporting_mta="mta.postfix.test",
        recipients=(
            RecipientStatus(
                action="failed",
                final_recipient="ann@example.org",
                original_recipient="ann@example.org",
                status=(5, 1, 1),
                diagnostic_code="smtp; 550 5.1.1 no such user",
                remote_mta="127.0.0.1",
            ),
        ),
        original_return_path=VERP,
        original_message_id="<order-1@mail-example.test>",
    )


def test_tls_route_never_sends_the_dsn_in_clear(
    postfix_for: Callable[[ScriptedSmtpReceiver], PostfixMta],
    smtp_receiver: Callable[..., ScriptedSmtpReceiver],
) -> None:
    plain = smtp_receiver(starttls=False)
    mta = postfix_for(plain)
    send_through(mta)
    wait_until(lambda: "TLS is required, but was not offered" in mta.maillog(), mta)
    assert plain.received() == []


def test_stop_leaves_no_process_of_the_instance(remote_site: ScriptedSmtpReceiver) -> None:
    with running_postfix({"example.org": f"{remote_site.host}:{remote_site.port}"}) as mta:
        send_through(mta)  # so that smtpd, cleanup, qmgr, smtp and bounce all ran
        assert mta.process is not None
        group = mta.process.pid
        directory = mta.directory

    def group_gone() -> bool:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        return False

    deadline = time.monotonic() + 30
    while not group_gone():
        assert time.monotonic() < deadline, f"processes of group {group} still running"
        time.sleep(0.1)
    assert not directory.exists()
