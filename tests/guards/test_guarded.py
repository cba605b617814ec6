"""A route's ``guarded`` compiled: literal roles, and ``${method}``/``${path}`` per request."""

from __future__ import annotations

import pytest
from tests.support.guards import TableGuard

from ssegate.config.errors import ConfigError
from ssegate.contract.exchange import Request
from ssegate.contract.identity import Identity
from ssegate.guards.guarded import Guarded

GUARDS = {"g": TableGuard("g")}


def request(target: str = "/events", method: str = "GET", roles: str = "") -> Request:
    identities = {"g": Identity("alice", frozenset(roles.split()))}
    return Request(method, "https", "localhost", target, {}, identities=identities)


def test_literal_roles_are_the_same_for_every_request() -> None:
    guarded = Guarded.compile({"g": ["read", "write"]}, "routes[0].guarded")
    assert guarded.required(request()) == {"g": frozenset({"read", "write"})}
    assert guarded.check(request(roles="read write admin"), GUARDS) is None


def test_method_and_path_are_read_from_the_request_without_its_query() -> None:
    guarded = Guarded.compile({"g": ["${method}${path}", "tenant:${ path }"]}, "r.guarded")
    asked = request("/events/acme?lastEventId=7&access_token=t")
    assert guarded.required(asked) == {"g": frozenset({"GET/events/acme", "tenant:/events/acme"})}
    assert (
        guarded.check(request("/events/acme", roles="GET/events/acme tenant:/events/acme"), GUARDS)
        is None
    )
    refused = guarded.check(request("/events/acme", roles="GET/events/other"), GUARDS)
    assert refused is not None and refused.status == 403
    assert refused.reason == "token lacks roles GET/events/acme tenant:/events/acme"


@pytest.mark.parametrize(
    ("role", "message"),
    [
        (
            "${params.id}",
            "'${params.id}' is not a role expression (role names may use ${method} and ${path})",
        ),
        (
            "read:${guarded['g'].identity}",
            "'${guarded['g'].identity}' is not a role expression"
            " (role names may use ${method} and ${path})",
        ),
        ("${method", "'${method' opens '${' without closing it"),
    ],
)
def test_an_unknown_or_broken_expression_is_a_config_error_naming_the_role(
    role: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Guarded.compile({"g": ["read", role]}, "bindings.h.routes[2].guarded")
    assert str(raised.value) == f"bindings.h.routes[2].guarded.g[1]: {message}"


def test_an_empty_guarded_admits_everything_and_names_no_guard() -> None:
    guarded = Guarded.compile(None, "r.guarded")
    assert not guarded and list(guarded) == []
    assert guarded.check(Request("GET", "http", "h", "/", {}), {}) is None


def test_admission_passes_on_a_copy_that_names_the_guards_and_keeps_the_request() -> None:
    guarded = Guarded.compile({"g": ["read"]}, "r.guarded")
    asked = request(roles="read")
    admitted, refusal = guarded.admit(asked, GUARDS)
    assert refusal is None
    assert dict(admitted.authorized_by) == {"g": GUARDS["g"]}
    assert dict(asked.authorized_by) == {}
    refused, why = guarded.admit(request(roles="write"), GUARDS)
    assert why is not None and why.status == 403
    assert dict(refused.authorized_by) == {}
