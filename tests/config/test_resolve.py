"""Resolving the binding graph: the model built from a document, and every broken reference."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ssegate.config.errors import ConfigErrors
from ssegate.config.model import Route
from ssegate.config.resolve import EXITS, resolve
from ssegate.config.validate import binding_kinds

TLS_CHAIN = """
name: x
vaults: {v: {type: filesystem, options: {keys: {store: k.p12, password: p}}}}
guards: {jwt0: {type: jwt, options: {issuer: "https://i", challenge: 5}}}
bindings:
  tcp0:
    type: tcp
    kind: server
    options: {port: 7143}
    routes: [{when: [{port: 7143}], exit: tls0}]
  tls0: {type: tls, kind: server, vault: v, options: {keys: [localhost]}, exit: http0}
  http0:
    type: http
    kind: server
    options:
      authorization: {jwt0: {credentials: {headers: {authorization: "Bearer {credentials}"}}}}
    routes:
      - when: [{headers: {":path": /events}}]
        exit: sse0
      - exit: files
  sse0: {type: sse, kind: server, routes: [{guarded: {jwt0: ["proxy:stream"]}, exit: ssec}]}
  ssec: {type: sse, kind: client, exit: httpc}
  httpc: {type: http, kind: client, exit: tcpc}
  tcpc: {type: tcp, kind: client, options: {host: upstream, port: 8001}}
  files: {type: http-filesystem, kind: proxy, routes: [{exit: fs, with: {path: "${params.path}"}}]}
  fs: {type: filesystem, kind: server, options: {location: /var/www/}}
