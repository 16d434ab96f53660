"""The signing baseline's milter: OpenDKIM in the foreground, signing every message that Postfix
hands it with an RSA-2048 key made for the benchmark by `opendkim-genkey`.

It is set up as a self-hosted Debian server usually runs it: `/etc/opendkim.conf` as the
package ships it (relaxed/simple canonicalization, the From header oversigned, a Unix socket
for Postfix), for one domain and selector with one `KeyFile`. Two departures, both in its
favour: it does not log (Debian's has `Syslog yes`, `SyslogSuccess yes`), and it only signs
(`Mode s`; Debian's leaves sign and verify). Postwire signs relaxed/relaxed; relaxed/simple is
what OpenDKIM's own sample configuration and Debian's use, and what a deployment following
them signs with.

Started as root, it reads its key and then runs as Debian's `opendkim` user (`UserID`), so
its directory is a world-readable one of its own, the key belongs to that user, and the socket
is made in a directory of that user; the socket then goes to Postfix's group, as Debian has it
done by putting `postfix` in the `opendkim` group. It is a child of the benchmark, so its CPU
is measured apart and added to Postfix's. Debian packages: `opendkim opendkim-tools`.

Most of what a signed message costs it does not depend on the configuration: for every
message, OpenDKIM 2.11 parses the PEM key again (OpenSSL 3's decoders), sets up RSA blinding for
that new key, and creates and deletes a libunbound context.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.postfix_mta import POSTFIX_SEARCH_PATH
from tests.processes import stop_process

from benchmarks.cpu_time import process_cpu

USER = "opendkim"
# Postfix's daemons run as this group: it may connect to the socket.
POSTFIX_GROUP = "postfix"
# Debian's /etc/opendkim.conf and OpenDKIM's opendkim.conf.simple; Postwire signs relaxed/relaxed.
CANONICALIZATION = "relaxed/simple"
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
_TXT_STRINGS = re.compile(r'"([^"]*)"')


class OpenDkimError(RuntimeError):
    """OpenDKIM is missing, or did not start."""


def opendkim_path() -> str | None:
    return shutil.which("opendkim", path=POSTFIX_SEARCH_PATH)


def genkey_path() -> str | None:
    return shutil.which("opendkim-genkey", path=POSTFIX_SEARCH_PATH)


def opendkim_unavailable() -> str | None:
    """Why the OpenDKIM milter cannot run here, or None when it can."""
    if opendkim_path() is None or genkey_path() is None:
        return "OpenDKIM is not installed: apt-get install -y opendkim opendkim-tools"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no {USER!r} user (Debian's opendkim package creates it)"
    if os.geteuid() != 0:
        return "OpenDKIM must be started as root (it then runs as its own user)"
    return None


def opendkim_version() -> str:
    """ "OpenDKIM 2.11.0"."""
    path = opendkim_path()
    if path is None:
        return "OpenDKIM"
    output = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10).stdout
    match = re.search(r"OpenDKIM Filter v(\S+)", output)
    return f"OpenDKIM {match[1]}" if match else "OpenDKIM"


class OpenDkim:
    """`opendkim -f -x CONF` signing for `domain` with a new 2048-bit key at `selector`."""

    def __init__(self, domain: str, selector: str) -> None:
        self.domain, self.selector = domain, selector
        self.directory = Path(tempfile.mkdtemp(prefix="opendkim-"))
        self.directory.chmod(0o755)
        self.config_path = self.directory / "opendkim.conf"
        self.log_path = self.directory / "opendkim.log"
        # Made by OpenDKIM (as its user) in a directory of its own, as /run/opendkim on Debian.
        self.socket_path = self.directory / "run" / "opendkim.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def milter(self) -> str:
        """Where Postfix finds it: `smtpd_milters` and `non_smtpd_milters`."""
        return f"unix:{self.socket_path}"

    @property
    def key_path(self) -> Path:
        return self.directory / f"{self.selector}.private"

    def public_record(self) -> bytes:
        """The DNS TXT record of the public key, as `opendkim-genkey` wrote it to
        `SELECTOR.txt` (its strings joined): "v=DKIM1; h=sha256; k=rsa; p=..."."""
        text = (self.directory / f"{self.selector}.txt").read_text()
        return "".join(_TXT_STRINGS.findall(text)).encode()

    def start(self) -> None:
        opendkim, genkey = opendkim_path(), genkey_path()
        if opendkim is None or genkey is None:
            raise OpenDkimError("OpenDKIM is not installed (apt-get install opendkim-tools)")
        subprocess.run(
            [genkey, "-b", "2048", "-d", self.domain, "-s", self.selector, "-D", self.directory],
            check=True,
            capture_output=True,
            timeout=60,
        )
        shutil.chown(self.key_path, user=USER, group=USER)
        self.key_path.chmod(0o600)
        self.socket_path.parent.mkdir(mode=0o755)
        shutil.chown(self.socket_path.parent, user=USER, group=USER)
        self.config_path.write_text(
            f"""\
Mode                    s
Domain                  {self.domain}
Selector                {self.selector}
KeyFile                 {self.key_path}
Canonicalization        {CANONICALIZATION}
OversignHeaders         From
Socket                  local:{self.socket_path}
UserID                  {USER}
PidFile                 {self.directory / "opendkim.pid"}
Syslog                  no
UMask                   007
# The key is a throw-away one under /tmp, which other users may write to.
RequireSafeKeys         no
"""
        )
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [opendkim, "-f", "-x", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_listening()

    def _wait_until_listening(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        error = "timed out"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                status = self.process.returncode
                self.process = None
                raise OpenDkimError(f"opendkim exited with status {status}:\n{self.log()}")
            try:
                with socket.socket(socket.AF_UNIX) as probe:
                    probe.settimeout(1)
                    probe.connect(str(self.socket_path))
                # UMask 007: the socket is its user's and group's; Postfix's group joins them.
                shutil.chown(self.socket_path, group=POSTFIX_GROUP)
                return
            except OSError as exc:
                error = str(exc) or type(exc).__name__
            time.sleep(0.05)
        self.stop()
        raise OpenDkimError(
            f"opendkim does not listen on {self.socket_path} ({error}):\n{self.log()}"
        )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def cpu_seconds(self) -> float:
        """CPU used so far by every thread of opendkim."""
        return process_cpu(self.pid)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, STOP_TIMEOUT)
            self.process = None
        shutil.rmtree(self.directory, ignore_errors=True)
