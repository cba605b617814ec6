"""What a 401 or 403 says: the guard that refused, why, and how to present credentials there.

The hint comes from the http server's ``options.authorization.<guard>.credentials``, so it names
the header, query parameter or cookie that server reads.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.guards import TableGuard

from ssegate.contract.exchange import Request
from ssegate.contract.identity import CredentialsRejected
from ssegate.guards import Refusal, check_guarded
from ssegate.guards.credentials import CredentialsLookup

GUARDS = {name: TableGuard(name) for name in ("authn_jwt", "g")}


def lookup(**credentials: Any) -> CredentialsLookup:
    return CredentialsLookup.from_options({"credentials": credentials}, "authorization.g")


def request(hints: dict[str, str] | None = None) -> Request:
    return Request("GET", "https", "localhost", "/events", {}, credentials_hints=hints)


BEARER = {"authorization": "Bearer {credentials}"}
QUERY = {"access_token": "{credentials}"}


@pytest.mark.parametrize(
    ("credentials", "hint"),
    [
        ({"headers": BEARER}, '"Authorization: Bearer <token>"'),
        ({"query": QUERY}, "?access_token=<token>"),
        ({"cookies": QUERY}, 'the cookie "access_token=<token>"'),
        ({"headers": {"x-api-token": "{credentials}"}}, '"X-Api-Token: <token>"'),
        (
            {"cookies": QUERY, "query": QUERY, "headers": BEARER},
            '"Authorization: Bearer <token>" or ?access_token=<token>'
            ' or the cookie "access_token=<token>"',
        ),
    ],
)
def test_the_hint_shows_each_configured_place_with_its_pattern(
    credentials: dict[str, Any], hint: str
) -> None:
    assert lookup(**credentials).hint() == hint


def test_a_401_names_the_guard_and_where_to_send_a_token() -> None:
    refusal = check_guarded({}, {"authn_jwt": ["read"]}, GUARDS)
    assert refusal == Refusal(401, "authn_jwt", "no credentials", scheme="Bearer")
    hints = {"authn_jwt": lookup(headers=BEARER, query=QUERY).hint()}
    assert refusal.body(request(hints)) == (
        "no credentials for guard 'authn_jwt': send"
        ' "Authorization: Bearer <token>" or ?access_token=<token>'
    )


def test_a_403_names_the_guard_the_reason_and_where_to_send_a_better_token() -> None:
    hints = {"authn_jwt": lookup(query=QUERY).hint()}
    expired = check_guarded(
        {"authn_jwt": CredentialsRejected("token has expired")}, {"authn_jwt": []}, GUARDS
    )
    assert expired is not None and expired.status == 403
    assert expired.body(request(hints)) == (
        "guard 'authn_jwt' refused the token: token has expired;"
        " send one it accepts as ?access_token=<token>"
    )


def test_without_a_configured_place_the_answer_says_so() -> None:
    refusal = Refusal(401, "jwt", "no credentials", scheme="Bearer")
    assert refusal.body(request()) == (
        "no credentials for guard 'jwt': the http server's options.authorization"
        " does not say where to send them"
    )
    scoped = Refusal(403, "jwt", "token lacks roles admin", "insufficient_scope", scheme="Bearer")
    assert scoped.body(request({"other": "?t=<token>"})) == (
        "guard 'jwt' refused the token: token lacks roles admin"
    )


def test_the_error_description_keeps_only_what_rfc_6750_allows_and_the_body_keeps_all() -> None:
    reason = "token kid '中\\x' is not in the key set \"é\"\r\n"
    refusal = check_guarded({"g": CredentialsRejected(reason)}, {"g": []}, GUARDS)
    assert refusal is not None
    assert refusal.www_authenticate() == (
        'Bearer realm="g", error="invalid_token",'
        " error_description=\"token kid '?x' is not in the key set '?'??\""
    )
    refusal.www_authenticate().encode("ascii")
    assert reason in refusal.body(request())
