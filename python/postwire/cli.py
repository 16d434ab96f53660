"""The `postwire` command.

Every subcommand takes `--config FILE` (from one parent parser) and, without it, looks for the
same file (`find_config_file`), so that they all open the same store as `serve`. Configuration
errors print `postwire: <message>` and exit with status 2; so does a command other than `serve`
that would start a new, empty spool in the current directory (`_check_data_dir`).
"""

import argparse
import logging
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import postwire
from postwire.config import (
    EMBEDDED_DATA_DIR,
    Config,
    enable_sandbox,
    find_config_file,
    load_config,
)
from postwire.errors import ConfigError, PostwireError
from postwire.operator import commands as operator_commands

EXIT_USAGE = 2  # argparse's status for bad usage; a bad config is the same kind of mistake


def _config_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        default=None,
        help="TOML configuration file (default: $POSTWIRE_CONFIG, else the first that exists of "
        "~/.config/postwire/postwire.toml and /etc/postwire/postwire.toml, else the embedded "
        "default: data in ./postwire-data, which other commands then only find when run in the "
        "same directory as serve)",
    )
    return parent


class _PrintVersion(argparse.Action):
    """`--version`, which looks the version up only when asked (see `postwire.__getattr__`)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"postwire {postwire.__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `postwire` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="postwire",
        description="Self-hosted email delivery: REST API, SMTP submission, DKIM, durable spool.",
        epilog="Every command reads the same configuration, so that it finds serve's data: "
        "--config FILE, else the file $POSTWIRE_CONFIG names, else the first that exists of "
        "~/.config/postwire/postwire.toml ($XDG_CONFIG_HOME) and /etc/postwire/postwire.toml, "
        "else the embedded default, whose data is ./postwire-data in the current directory.",
    )
    parser.add_argument("--version", action=_PrintVersion, nargs=0, help="print the version")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    config_parent = _config_parent()
    serve = commands.add_parser(
        "serve",
        parents=[config_parent],
        help="run every service until SIGINT or SIGTERM",
        description="Run the API, SMTP submission, delivery and webhooks: in one process, or "
        "with the config's `processes` > 1 also in worker processes that serve SMTP and "
        "deliver. SIGINT or SIGTERM shuts down gracefully; a second signal skips the grace "
        "period.",
    )
    serve.add_argument(
        "--sandbox",
        action="store_true",
        help="hold every message in a local inbox instead of delivering it, with a verified "
        "sandbox.postwire.test domain for every team (loopback listeners only)",
    )
    serve.set_defaults(handler=_serve)

    keys = commands.add_parser("keys", help="manage API keys").add_subparsers(
        dest="keys_command", metavar="ACTION", required=True
    )
    create = keys.add_parser(
        "create",
        parents=[config_parent],
        help="create an API key and print its token (shown only this once)",
        description="Create an API key. The first key also creates the team it belongs to.",
    )
    create.add_argument("--name", required=True, help="a label for the key (at most 50 chars)")
    create.add_argument(
        "--permission", choices=["full_access", "sending_access"], default="full_access"
    )
    create.add_argument(
        "--domain", metavar="DOMAIN_ID", help="with sending_access: only this domain may send"
    )
    team = create.add_mutually_exclusive_group()
    team.add_argument("--team", metavar="TEAM_ID", help="the team (default: the only team)")
    team.add_argument("--new-team", metavar="NAME", help="create a new team for this key")
    create.set_defaults(handler=_create_key)
    operator_commands.add_key_actions(keys, config_parent)

    domains = commands.add_parser("domains", help="manage sending domains").add_subparsers(
        dest="domains_command", metavar="ACTION", required=True
    )
    add = domains.add_parser(
        "add",
        parents=[config_parent],
        help="add a sending domain and print the DNS records to publish",
    )
    add.add_argument("name", help="the domain, e.g. example.com")
    add.add_argument("--region", help="us-east-1 (default), eu-west-1, sa-east-1, ap-northeast-1")
    add.add_argument("--team", metavar="TEAM_ID", help="the team (default: the only team)")
    add.set_defaults(handler=_add_domain)
    verify = domains.add_parser(
        "verify",
        parents=[config_parent],
        help="check a domain's DNS records now; exit 0 once verified",
    )
    verify.add_argument("name")
    verify.add_argument("--team", metavar="TEAM_ID", help="the team (default: the only team)")
    verify.set_defaults(handler=_verify_domain)
    operator_commands.add_domain_actions(domains, config_parent)

    users_commands = commands.add_parser("users", help="manage dashboard users").add_subparsers(
        dest="users_command", metavar="ACTION", required=True
    )
    create_user = users_commands.add_parser(
        "create",
        parents=[config_parent],
        help="create a dashboard user, owner of a team",
        description="Create a dashboard user who owns the team (an existing user is made its "
        "owner). Without --password-stdin, prints a one-time link to set the password.",
    )
    create_user.add_argument("--email", required=True, help="the address the user signs in with")
    create_user.add_argument(
        "--name", default="", help="the user's name (default: from the address)"
    )
    create_user.add_argument(
        "--team",
        metavar="NAME",
        help="the team, made if no team has this name (default: the only team, or a new one)",
    )
    create_user.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from standard input (its first line)",
    )
    create_user.set_defaults(handler=_create_user)
    unlock_user = users_commands.add_parser(
        "unlock",
        parents=[config_parent],
        help="lift the sign-in throttles of a dashboard account",
        description="Clear the counts of failed password sign-ins of the account, from every "
        "client address, and of its wrong second-factor codes.",
    )
    unlock_user.add_argument("email", metavar="EMAIL", help="the address the user signs in with")
    unlock_user.set_defaults(handler=_unlock_user)
    operator_commands.add_user_actions(users_commands, config_parent)
    operator_commands.add_status_and_config(commands, config_parent)
    operator_commands.add_queue(commands, config_parent)
    operator_commands.add_store(commands, config_parent)

    sandbox = commands.add_parser(
        "sandbox", help="read the inbox of `postwire serve --sandbox`"
    ).add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    listing = sandbox.add_parser(
        "list", parents=[config_parent], help="list the messages held, newest first (every team)"
    )
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.set_defaults(handler=_list_sandbox)
    show = sandbox.add_parser(
        "show", parents=[config_parent], help="show a held message: who, what, and its text"
    )
    show.add_argument("id", help="the email's id, as `postwire sandbox list` shows it")
    show.add_argument("--raw", action="store_true", help="the exact source bytes, DKIM header too")
    show.set_defaults(handler=_show_sandbox)

    backup = commands.add_parser(
        "backup",
        parents=[config_parent],
        help="copy the data directory to DIR, consistently, while the service runs",
        description="Write a consistent copy of the spool (compacted, as of one commit), the "
        "other files of the data directory and the config file to DIR, a new or empty "
        "directory. Postwire may run meanwhile. See docs/operations.md.",
    )
    backup.add_argument("directory", metavar="DIR", type=Path)
    backup.set_defaults(handler=_back_up)
    restore = commands.add_parser(
        "restore",
        parents=[config_parent],
        help="put a backup from DIR into the (stopped) data directory",
        description="Check the backup in DIR against its manifest and put it into the config's "
        "data directory, which no process may have open. Refuses a data directory that holds "
        "Postwire data already, unless --force.",
    )
    restore.add_argument("directory", metavar="DIR", type=Path)
    restore.add_argument(
        "--force", action="store_true", help="replace the data directory's data with the backup's"
    )
    restore.set_defaults(handler=_restore)
    return parser


def _back_up(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.backup import back_up

    try:
        done = trio.run(back_up, config, args.directory)
    except (PostwireError, OSError) as exc:
        print(f"postwire: backup failed: {exc}", file=sys.stderr)
        return 1
    print(
        f"backup of {config.data_dir} written to {done.directory}: {done.files} files, "
        f"{done.bytes} bytes, {done.emails} emails, {done.queued} messages queued"
    )
    return 0


def _restore(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.backup import restore

    try:
        done = trio.run(partial(restore, force=args.force), config, args.directory)
    except (PostwireError, OSError) as exc:
        print(f"postwire: restore failed: {exc}", file=sys.stderr)
        return 1
    print(
        f"restored the backup of {done.created_at} (Postwire {done.backup_version}) into "
        f"{done.data_dir}: {done.emails} emails, {done.queued} messages queued"
    )
    if done.config_file is not None:
        print(f"the backed-up config file ({done.config_file}) is in {args.directory}/config")
    return 0


def _create_key(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.admin import create_key

    try:
        key_id, token = trio.run(
            create_key, config, args.name, args.permission, args.domain, args.team, args.new_team
        )
    except PostwireError as exc:
        print(f"postwire: {exc}", file=sys.stderr)
        return 1
    print(f"API key {key_id} created; its token, shown only now:", file=sys.stderr)
    print(token)
    return 0


def _create_user(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.accounts.bootstrap import create_owner

    password = None
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    try:
        created = trio.run(create_owner, config, args.email, args.team, password, args.name)
    except PostwireError as exc:
        print(f"postwire: {exc}", file=sys.stderr)
        return 1
    what = "is now an owner of" if created.existed else "created, owner of"
    print(f"user {created.email} {what} team {created.team.name!r}", file=sys.stderr)
    if created.set_password_url is not None:
        print("open this link to set the password (it works once, for 3 days):", file=sys.stderr)
        print(created.set_password_url)
    return 0


def _unlock_user(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.admin import unlock_user

    cleared = trio.run(unlock_user, config, args.email)
    print(f"sign-in throttles of {args.email} lifted ({cleared} counts cleared)", file=sys.stderr)
    return 0


def _add_domain(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.admin import add_domain

    try:
        print(trio.run(add_domain, config, args.name, args.region, args.team))
    except PostwireError as exc:
        print(f"postwire: {exc}", file=sys.stderr)
        return 1
    return 0


def _verify_domain(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.admin import verify_domain_now

    try:
        report, verified = trio.run(verify_domain_now, config, args.name, args.team)
    except PostwireError as exc:
        print(f"postwire: {exc}", file=sys.stderr)
        return 1
    print(report)
    return 0 if verified else 1


def _list_sandbox(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.sandbox import inbox_listing

    try:
        print(trio.run(inbox_listing, config, max(1, args.limit)))
    except PostwireError as exc:
        print(f"postwire: {exc}", file=sys.stderr)
        return 1
    return 0


def _show_sandbox(config: Config, args: argparse.Namespace) -> int:
    import trio

    from postwire.sandbox import describe_held, held_message

    try:
        held, source = trio.run(held_message, config, args.id)
    except PostwireError as exc:
        print(f"postwire: {exc}", file=sys.stderr)
        return 1
    if args.raw:
        sys.stdout.buffer.write(source)
        sys.stdout.buffer.flush()
    else:
        print(describe_held(held, source))
    return 0


def _serve(config: Config, args: argparse.Namespace) -> int:
    import trio  # imported here so `postwire --version` stays fast

    from postwire import app

    status = 0
    try:
        if args.sandbox:
            config = enable_sandbox(config)
        trio.run(app.run, config)
    except* ConfigError as group:
        _report(group)
        status = EXIT_USAGE
    except* PostwireError as group:
        _report(group)
        status = 1
    return status


def _report(group: BaseExceptionGroup[PostwireError]) -> None:
    # Our own errors carry messages meant for the operator; anything else keeps its traceback.
    for exc in _leaves(group):
        print(f"postwire: {exc}", file=sys.stderr)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def configure_logging(process: str | None = None, *, json_lines: bool = False) -> None:
    """INFO and above to stderr, one line per record (a JSON object with `json_lines`, see
    `log_format`); `process` names a worker process. Calling it again replaces the format."""
    where = "" if process is None else f" [{process}]"
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        from postwire.log_lines import JsonLineFormatter

        handler.setFormatter(JsonLineFormatter(process))
    else:
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s %(levelname)s %(name)s{where}: %(message)s")
        )
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `postwire` command; exits the process with the command's status."""
    args = build_parser().parse_args(argv)
    configure_logging()
    try:
        config = load_config(find_config_file(args.config))
        if config.log_format == "json":
            configure_logging(json_lines=True)
        if args.command not in ("serve", "restore") and getattr(args, "needs_store", True):
            _check_data_dir(config)  # restore fills a new data directory; config check has none
    except ConfigError as exc:
        print(f"postwire: {exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    sys.exit(args.handler(config, args))


def _check_data_dir(config: Config) -> None:
    """Refuse to let a command other than `serve` start a spool that `serve` would not use.

    Without a config file the data directory is ./postwire-data in the current directory, so
    a command run elsewhere would silently start a second, empty spool (and its keys would be
    refused by the running server): refused unless a spool is there already. A data directory
    named by a config file or POSTWIRE_DATA_DIR is the one `serve` uses with the same settings:
    a new spool may start there, and the log says so.
    """
    if (config.data_dir / "spool").exists():
        return
    if config.config_file is None and config.data_dir == Path.cwd() / EMBEDDED_DATA_DIR:
        raise ConfigError(
            f"no Postwire data in {config.data_dir}: with no config file, Postwire keeps its "
            "data in ./postwire-data under the current directory, so run this command in the "
            "directory `postwire serve` runs in, or give both the same config file "
            "(--config FILE, or POSTWIRE_CONFIG=FILE)"
        )
    logging.getLogger("postwire").warning(
        "no Postwire data in %s yet: starting a new spool there", config.data_dir
    )
