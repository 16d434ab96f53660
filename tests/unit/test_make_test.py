"""`make test` installs every real peer the tests look for, and no test skips for want of one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def sources() -> dict[Path, str]:
    return {
        path: path.read_text()
        for path in TESTS.rglob("*.py")
        if path.resolve() != Path(__file__).resolve()
    }


def makefile_rules() -> tuple[dict[str, str], dict[str, list[str]]]:
    """The Makefile's simple variables and each rule's prerequisites and recipe, joined."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    variables = dict(re.findall(r"^([A-Z_]+)\s*:?=\s*(.*)$", text, re.MULTILINE))
    rules: dict[str, list[str]] = {}
    for target, rest, recipe in re.findall(
        r"^([a-z][\w-]*):(?!=)([^\n]*)\n((?:\t[^\n]*\n)*)", text, re.MULTILINE
    ):
        prerequisites = rest.split("##")[0]
        expanded = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), ""), prerequisites)
        rules[target] = [*expanded.split(), recipe]
    return variables, rules


def packages_the_tests_need() -> set[str]:
    needed = set()
    for text in sources().values():
        # The package is require_peer's last argument, a string literal.
        calls = re.findall(r'require_peer\((?:[^"()]|"[^"]*"|\([^()]*\))*\)', text)
        needed |= {re.findall(r'"([^"]*)"', call)[-1] for call in calls if '"' in call}
        needed |= set(re.findall(r"apt-get install -y ([\w.+-]+)", text))
    return needed


def test_make_test_installs_every_peer_the_tests_need() -> None:
    variables, rules = makefile_rules()
    needed = packages_the_tests_need()
    assert {"knot", "postfix", "swaks"} <= needed, "the scan of the tests found their peers"
    installed = {
        package
        for prerequisite in rules["test"][:-1]
        if prerequisite.startswith("need-")
        for package in re.findall(r"\$\(APT_INSTALL\)\s+([^;}]+)", rules[prerequisite][-1])[
            0
        ].split()
    }
    assert "APT_INSTALL" in variables
    assert needed <= installed, f"make test does not install {sorted(needed - installed)}"


def test_no_test_skips_for_want_of_a_peer() -> None:
    skipping = [
        f"{path.relative_to(ROOT)}:{number}"
        for path, text in sources().items()
        for number, line in enumerate(text.splitlines(), 1)
        if re.search(r"pytest\.skip\(|\.skipif\(|importorskip\(", line)
    ]
    assert skipping == [], "a missing peer must fail the test (tests/peers.py), not skip it"
