"""The operator's subcommands of `postwire`: their arguments and what each prints.

`cli.py` owns the parser; it hands this module the subparsers to add to. Every command opens
the running service's store as one more process (see `output.opened_spool`), prints a table,
or JSON with `--json`, and exits 1 with `postwire: <why>` when it cannot do what was asked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

from postwire.config import Config, enable_sandbox
from postwire.errors import PostwireError
from postwire.operator.output import emit, page_note, parse_age, table

Handler = Callable[[Config, argparse.Namespace], int]
T = TypeVar("T")

DEFAULT_LIMIT = 50
MAX_LIMIT = 10_000


def _run(function: Callable[..., Awaitable[T]], *args: Any) -> T:
    import trio  # here, so that `postwire --version` stays fast

    return trio.run(function, *args)


def _failed(exc: PostwireError) -> int:
    print(f"postwire: {exc}", file=sys.stderr)
    return 1


def _limit(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"--limit must be 1 to {MAX_LIMIT}")
    return value


def _add_output(parser: argparse.ArgumentParser, *, paged: bool = False) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON, for scripts")
    if paged:
        parser.add_argument(
            "--limit", type=_limit, default=DEFAULT_LIMIT,
            help=f"at most this many (default {DEFAULT_LIMIT})",
        )  # fmt: skip
        parser.add_argument("--after", metavar="ID", help="the page after this id (the last shown)")


# argparse names the type of `add_subparsers()` no other way.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_status_and_config(commands: Subparsers, config_parent: argparse.ArgumentParser) -> None:
    status = commands.add_parser(
        "status",
        parents=[config_parent],
        help="the running service: processes, listeners, queue, spool, version",
    )
    _add_output(status)
    status.set_defaults(handler=_status)
    config_commands = commands.add_parser(
        "config", help="inspect the configuration"
    ).add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = config_commands.add_parser(
        "check",
        parents=[config_parent],
        help="check the configuration and print every key's value and origin",
        description="Load the configuration as `postwire serve` would (exit 2 on an error) and "
        "print every key with its value and where it came from: default, file, environment "
        "variable or flag.",
    )
    check.add_argument("--sandbox", action="store_true", help="as `postwire serve --sandbox`")
    _add_output(check)
    check.set_defaults(handler=_config_check, needs_store=False)


def _status(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.status import describe_status, gather_status

    status = _run(gather_status, config)
    emit(status, describe_status(status), as_json=args.json)
    return 0


def _config_check(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.config_check import describe_config, effective_config

    flags = {}
    if args.sandbox:
        config = enable_sandbox(config)
        flags["sandbox"] = "--sandbox"
    rows = effective_config(config, flags)
    emit(rows, describe_config(rows, config.config_file), as_json=args.json)
    return 0


def add_queue(commands: Subparsers, config_parent: argparse.ArgumentParser) -> None:
    queue = commands.add_parser("queue", help="the delivery queue").add_subparsers(
        dest="queue_command", metavar="ACTION", required=True
    )
    listing = queue.add_parser(
        "list", parents=[config_parent], help="queued messages, oldest first"
    )
    _add_selection(listing, ids=False)
    _add_output(listing, paged=True)
    listing.set_defaults(handler=_queue_list)
    show = queue.add_parser(
        "show", parents=[config_parent], help="a queued message and its delivery attempts"
    )
    show.add_argument("id", help="the email's id")
    _add_output(show)
    show.set_defaults(handler=_queue_show)
    for action, help_text in (
        ("retry", "deliver deferred messages now instead of at the end of their back-off"),
        ("delete", "take messages out of the queue; their emails become `canceled`"),
    ):
        changing = queue.add_parser(action, parents=[config_parent], help=help_text)
        _add_selection(changing, ids=True)
        _add_output(changing)
        changing.set_defaults(handler=_queue_change, action=action)


def _add_selection(parser: argparse.ArgumentParser, *, ids: bool) -> None:
    if ids:
        parser.add_argument("ids", nargs="*", metavar="ID", help="email ids")
    parser.add_argument(
        "--domain", help="only messages waiting to retry for a recipient at this domain"
    )
    parser.add_argument(
        "--older-than", metavar="AGE", help="only messages queued longer than AGE (30m, 2h, 3d)"
    )


def _emit_page(
    rows: list[dict[str, Any]], human: str, args: argparse.Namespace, command: str
) -> int:
    """Print a page of a listing (`human`, its table), with the command for the next page
    when this one was full."""
    last = rows[-1]["id"] if rows else None
    emit(rows, human + page_note(len(rows), args.limit, last, command), as_json=args.json)
    return 0


def _selection(args: argparse.Namespace) -> Any:
    from postwire.operator.queue import Selection

    older = None if args.older_than is None else parse_age(args.older_than)
    return Selection(tuple(getattr(args, "ids", ())), args.domain, older)


def _queue_list(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.queue import LIST_COLUMNS, human_rows, list_queue

    try:
        rows = _run(list_queue, config, _selection(args), args.limit, args.after)
    except PostwireError as exc:
        return _failed(exc)
    return _emit_page(rows, table(human_rows(rows), LIST_COLUMNS), args, "postwire queue list")


def _queue_show(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.queue import describe_message, show_message

    try:
        shown = _run(show_message, config, args.id)
    except PostwireError as exc:
        return _failed(exc)
    emit(shown, describe_message(shown), as_json=args.json)
    return 0


def _queue_change(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.queue import change_queue

    try:
        changed, refused = _run(change_queue, config, _selection(args), args.action)
    except PostwireError as exc:
        return _failed(exc)
    done = "due now" if args.action == "retry" else "deleted"
    human = "\n".join([f"{message_id}: {done}" for message_id in changed] + refused)
    emit({args.action: changed, "refused": refused}, human or "no message matched",
         as_json=args.json)  # fmt: skip
    return 1 if refused and not changed else 0


def add_key_actions(keys: Subparsers, config_parent: argparse.ArgumentParser) -> None:
    listing = keys.add_parser("list", parents=[config_parent], help="every team's API keys")
    _add_output(listing, paged=True)
    listing.set_defaults(handler=_keys_list)
    revoke = keys.add_parser(
        "revoke", parents=[config_parent], help="delete an API key: its token stops working"
    )
    revoke.add_argument("id", help="the key's id, as `postwire keys list` shows it")
    _add_output(revoke)
    revoke.set_defaults(handler=_keys_revoke)


def _keys_list(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.accounts import list_keys

    try:
        rows = _run(list_keys, config, args.limit, args.after)
    except PostwireError as exc:
        return _failed(exc)
    columns = [("id", "ID"), ("name", "NAME"), ("team", "TEAM"), ("permission", "PERMISSION"),
               ("created_at", "CREATED"), ("last_used_at", "LAST USED")]  # fmt: skip
    return _emit_page(rows, table(rows, columns), args, "postwire keys list")


def _keys_revoke(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.accounts import revoke_key

    try:
        key = _run(revoke_key, config, args.id)
    except PostwireError as exc:
        return _failed(exc)
    emit({"object": "api_key", "id": key.id, "deleted": True},
         f"API key {key.id} ({key.name!r}) revoked", as_json=args.json)  # fmt: skip
    return 0


def add_user_actions(users: Subparsers, config_parent: argparse.ArgumentParser) -> None:
    listing = users.add_parser("list", parents=[config_parent], help="the dashboard's users")
    _add_output(listing, paged=True)
    listing.set_defaults(handler=_users_list)
    reset = users.add_parser(
        "reset-mfa",
        parents=[config_parent],
        help="remove an account's second factors and sign it out everywhere",
        description="Remove every authenticator app, passkey and recovery code of the account "
        "and end its sessions: its owner signs in with the password alone, then sets MFA up "
        "again (at once where a team requires it).",
    )
    reset.add_argument("email", metavar="EMAIL", help="the address the user signs in with")
    _add_output(reset)
    reset.set_defaults(handler=_users_reset_mfa)


def _users_list(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.accounts import list_users

    rows = _run(list_users, config, args.limit, args.after)
    columns = [("id", "ID"), ("email", "EMAIL"), ("name", "NAME"), ("teams", "TEAMS"),
               ("mfa", "MFA"), ("created_at", "CREATED")]  # fmt: skip
    return _emit_page(rows, table(rows, columns), args, "postwire users list")


def _users_reset_mfa(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.accounts import reset_mfa

    try:
        factors, sessions = _run(reset_mfa, config, args.email)
    except PostwireError as exc:
        return _failed(exc)
    emit({"email": args.email, "factors_removed": factors, "sessions_ended": sessions},
         f"MFA of {args.email} reset: {factors} second factors removed, {sessions} sessions "
         "ended", as_json=args.json)  # fmt: skip
    return 0


def add_domain_actions(domains: Subparsers, config_parent: argparse.ArgumentParser) -> None:
    listing = domains.add_parser("list", parents=[config_parent], help="every team's domains")
    _add_output(listing, paged=True)
    listing.set_defaults(handler=_domains_list)
    delete = domains.add_parser(
        "delete", parents=[config_parent], help="delete a sending domain and its DKIM key"
    )
    delete.add_argument("name", metavar="NAME_OR_ID", help="the domain's name or id")
    delete.add_argument("--team", metavar="TEAM_ID", help="the team, when several have the name")
    _add_output(delete)
    delete.set_defaults(handler=_domains_delete)


def _domains_list(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.domains import list_domains

    try:
        rows = _run(list_domains, config, args.limit, args.after)
    except PostwireError as exc:
        return _failed(exc)
    columns = [("id", "ID"), ("name", "NAME"), ("team", "TEAM"), ("status", "STATUS"),
               ("region", "REGION"), ("created_at", "CREATED")]  # fmt: skip
    return _emit_page(rows, table(rows, columns), args, "postwire domains list")


def _domains_delete(config: Config, args: argparse.Namespace) -> int:
    from postwire.operator.domains import delete_domain

    try:
        domain = _run(delete_domain, config, args.name, args.team)
    except PostwireError as exc:
        return _failed(exc)
    emit({"object": "domain", "id": domain.id, "deleted": True},
         f"domain {domain.name} ({domain.id}) deleted", as_json=args.json)  # fmt: skip
    return 0


def add_store(commands: Subparsers, config_parent: argparse.ArgumentParser) -> None:
    store = commands.add_parser("store", help="the table store").add_subparsers(
        dest="store_command", metavar="ACTION", required=True
    )
    copy = store.add_parser(
        "copy",
        parents=[config_parent],
        help="copy the tables from LMDB into PostgreSQL (the service stopped), and check them",
        description='Copy every table of the stopped service (store.backend = "lmdb") into '
        "the PostgreSQL database at URL, creating its schema; then count and hash every table "
        "on both sides, and exit 1 unless all match. The LMDB tables are left as they were. "
        "See docs/storage.md, Moving to PostgreSQL.",
    )
    copy.add_argument(
        "--to", required=True, metavar="URL",
        help="postgresql://user:password@host:port/database, whose tables hold no rows",
    )  # fmt: skip
    copy.add_argument(
        "--replace",
        action="store_true",
        help="delete the rows the database's Postwire tables hold before copying",
    )
    _add_output(copy)
    copy.set_defaults(handler=_store_copy, needs_store=False)  # copy_tables checks the data


def _store_copy(config: Config, args: argparse.Namespace) -> int:
    from functools import partial

    from postwire.operator.store_copy import copy_tables, describe_copy

    try:
        report = _run(partial(copy_tables, replace=args.replace), config, args.to)
    except PostwireError as exc:
        return _failed(exc)
    emit(report.to_json(), describe_copy(report, config), as_json=args.json)
    if report.mismatched:
        print(f"postwire: the copy does not match in {', '.join(report.mismatched)}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0
