"""Mail sent to a live `postwire serve` from several clients at once, REST (some requests with
idempotency keys) and SMTP, keeping what each was answered: the emails acknowledged (a 200 with
an id, a `250 ... queued as <id>`), the keys tried and the temporary refusals. Then the checks
every crash test makes: each acknowledged email reached the receiver and ends `delivered`,
none of the team's emails is left stuck, and each idempotency key answers one email."""

from __future__ import annotations

import collections
import email.policy
import itertools
import re
import smtplib
import ssl
import threading
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx

from postwire.inbound.verp import parse_verp
from tests.e2e.conftest import DOMAIN, wait_until
from tests.smtp_receiver import ScriptedSmtpReceiver

SENDER = f"Shop <shop@{DOMAIN}>"
QUEUED = re.compile(r"queued as (\S+)")
# A client that cannot connect (the server killed, not yet back) tries again this often.
RECONNECT_PAUSE_SECONDS = 0.05


@dataclass
class IntakeLoad:
    """`rest_clients` threads posting to `/emails` (every other one with idempotency keys) and
    `smtp_clients` threads each in an SMTP session over STARTTLS, until `stop`."""

    base_url: str
    api_key: str
    smtp_address: tuple[str, int]
    smtp_cert: Path
    rest_clients: int = 3
    smtp_clients: int = 2
    acknowledged: dict[str, str] = field(default_factory=dict)  # email id -> how it was sent
    keys_tried: set[str] = field(default_factory=set)
    keys_answered: dict[str, str] = field(default_factory=dict)  # key -> the email id answered
    refusals: collections.Counter[str] = field(default_factory=collections.Counter)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _numbers: itertools.count[int] = field(default_factory=itertools.count)

    def start(self) -> None:
        for index in range(self.rest_clients):
            keyed = index % 2 == 1
            self._threads.append(threading.Thread(target=self._rest, args=(index, keyed)))
        for index in range(self.smtp_clients):
            self._threads.append(threading.Thread(target=self._smtp, args=(index,)))
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self._threads.clear()
        self._stopping.clear()

    def acknowledged_count(self) -> int:
        with self._lock:
            return len(self.acknowledged)

    def refused(self, answer: str) -> int:
        with self._lock:
            return self.refusals[answer]

    def _ack(self, email_id: str, how: str) -> None:
        with self._lock:
            self.acknowledged[email_id] = how

    def _refusal(self, answer: str) -> None:
        with self._lock:
            self.refusals[answer] += 1

    def _rest(self, client: int, keyed: bool) -> None:
        with httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=30,
        ) as http:
            while not self._stopping.is_set():
                number = next(self._numbers)
                headers = {}
                if keyed:
                    key = f"load-{client}-{number}"
                    headers["Idempotency-Key"] = key
                    with self._lock:
                        self.keys_tried.add(key)
                try:
                    answer = http.post("/emails", json=_request(number), headers=headers)
                except httpx.TransportError:  # killed, or not back yet: nothing acknowledged
                    self._stopping.wait(RECONNECT_PAUSE_SECONDS)
                    continue
                if answer.status_code == 200:
                    email_id = answer.json()["id"]
                    self._ack(email_id, "rest")
                    if keyed:
                        with self._lock:
                            self.keys_answered[headers["Idempotency-Key"]] = email_id
                else:
                    self._refusal(f"{answer.status_code} {answer.json().get('name')}")

    def _smtp(self, client: int) -> None:
        context = ssl.create_default_context(cafile=str(self.smtp_cert))
        while not self._stopping.is_set():
            try:
                with smtplib.SMTP(*self.smtp_address, timeout=30) as session:
                    session.starttls(context=context)
                    session.login("postwire", self.api_key)
                    while not self._stopping.is_set():
                        self._smtp_message(session, next(self._numbers))
            except smtplib.SMTPResponseException as refusal:
                self._refusal(f"{refusal.smtp_code} {refusal.smtp_error[:5].decode()}")
                self._stopping.wait(RECONNECT_PAUSE_SECONDS)
            except (OSError, smtplib.SMTPException):  # killed, or not back yet
                self._stopping.wait(RECONNECT_PAUSE_SECONDS)

    def _smtp_message(self, session: smtplib.SMTP, number: int) -> None:
        mail = EmailMessage()
        mail["From"] = SENDER
        mail["To"] = recipient = f"r{number}@example.org"
        mail["Subject"] = f"smtp #{number}"
        mail.set_content("Sent over SMTP under load.\n")
        session.mail(f"shop@{DOMAIN}")
        session.rcpt(recipient)
        code, reply = session.data(mail.as_bytes(policy=email.policy.SMTP))
        text = reply.decode()
        if code == 250:
            match = QUEUED.search(text)
            assert match is not None, text
            self._ack(match.group(1), "smtp")
        else:
            self._refusal(f"{code} {text[:5]}")
            session.rset()