"""


def document(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigErrors) as exc:
        resolve(document(text), source="zilla.yaml", base_dir="/etc/zilla")
    return [str(error) for error in exc.value.errors]


def with_bindings(extra: str) -> str:
    return f"name: x\nbindings:\n{extra}"


def test_resolved_model_keeps_plain_exit_and_route_paths() -> None:
    config = resolve(document(TLS_CHAIN), source="zilla.yaml", base_dir="/etc/zilla")

    http0 = config.bindings["http0"]
    assert http0.exit is None
    assert http0.routes[1] == Route(exit="files", path="bindings.http0.routes[1]")
    assert http0.routes[0].when == [{"headers": {":path": "/events"}}]
    assert config.bindings["tls0"].exit == "http0"
    assert config.bindings["tls0"].vault == "v"
    assert config.bindings["sse0"].routes[0].guarded == {"jwt0": ["proxy:stream"]}
    assert config.bindings["files"].routes[0].with_ == {"path": "${params.path}"}
    assert config.guards["jwt0"].path == "guards.jwt0"
    assert config.vaults["v"].options["keys"]["store"] == "k.p12"
    assert (config.source, config.base_dir) == ("zilla.yaml", "/etc/zilla")


def test_route_exit_to_an_undefined_binding_is_named() -> None:
    text = TLS_CHAIN.replace("      - exit: files", "      - exit: east_x")
    assert errors_of(text) == ["bindings.http0.routes[1].exit: binding 'east_x' is not defined"]


def test_exit_to_a_binding_of_the_wrong_type_lists_what_fits() -> None:
    text = TLS_CHAIN.replace("exit: http0}", "exit: fs}")
    assert errors_of(text) == [
        "bindings.tls0.exit: binding 'fs' is a filesystem server, but a tls server can only exit"
        " to: http server"
    ]


def test_terminal_binding_takes_no_exit() -> None:
    text = TLS_CHAIN.replace("location: /var/www/}}", "location: /var/www/}, exit: tcpc}")
    assert errors_of(text) == [
        "bindings.fs.exit: a filesystem server ends the chain and takes no exit"
    ]


def test_binding_that_needs_an_exit_and_has_none_is_reported() -> None:
    text = TLS_CHAIN.replace(", exit: tcpc}", "}")
    assert errors_of(text) == [
        "bindings.httpc: an http client needs an 'exit' or routes with one (to: tcp client, tls"
        " client)"
    ]


def test_cycle_of_exits_is_reported_once_as_a_loop() -> None:
    text = with_bindings(
        "  a: {type: tls, kind: server, vault: v, exit: b}\n"
        "  b: {type: http, kind: server, exit: a}\n"
        "vaults: {v: {type: filesystem}}\n"
    )
    errors = errors_of(text)
    assert "bindings.a: exits form a cycle: a -> b -> a" in errors
    assert [e for e in errors if "cycle" in e] == ["bindings.a: exits form a cycle: a -> b -> a"]


def test_binding_that_exits_to_itself_is_a_cycle() -> None:
    errors = errors_of(with_bindings("  c: {type: sse, kind: client, exit: c}\n"))
    assert "bindings.c: exits form a cycle: c -> c" in errors


def test_undefined_vault_is_named() -> None:
    text = TLS_CHAIN.replace("vault: v,", "vault: missing,")
    assert errors_of(text) == ["bindings.tls0.vault: vault 'missing' is not defined"]


def test_tls_server_without_a_vault_is_reported() -> None:
    text = TLS_CHAIN.replace("vault: v,", "")
    assert errors_of(text) == [
        "bindings.tls0.vault: required but missing: a tls server reads its keys from a vault"
    ]


def test_guarded_route_naming_an_undefined_guard_is_reported() -> None:
    text = TLS_CHAIN.replace("guarded: {jwt0:", "guarded: {jwt9:")
    assert errors_of(text) == ["bindings.sse0.routes[0].guarded.jwt9: guard 'jwt9' is not defined"]


def test_http_authorization_naming_an_undefined_guard_is_reported() -> None:
    text = TLS_CHAIN.replace("authorization: {jwt0:", "authorization: {jwt9:")
    assert errors_of(text) == [
        "bindings.http0.options.authorization.jwt9: guard 'jwt9' is not defined"
    ]


def test_guarded_expression_in_with_naming_an_undefined_guard_is_reported() -> None:
    text = with_bindings(
        "  p:\n"
        "    type: sse-kafka\n"
        "    kind: proxy\n"
        "    routes:\n"
        "      - exit: c\n"
        "        with: {topic: t, filters: [{key: \"${guarded['g'].identity}\"}]}\n"
        "  c: {type: kafka, kind: cache_client, exit: s}\n"
        "  s: {type: kafka, kind: cache_server, exit: k}\n"
        "  k: {type: kafka, kind: client, exit: t}\n"
        "  t: {type: tcp, kind: client}\n"
    )
    assert errors_of(text) == ["bindings.p.routes[0].with.filters[0].key: guard 'g' is not defined"]


def test_model_naming_an_undefined_catalog_is_reported() -> None:
    text = with_bindings(
        "  c:\n"
        "    type: kafka\n"
        "    kind: cache_client\n"
        "    options: {topics: [{name: t, value: {model: avro, catalog: {reg: [{id: 1}]}}}]}\n"
        "    exit: s\n"
        "  s: {type: kafka, kind: cache_server, exit: k}\n"
        "  k: {type: kafka, kind: client, exit: t}\n"
        "  t: {type: tcp, kind: client}\n"
    )
    assert errors_of(text) == [
        "bindings.c.options.topics[0].value.catalog.reg: catalog 'reg' is not defined"
    ]


def test_server_that_nothing_routes_to_is_fine() -> None:
    text = with_bindings(
        "  lonely: {type: sse, kind: server, exit: ssec}\n"
        "  ssec: {type: sse, kind: client, exit: httpc}\n"
        "  httpc: {type: http, kind: client, exit: tcpc}\n"
        "  tcpc: {type: tcp, kind: client}\n"
    )
    config = resolve(document(text), source="zilla.yaml", base_dir=".")
    assert config.bindings["lonely"].exits() == ["ssec"]


def test_errors_are_sorted_by_path_with_numeric_indexes() -> None:
    routes = "".join(f"      - exit: nowhere{i}\n" for i in range(12))
    text = with_bindings(f"  h:\n    type: http\n    kind: server\n    routes:\n{routes}")
    errors = errors_of(text)
    assert errors[1] == "bindings.h.routes[1].exit: binding 'nowhere1' is not defined"
    assert errors[2] == "bindings.h.routes[2].exit: binding 'nowhere2' is not defined"
    assert errors[-1] == "bindings.h.routes[11].exit: binding 'nowhere11' is not defined"


def test_exit_table_only_names_roles_that_exist() -> None:
    roles = set(EXITS) | {target for targets in EXITS.values() for target in targets}
    known = {(type_, kind) for type_, kinds in binding_kinds().items() for kind in kinds}
    assert roles <= known
