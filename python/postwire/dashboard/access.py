"""Who may reach a view, declared on the view; the request guard (`guard.py`) enforces it.

Without a mark a view needs a full session (password and, when the user has devices, MFA
passed) and the role `member` for GET/HEAD, `admin` for any other method. Marks:

    @public        no session needed (login, signup, emailed links, OAuth callbacks)
    @pending_mfa   also reachable by a session whose second factor is pending (the challenge)
    @mfa_setup     reachable when the team requires MFA and the user has none yet (enrolment)
    @requires(r)   the role needed for every method of the view
    @signed_post   no CSRF token: the POST carries its own proof (the SAML assertion consumer,
                   whose signed answer arrives cross-site, from the identity provider's page)
    @changes_sign_in  changes how the account signs in (password, address, second factors,
                   SSO links): refused to a session started through a team's SSO, whose
                   provider vouches for that team's membership, not for the whole account

Put the mark under the route decorator: `@bp.post("/x")` then `@requires("owner")`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

from postwire.store.users import ROLES

ViewT = TypeVar("ViewT", bound=Callable[..., Any])

_ATTRIBUTE: Final = "postwire_access"


@dataclass(frozen=True, slots=True)
class Access:
    public: bool = False
    pending_mfa: bool = False
    mfa_setup: bool = False
    role: str | None = None  # None: member for GET/HEAD, admin otherwise
    signed_post: bool = False
    changes_sign_in: bool = False


def access_of(view: Callable[..., Any]) -> Access:
    found: Access = getattr(view, _ATTRIBUTE, Access())
    return found


def _mark(view: ViewT, **changes: Any) -> ViewT:
    setattr(view, _ATTRIBUTE, replace(access_of(view), **changes))
    return view


def public(view: ViewT) -> ViewT:
    return _mark(view, public=True)


def pending_mfa(view: ViewT) -> ViewT:
    return _mark(view, pending_mfa=True)


def mfa_setup(view: ViewT) -> ViewT:
    return _mark(view, mfa_setup=True)


def signed_post(view: ViewT) -> ViewT:
    return _mark(view, signed_post=True)


def changes_sign_in(view: ViewT) -> ViewT:
    return _mark(view, changes_sign_in=True)


def requires(role: str) -> Callable[[ViewT], ViewT]:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")

    def mark(view: ViewT) -> ViewT:
        return _mark(view, role=role)

    return mark
