"""SMTP submission's fast path for MAIL and RCPT addresses answers exactly as aiosmtpd's own
parser does, for plain paths and for every shape it hands over to that parser."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from aiosmtpd.smtp import SMTP

from postwire.smtp.submission import _PLAIN_PATH, _SubmissionSMTP

ALPHABET = 'ab.@<> \t+-"[]:,()=Z9'
CASES = [
    "<a@b.c>",
    "<a@b.c> SIZE=100",
    " <a@b.c>  SIZE=100 BODY=8BITMIME",
    "<a.b+c@x-y.example.org>",
    "<A@B.C>",
    "<a@b.c>\tSIZE=1",
    "<>",
    "",
    "<a..b@c.d>",
    "<a@b..c>",
    "<.a@b.c>",
    "<a@b.c>x",
    "<a@[1.2.3.4]>",
    '<"a b"@c.d>',
    "<@r.s:a@b.c>",
    "<a@b.c",
    "a@b.c",
    "<a@-b.c>",
    "<a@b.c.>",
    "<ü@b.c>",
    "<a@b.c> ",
    "<a@b.c>  ",
    "<a(comment)@b.c>",
    "<a@b.c> SIZE=1 ",
]


def fast_parser(local_part_limit: int = 0) -> SMTP:
    """A session object for its `_getaddr` alone (nothing else of it is set up)."""
    fast = _SubmissionSMTP.__new__(_SubmissionSMTP)
    fast.local_part_limit = local_part_limit
    return fast


@pytest.mark.parametrize("arg", CASES)
@pytest.mark.parametrize("local_part_limit", [0, 3])
def test_fast_path_answers_as_aiosmtpd(arg: str, local_part_limit: int) -> None:
    fast = fast_parser(local_part_limit)
    assert fast._getaddr(arg) == SMTP._getaddr(fast, arg)


def test_plain_paths_take_the_fast_path() -> None:
    for arg in ("<a@b.c>", "<news+1@mail.example.org> SIZE=4096", " <x@y.z>"):
        assert _PLAIN_PATH.fullmatch(arg) is not None


def answer(parse: Callable[[str], object], arg: str) -> object:
    try:
        return parse(arg)
    except Exception as exc:  # the `email` parser fails on some inputs: both must fail alike
        return type(exc)


def test_random_paths_answer_as_aiosmtpd() -> None:
    generator = random.Random(5321)
    fast = fast_parser()
    for _ in range(5000):
        # Mostly plain paths with a character or two added, and some noise.
        local = generator.choice(["a", "ab.c", "x+y"])
        arg = f"<{local}@{generator.choice(['b.c', 'd-e.fg'])}>"
        arg += generator.choice(["", " SIZE=1", "  BODY=8BITMIME ", "\t"])
        for _ in range(generator.randint(0, 2)):
            position = generator.randint(0, len(arg))
            arg = arg[:position] + generator.choice(ALPHABET) + arg[position:]
        assert answer(fast._getaddr, arg) == answer(lambda a: SMTP._getaddr(fast, a), arg), arg