def _request(number: int) -> dict[str, Any]:
    return {
        "from": SENDER,
        "to": f"r{number}@example.org",
        "subject": f"rest #{number}",
        "text": "Sent over REST under load.",
    }


def delivered_ids(receiver: ScriptedSmtpReceiver) -> set[str]:
    """The emails the receiver got (the envelope sender names the email)."""
    return {
        verp.email_id
        for message in receiver.received()
        if (verp := parse_verp(message.mail_from)) is not None
    }


def team_emails(base_url: str, api_key: str) -> list[dict[str, Any]]:
    """Every email of the key's team, through the API's pages."""
    emails: list[dict[str, Any]] = []
    params: dict[str, str | int] = {"limit": 100}
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=30
    ) as http:
        while True:
            page = http.get("/emails", params=params)
            assert page.status_code == 200, page.text
            body = page.json()
            emails += body["data"]
            if not body.get("has_more") or not body["data"]:
                return emails
            params["after"] = body["data"][-1]["id"]


def check_outcome(
    load: IntakeLoad, receiver: ScriptedSmtpReceiver, base_url: str, what: str
) -> dict[str, int]:
    """Everything acknowledged delivered, nothing stuck, idempotency exact; the counts."""
    acknowledged = set(load.acknowledged)
    wait_until(
        lambda: acknowledged <= delivered_ids(receiver),
        "every acknowledged email reached the receiver",
        timeout=60,
    )

    def stuck() -> list[dict[str, Any]]:
        emails = team_emails(base_url, load.api_key)
        return [e for e in emails if e["last_event"] != "delivered"]

    wait_until(lambda: not stuck(), "every email of the team is delivered", timeout=60)
    emails = team_emails(base_url, load.api_key)
    listed = {email["id"] for email in emails}
    lost = acknowledged - delivered_ids(receiver)
    stuck_count = len(stuck())
    assert acknowledged <= listed, acknowledged - listed

    # Each key sent again answers one email: the one acknowledged if it was.
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {load.api_key}"}, timeout=30
    ) as http:
        for key in sorted(load.keys_tried):
            number = int(key.rsplit("-", 1)[1])
            answers = {
                http.post("/emails", json=_request(number), headers={"Idempotency-Key": key})
                .raise_for_status()
                .json()["id"]
                for _ in range(2)
            }
            assert len(answers) == 1, (key, answers)
            if key in load.keys_answered:
                assert answers == {load.keys_answered[key]}, key
    counts = {
        "acknowledged": len(acknowledged),
        "rest": sum(how == "rest" for how in load.acknowledged.values()),
        "smtp": sum(how == "smtp" for how in load.acknowledged.values()),
        "keys": len(load.keys_tried),
        "emails listed": len(emails),
        "delivered": len(acknowledged & delivered_ids(receiver)),
        "lost": len(lost),
        "stuck": stuck_count,
    }
    print(f"{what}: " + ", ".join(f"{n} {k}" for k, n in counts.items()), dict(load.refusals))
    assert counts["lost"] == 0 and counts["stuck"] == 0
    return counts
