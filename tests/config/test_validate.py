"""Schema checks on zilla.yaml: every failure is one error at its dotted YAML path."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from jsonschema import Draft201909Validator

from ssegate.config.errors import ConfigError, ConfigErrors
from ssegate.config.validate import binding_kinds, schema, validate_document, yaml_path

SUPPORTED = "tcp, tls, http, http-filesystem, filesystem, sse, sse-kafka, kafka, asyncapi"


def errors_of(text: str) -> list[str]:
    document = yaml.safe_load(text)
    with pytest.raises(ConfigErrors) as exc:
        validate_document(document)
    return [str(error) for error in exc.value.errors]


def valid(text: str) -> None:
    document: dict[str, Any] = yaml.safe_load(text)
    validate_document(document)


def test_shipped_schema_is_a_valid_draft_2019_09_schema() -> None:
    Draft201909Validator.check_schema(schema())
    assert schema()["$schema"] == "https://json-schema.org/draft/2019-09/schema"


def test_binding_kinds_are_those_ssegate_runs() -> None:
    assert binding_kinds() == {
        "tcp": ("server", "client"),
        "tls": ("server", "client"),
        "http": ("server", "client"),
        "http-filesystem": ("proxy",),
        "filesystem": ("server",),
        "sse": ("server", "client"),
        "sse-kafka": ("proxy",),
        "kafka": ("client", "cache_client", "cache_server"),
        "asyncapi": ("server", "client", "proxy"),
    }


def test_alpn_outside_h2_and_http11_is_rejected_at_its_index() -> None:
    text = """
    name: x
    bindings:
      north_tls_server: {type: tls, kind: server, vault: v, options: {alpn: [h2, h3]}}
    """
    assert errors_of(text) == [
        "bindings.north_tls_server.options.alpn[1]: 'h3' is not one of ['h2', 'http/1.1']"
    ]


def test_misspelt_option_is_rejected_with_a_suggestion() -> None:
    text = "name: x\nbindings:\n  s: {type: sse, kind: server, options: {retyr: 10}}\n"
    assert errors_of(text) == [
        "bindings.s.options.retyr: 'retyr' is not allowed here; did you mean 'retry'? "
        "(allowed: retry, requests, keepalive, initial-comment, max-buffered, slow-client-timeout,"
        " x-ssegate-quotas)"
    ]


def test_missing_name_is_reported() -> None:
    assert errors_of("bindings: {}\n") == ["name: required but missing"]


def test_zilla_type_that_ssegate_does_not_run_is_named_as_such() -> None:
    text = "name: x\nbindings:\n  m: {type: mqtt, kind: server, options: {anything: 1}}\n"
    assert errors_of(text) == [
        "bindings.m.type: 'mqtt' is a Zilla binding type that ssegate does not run"
        f" (supported: {SUPPORTED})"
    ]


@pytest.mark.parametrize("type_", ["mcp", "mcp-http", "mcp-kafka", "mcp-openapi", "pgsql-kafka"])
def test_a_zilla_type_is_named_as_a_zilla_type_mcp_family_included(type_: str) -> None:
    text = f"name: x\nbindings:\n  m: {{type: {type_}, kind: server}}\n"
    assert errors_of(text) == [
        f"bindings.m.type: '{type_}' is a Zilla binding type that ssegate does not run"
        f" (supported: {SUPPORTED})"
    ]


def test_zillas_stores_section_is_named_as_a_zilla_section_ssegate_does_not_run() -> None:
    text = "name: x\nstores:\n  memory0: {type: memory}\nbindings: {}\n"
    assert errors_of(text) == [
        "stores: 'stores' is a Zilla section that ssegate does not run"
        " (no binding ssegate runs keeps its state in a store)"
    ]


def test_unknown_type_is_not_a_binding_type() -> None:
    text = "name: x\nbindings:\n  m: {type: htpp, kind: server}\n"
    assert errors_of(text) == [
        "bindings.m.type: 'htpp' is not a binding type; did you mean 'http'?"
        f" (supported: {SUPPORTED})"
    ]


def test_wrong_kind_names_the_kinds_of_that_type() -> None:
    text = "name: x\nbindings:\n  x: {type: http-filesystem, kind: client}\n"
    assert errors_of(text) == [
        "bindings.x.kind: 'client' is not a kind of 'http-filesystem' (use: proxy)"
    ]


def test_missing_kind_names_the_kinds_of_that_type() -> None:
    text = "name: x\nbindings:\n  k: {type: kafka, exit: y}\n"
    assert errors_of(text) == [
        "bindings.k.kind: required but missing (use: client, cache_client, cache_server)"
    ]


def test_every_error_is_reported_sorted_by_path() -> None:
    text = """
    name: x
    bindings:
      b: {type: sse, kind: server, options: {keepalive: -1}}
      a: {type: echo, kind: server}
      c: {type: http, kind: server, options: {versions: [h3]}}
    """
    assert errors_of(text) == [
        "bindings.a.type: 'echo' is a Zilla binding type that ssegate does not run"
        f" (supported: {SUPPORTED})",
        "bindings.b.options.keepalive: -1 is less than the minimum of 0",
        "bindings.c.options.versions[0]: 'h3' is not one of ['http/1.1', 'h2']",
    ]


@pytest.mark.parametrize("port", ["7143", "'7000-7010'", "[7143, 7114]", "[80, '8000-8010']"])
def test_tcp_port_may_be_a_number_a_range_or_a_list(port: str) -> None:
    valid(f"name: x\nbindings:\n  t: {{type: tcp, kind: server, options: {{port: {port}}}}}\n")


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("http", "'http' is not a port number, a \"low-high\" range, or a list of them"),
        ("70000", '70000 is not a port number, a "low-high" range, or a list of them'),
        ("[]", '[] is not a port number, a "low-high" range, or a list of them'),
        ("true", 'True is not a port number, a "low-high" range, or a list of them'),
    ],
)
def test_tcp_port_of_another_shape_is_rejected(port: str, message: str) -> None:
    text = f"name: x\nbindings:\n  t: {{type: tcp, kind: server, options: {{port: {port}}}}}\n"
    assert errors_of(text) == [f"bindings.t.options.port: {message}"]


def test_wrong_value_type_says_what_was_expected() -> None:
    text = "name: x\nbindings:\n  s: {type: sse, kind: server, options: {initial-comment: [a]}}\n"
    assert errors_of(text) == ["bindings.s.options.initial-comment: expected a string, got a list"]


def test_binding_kind_without_options_rejects_them() -> None:
    text = "name: x\nbindings:\n  p: {type: sse-kafka, kind: proxy, options: {}, exit: k}\n"
    assert errors_of(text) == [
        "bindings.p.options: 'options' is not allowed here (allowed: type, kind, exit, routes,"
        " telemetry)"
    ]


def test_route_needs_an_exit() -> None:
    text = "name: x\nbindings:\n  s: {type: sse, kind: server, routes: [{when: [{path: /a}]}]}\n"
    assert errors_of(text) == ["bindings.s.routes[0].exit: required but missing"]


def test_http_access_control_and_authorization_follow_zillas_names() -> None:
    valid(
        """
        name: x
        bindings:
          h:
            type: http
            kind: server
            options:
              versions: [http/1.1, h2]
              access-control:
                policy: cross-origin
                allow: {origins: ["https://a"], methods: [GET], headers: [x], credentials: true}
                max-age: 10
                expose: {headers: [x-id]}
              authorization:
                jwt0:
                  credentials:
                    cookies: {access_token: "{credentials}"}
                    headers: {authorization: "Bearer {credentials}"}
                    query: {access_token: "{credentials}"}
            routes:
              - when: [{headers: {":path": "/events/{id}"}}]
                guarded: {jwt0: ["read:stream"]}
                exit: s
        """
    )


def test_credentials_pattern_must_carry_the_placeholder() -> None:
    text = """
    name: x
    bindings:
      h:
        type: http
        kind: server
        options: {authorization: {j: {credentials: {headers: {authorization: Bearer}}}}}
    """
    assert errors_of(text) == [
        "bindings.h.options.authorization.j.credentials.headers.authorization:"
        " 'Bearer' is not a pattern containing '{credentials}'"
    ]


def test_sse_kafka_with_accepts_filters_and_both_event_id_formats() -> None:
    valid(
        """
        name: x
        bindings:
          p:
            type: sse-kafka
            kind: proxy
            routes:
              - when: [{path: "/items/{id}"}]
                exit: c
                with:
                  topic: items
                  filters: [{key: "${params.id}", headers: {owner: "${guarded['j'].identity}"}}]
                  event: {id: '["${base64(key)}","${etag}"]'}
        """
    )


def test_jwt_keys_may_be_a_jwks_url_but_not_another_scheme() -> None:
    valid("name: x\nguards: {j: {type: jwt, options: {keys: 'https://a/jwks.json'}}}\n")
    assert errors_of("name: x\nguards: {j: {type: jwt, options: {keys: 'ftp://a'}}}\n") == [
        "guards.j.options.keys: 'ftp://a' is not a list of JWKs or an http(s) URL of a JWKS"
    ]


def test_kafka_cache_server_topics_take_default_offset_and_models() -> None:
    valid(
        """
        name: x
        catalogs: {reg: {type: schema-registry, options: {url: "http://r:8081", max-age: 30}}}
        bindings:
          cs:
            type: kafka
            kind: cache_server
            options:
              bootstrap: [items]
              topics:
                - name: items
                  defaultOffset: live
                  value:
                    model: avro
                    view: json
                    catalog: {reg: [{strategy: topic, version: latest}]}
        """
    )


def test_telemetry_exporters_and_metrics_are_checked() -> None:
    text = """
    name: x
    telemetry:
      metrics: [stream.opens.received, "http.*", Bad]
      exporters:
        p: {type: prometheus, options: {endpoints: [{scheme: http, port: 70000}]}}
        s: {type: stdout}
    """
    assert errors_of(text) == [
        "telemetry.exporters.p.options.endpoints[0].port: 70000 is greater than the maximum of"
        " 65535",
        "telemetry.metrics[2]: 'Bad' is not a metric name such as 'stream.opens.received' or"
        " 'http.*'",
    ]


def test_invalid_name_is_reported_at_the_name() -> None:
    assert errors_of("name: x\nbindings:\n  9lives: {type: tcp, kind: client}\n") == [
        "bindings.9lives: '9lives' is not a valid name"
        " (a letter first, then letters, digits, '.', '_' or '-')"
    ]


def test_yaml_path_indexes_lists_and_quotes_awkward_keys() -> None:
    assert yaml_path(["bindings", "a", "routes", 1, "exit"]) == "bindings.a.routes[1].exit"
    assert yaml_path(["headers", "x.y"]) == "headers['x.y']"


def test_errors_are_config_errors_with_paths() -> None:
    with pytest.raises(ConfigErrors) as exc:
        validate_document({"name": 5})
    assert isinstance(exc.value, ConfigError)
    assert [(e.path, e.message) for e in exc.value.errors] == [("name", "expected a string, got 5")]
