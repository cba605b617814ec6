"""A token without its identity claim: accepted where nothing reads the identity, as in Zilla.

Zilla's example tokens carry no ``sub``. A guard whose identity no value of the config reads
(``${guarded['g'].identity}``) takes them with the empty identity; a guard whose identity a
route's ``with`` reads refuses them, naming where it is read. ``exp`` stays required either way.
"""

from __future__ import annotations

import time
from typing import Any

from ssegate.config.loader import load_config_text
from ssegate.contract.identity import CredentialsRejected, Identity
from ssegate.engine.runtime import Runtime
from ssegate.guards.identity_use import identity_readers
from ssegate.tools.token import encode_token

from .signing import AUDIENCE, ISSUER, jwks, key

CONFIG = """
name: identity-use
guards:
  authn_jwt:
    type: jwt
    options: {issuer: %(issuer)s, audience: %(audience)s, keys: %(keys)s}
  other_jwt:
    type: jwt
    options: {issuer: %(issuer)s, audience: %(audience)s, keys: %(keys)s}
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {host: 127.0.0.1, port: 7114}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      authorization:
        authn_jwt:
          credentials: {headers: {authorization: "Bearer {credentials}"}}
    routes:
      - when: [{headers: {":path": "/items/*"}}]
        exit: north_sse_server
        guarded: {authn_jwt: []}
  north_sse_server:
    type: sse
    kind: server
    exit: sse_kafka_proxy
  sse_kafka_proxy:
    type: sse-kafka
    kind: proxy
    routes:
      - when: [{path: "/items/{id}"}]
        exit: kafka_cache_client
        with:
          topic: items
          filters:
            - key: "${params.id}"
              headers: {owner: %(owner)s, team: "${guarded['other_jwt'].attributes.team}"}
  kafka_cache_client:
    type: kafka
    kind: cache_client
    exit: kafka_cache_server
  kafka_cache_server:
    type: kafka
    kind: cache_server
    exit: kafka_client
  kafka_client:
    type: kafka
    kind: client
    options: {servers: ["127.0.0.1:9092"]}
    exit: kafka_tcp_client
  kafka_tcp_client:
    type: tcp
    kind: client
    options: {host: 127.0.0.1, port: 9092}
"""
READS_IDENTITY = "\"${guarded['authn_jwt'].identity}\""


def runtime(owner: str) -> Runtime:
    values = {"issuer": ISSUER, "audience": AUDIENCE, "keys": jwks(), "owner": owner}
    return Runtime(load_config_text(CONFIG % values))


def zilla_example_token(**claims: Any) -> str:
    """A token like Zilla's examples mint: issuer, audience, scope, exp, and no ``sub``; a
    claim given as ``None`` is left out."""
    body = {"iss": ISSUER, "aud": AUDIENCE, "scope": "read:items", "exp": time.time() + 60}
    merged = {name: value for name, value in {**body, **claims}.items() if value is not None}
    return encode_token(key("ec"), merged, kid="ec")


def test_the_config_reads_a_guards_identity_where_a_with_value_names_it() -> None:
    config = runtime(READS_IDENTITY).config
    headers = "bindings.sse_kafka_proxy.routes[0].with.filters[0].headers"
    assert identity_readers(config, "authn_jwt") == [f"{headers}.owner"]
    assert identity_readers(config, "other_jwt") == []  # an attribute is not the identity


def test_a_token_without_sub_gets_the_empty_identity_where_nothing_reads_it() -> None:
    guard = runtime("alice").guard("authn_jwt")
    answer = guard.authorize(zilla_example_token())
    assert isinstance(answer, Identity)
    assert answer.identity == "" and answer.roles == frozenset({"read:items"})


def test_a_token_without_sub_is_refused_naming_where_the_identity_is_read() -> None:
    guard = runtime(READS_IDENTITY).guard("authn_jwt")
    answer = guard.authorize(zilla_example_token())
    assert answer == CredentialsRejected(
        "token has no 'sub' claim, which bindings.sse_kafka_proxy.routes[0].with.filters[0]"
        ".headers.owner reads"
    )
    assert isinstance(guard.authorize(zilla_example_token(sub="alice")), Identity)


def test_a_token_without_exp_is_still_refused_where_nothing_reads_the_identity() -> None:
    guard = runtime("alice").guard("authn_jwt")
    answer = guard.authorize(zilla_example_token(exp=None))
    assert answer == CredentialsRejected("token has no numeric exp")
