"""Every option ``ssegate validate`` accepts is applied, or refused with a message naming it.

The test walks the schema, as :mod:`ssegate.config.schema` assembles it from its parts: each
option of each binding kind (its ``options``, its routes' ``when``, ``with`` and ``guarded``,
its ``telemetry``), of each guard, vault, catalog and exporter type, the top-level ``telemetry``
and the model blocks. :data:`TABLE` must hold an entry for every path found (a new option in the
schema fails the test until it gets one) and no entry for a path the schema lacks:

- :class:`Applied` names the test that shows the option's effect (it must exist);
- :class:`Refused` gives what the refusal says. Without a test of its own it is checked here:
  a binding or component with just that option is refused with :class:`NotSupportedYet` at the
  path ``at`` (relative to the binding or component) and that message.

Paths read ``bindings.<type>.<kind>.options.<name>``, ``[]`` for list items, ``*`` for a map's
values.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from ssegate.config.errors import NotSupportedYet
from ssegate.config.model import Binding, Component, Route
from ssegate.config.unsupported import refuse_unsupported, refuse_unsupported_component
from ssegate.config.validate import schema

from ..quotas.option_table import quota_options

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Applied:
    test: str
    """``tests/<file>.py::<test function>``."""


@dataclass(frozen=True)
class Refused:
    message: str
    at: str = ""
    """Where the refusal points, under the binding (``options.signers``, ``routes[0]``) or the
    component; empty: derived from the path (its ``options.<name>``)."""
    test: str | None = None
    """A test that shows the refusal, where it is not :mod:`ssegate.config.unsupported`'s."""


# -- the schema, walked ---------------------------------------------------------------------------

_LEAVES = {"#/$defs/model", "#/$defs/catalog_refs", "#/$defs/guarded", "#/$defs/port"}
_LEAVES |= {"#/$defs/name", "#/$defs/exit", "#/$defs/metric"}


def _resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        found: Any = schema()
        for part in node["$ref"].removeprefix("#/").split("/"):
            found = found[part]
        node = found
    return node


def _walk(node: Any, prefix: str) -> Iterator[str]:
    if isinstance(node, dict) and node.get("$ref") in _LEAVES:
        return
    node = _resolve(node)
    if not isinstance(node, dict):
        return
    for key in ("oneOf", "anyOf"):
        for alternative in node.get(key, []):
            yield from _walk(alternative, prefix)
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{prefix}[]")
    for name, sub in node.get("properties", {}).items():
        yield f"{prefix}.{name}"
        yield from _walk(sub, f"{prefix}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{prefix}.*")


@cache
def option_paths() -> tuple[str, ...]:
    """Every option path of the schema, once each, in the schema's order."""
    defs = schema()["$defs"]
    found: list[str] = []
    for role, definition in defs["bindings"].items():
        properties = _resolve(definition)["properties"]
        where = f"bindings.{role}"
        if "options" in properties:
            found += _walk(properties["options"], f"{where}.options")
        if "routes" in properties:
            route = _resolve(properties["routes"]["items"])["properties"]
            for name, sub in route.items():
                if name != "exit":
                    found.append(f"{where}.routes[].{name}")
                    found += _walk(sub, f"{where}.routes[].{name}")
        if "telemetry" in properties:
            found.append(f"{where}.telemetry.metrics")
    for kind, section in (("guard", "guards"), ("vault", "vaults")):
        for type_ in defs[kind]["properties"]["type"]["enum"]:
            found += _walk(defs[kind]["properties"]["options"], f"{section}.{type_}.options")
    for kind, section in (("catalog", "catalogs"), ("exporter", "telemetry.exporters")):
        for rule in defs[kind]["allOf"]:
            condition = rule["if"]["properties"]["type"]
            for type_ in [condition["const"]] if "const" in condition else condition["enum"]:
                found.append(f"{section}.{type_}")
                found += _walk(rule["then"]["properties"]["options"], f"{section}.{type_}.options")
    found += _walk(defs["model"]["oneOf"][1], "models")
    found += _walk(defs["catalog_refs"], "models.catalog")
    found += ["telemetry.attributes", "telemetry.metrics"]
    return tuple(dict.fromkeys(found))


# -- the table ------------------------------------------------------------------------------------

CORS = "tests/bindings/http/test_cors.py::"
REQUESTS = "tests/bindings/http/test_requests.py::"
SSE = "tests/bindings/sse/test_server.py::"
TLS_SERVER = "tests/bindings/tls/test_tls_server.py::"
TLS_CLIENT = "tests/bindings/tls/test_tls_client.py::"
H2 = "tests/bindings/http/test_h2_limits_gateway.py::"
MODELS = "tests/models/test_models.py::"
EXPAND = "tests/asyncapi/test_expand.py::"
READING = "tests/asyncapi/test_reading.py::"
ZILLA_SPELLINGS = "test_zillas_spellings_of_servers_and_routes_expand_alike"
CATALOGS = "tests/catalogs/test_catalogs.py::"
JWT = "tests/guards/test_jwt.py::"
FS = "tests/bindings/filesystem/test_server.py::"

NO_ROUTES = "routes are not supported yet here: {}"
SIGNERS = "is not supported yet (no tls binding signs certificates here)"
SSE_SERVER_ONLY = "is an sse server option: an sse client does not use it"
HTTP_CLIENT = "is not supported yet on an http client (it applies to the http server)"
RESPONSES = Refused(
    "response validation is not supported yet",
    test=REQUESTS + "test_a_rule_with_responses_is_refused_as_not_supported_yet",
)
TCP_WHEN = Refused(
    "tcp routes by port only in this version of ssegate",
    test="tests/bindings/tcp/test_server.py::test_routes_on_cidr_are_refused_as_not_supported_yet",
)
OTLP = "tests/telemetry/test_otlp.py::"
METRICS = Applied(
    "tests/telemetry/test_prometheus.py::"
    "test_telemetry_metrics_select_the_zilla_series_each_binding_asks_for"
)


def _no_routes(why: str) -> Refused:
    return Refused(NO_ROUTES.format(why), at="routes[0]")


def _guard_refused(type_: str, kind: str) -> Refused:
    return Refused(
        f"{type_} {kind} routes take no guard; put it on the http server's route",
        at="routes[0].guarded",
    )


def _http_options(kind: str) -> dict[str, Applied | Refused]:
    """The options the http server and client share in the schema."""
    server = kind == "server"
    explicit = "test_explicit_lists_echo_origin_method_and_headers_with_vary"
    exposed = "test_expose_list_names_the_listed_headers_present_in_the_response"
    names = {
        "access-control": "test_credentials_make_a_preflight_explicit_without_allow_credentials",
        "access-control.policy": "test_other_origins_are_refused_under_same_origin_and_unlisted"
        "_under_cross_origin",
        "access-control.allow": explicit,
        "access-control.allow.origins": "test_listed_origin_matches_with_or_without_its_default"
        "_port",
        "access-control.allow.methods": explicit,
        "access-control.allow.headers": "test_last_event_id_is_allowed_whenever_headers_are_listed",
        "access-control.allow.credentials": "test_credentials_echo_the_origin_and_allow"
        "_credentials",
        "access-control.max-age": "test_max_age_is_sent_on_preflights",
        "access-control.expose": exposed,
        "access-control.expose.headers": exposed,
    }
    table: dict[str, Applied | Refused] = {}
    for name, test in names.items():
        table[name] = Applied(CORS + test) if server else Refused(HTTP_CLIENT)
    authorization = Applied("tests/test_challenge.py::test_requests_without_credentials_are_401")
    for name in ("", ".*.credentials", ".*.credentials.headers"):
        table[f"authorization{name}"] = authorization if server else Refused(HTTP_CLIENT)
    for name, test in (
        ("query", "test_credentials_in_the_query_or_a_cookie_open_the_stream"),
        ("cookies", "test_a_cookie_is_looked_up_before_the_header"),
    ):
        found = Applied(f"tests/test_challenge.py::{test}")
        table[f"authorization.*.credentials.{name}"] = found if server else Refused(HTTP_CLIENT)
    table["overrides"] = (
        Applied(
            "tests/test_zilla_fidelity.py::"
            "test_overrides_reach_the_exit_after_the_route_matched_the_request_as_sent"
        )
        if server
        else Refused(HTTP_CLIENT)
    )
    requests = {
        "": "test_the_server_answers_400_before_the_exit_and_counts_and_logs_it",
        "[].path": "test_a_path_pattern_captures_its_params_and_ignores_the_query_and_one_trailing"
        "_slash",
        "[].method": "test_method_and_content_type_select_the_rule_and_the_first_that_applies_is"
        "_used",
        "[].content-type": "test_method_and_content_type_select_the_rule_and_the_first_that"
        "_applies_is_used",
        "[].headers": "test_a_header_is_checked_against_its_model",
        "[].params": "test_a_path_parameter_is_checked_percent_decoded",
        "[].params.path": "test_a_path_parameter_is_checked_percent_decoded",
        "[].params.query": "test_every_value_of_a_query_parameter_is_checked_url_decoded",
        "[].content": "test_content_is_checked_against_its_schema",
    }
    for name, test in requests.items():
        table[f"requests{name}"] = Applied(REQUESTS + test) if server else Refused(HTTP_CLIENT)
    for name in ("", ".status", ".content-type", ".headers", ".content"):
        refusal = RESPONSES if server else Refused(HTTP_CLIENT, at="options.requests")
        table[f"requests[].responses{'[]' if name else ''}{name}"] = refusal
    table["versions"] = (
        Applied("tests/test_gateway.py::test_cleartext_port_serves_http11_and_prior_knowledge_h2")
        if server
        else Applied(
            "tests/bindings/http/test_client.py::test_h2_with_prior_knowledge_on_cleartext"
        )
    )
    return {f"bindings.http.{kind}.options.{name}": entry for name, entry in table.items()}


def _sse_options(kind: str) -> dict[str, Applied | Refused]:
    server = kind == "server"
    names = {
        "requests": "test_invalid_event_is_dropped_but_its_id_still_moves_the_cursor",
        "requests[].path": "test_invalid_event_is_dropped_but_its_id_still_moves_the_cursor",
        "requests[].content": "test_invalid_event_is_dropped_but_its_id_still_moves_the_cursor",
        "keepalive": "test_keepalive_comment_is_sent_after_idle_time_only",
        "initial-comment": "test_retry_and_initial_comment_are_written_once_at_stream_start",
        "max-buffered": "test_slow_client_is_aborted_past_max_buffered",
        "slow-client-timeout": "test_a_client_over_the_stall_mark_for_the_timeout_is_aborted_for"
        "_time",
    }
    table: dict[str, Applied | Refused] = {
        name: Applied(SSE + test)
        if server
        else Refused(SSE_SERVER_ONLY, at=f"options.{name.split('[')[0]}")
        for name, test in names.items()
    }
    table["retry"] = Applied(
        SSE + "test_retry_and_initial_comment_are_written_once_at_stream_start"
        if server
        else "tests/bindings/sse/test_client.py::"
        "test_reconnect_delays_start_at_the_floor_double_and_stop_at_the_cap"
    )
    table.update(quota_options(server, Applied, Refused, SSE_SERVER_ONLY))
    return {f"bindings.sse.{kind}.options.{name}": entry for name, entry in table.items()}


def _asyncapi(kind: str) -> dict[str, Applied | Refused]:
    where = f"bindings.asyncapi.{kind}"
    spec = Applied(
        EXPAND + "test_a_spec_read_from_a_catalog_is_narrowed_to_the_servers_its_entry_names"
    )
    table: dict[str, Applied | Refused] = {
        f"{where}.options.specs": Applied(
            EXPAND + "test_an_sse_channel_mapped_to_a_kafka_channel_becomes_an_sse_kafka_route"
        ),
        **{
            f"{where}.options.specs.*.{name}": spec
            for name in (
                "catalog",
                "catalog.*.subject",
                "catalog.*.version",
                "servers",
                "servers[].name",
                "servers[].url",
                "servers[].host",
                "servers[].pathname",
            )
        },
        f"{where}.options.specs.*.server": Applied(READING + ZILLA_SPELLINGS),
    }
    unused = f"is not used by an asyncapi {kind}: "
    passed_on = {
        "server": {"tcp", "tls", "http", "sse"},
        "client": {"tcp", "tls", "http", "kafka"},
        "proxy": set(),
    }[kind]
    why = {
        "server": "its streams come from its exit",
        "client": "it expands to an sse client with no options",
        "proxy": "it expands to an sse-kafka proxy only",
    }[kind]
    for name in ("tcp", "tls", "http", "kafka", "sse"):
        table[f"{where}.options.{name}"] = (
            Applied(
                EXPAND + "test_an_sse_channel_mapped_to_a_kafka_channel_becomes_an_sse_kafka_route"
            )
            if name in passed_on
            else Refused(unused + why)
        )
    for name in ("mqtt-kafka", "http-kafka"):
        table[f"{where}.options.{name}"] = Refused(
            f"is not supported yet: ssegate has no {name} binding"
        )
    if kind == "client":
        refused = _no_routes("an asyncapi client expands to one chain, its exit's")
        for name in ("when", "when[].api-id", "when[].spec", "when[].operation-id", "with"):
            table[f"{where}.routes[].{name}"] = refused
        table[f"{where}.routes[].guarded"] = refused
        table[f"{where}.routes[].with.api-id"] = refused
        table[f"{where}.routes[].with.spec"] = refused
        table[f"{where}.routes[].with.operation-id"] = refused
    else:
        routed = Applied(
            EXPAND + "test_an_sse_channel_mapped_to_a_kafka_channel_becomes_an_sse_kafka_route"
        )
        for name in ("when", "when[].api-id", "when[].operation-id"):
            table[f"{where}.routes[].{name}"] = routed
        table[f"{where}.routes[].when[].spec"] = Applied(READING + ZILLA_SPELLINGS)
        table[f"{where}.routes[].guarded"] = _guard_refused("asyncapi", kind)
        with_ = (
            routed
            if kind == "proxy"
            else Refused(
                "an asyncapi server route picks an exit, it has no with", at="routes[0].with"
            )
        )
        for name in ("with", "with.api-id", "with.operation-id"):
            table[f"{where}.routes[].{name}"] = with_
        table[f"{where}.routes[].with.spec"] = (
            Applied(READING + ZILLA_SPELLINGS) if kind == "proxy" else with_
        )
    table[f"{where}.telemetry.metrics"] = METRICS
    return table


def _without_routes(type_: str, kind: str, why: str, fields: tuple[str, ...]) -> dict[str, Refused]:
    refused = _no_routes(why)
    return {f"bindings.{type_}.{kind}.routes[].{name}": refused for name in fields}


TABLE: dict[str, Applied | Refused] = {
    # tcp
    "bindings.tcp.server.options.host": Applied(
        "tests/test_gateway.py::test_cleartext_port_serves_http11_and_prior_knowledge_h2"
    ),
    "bindings.tcp.server.options.port": Applied(
        "tests/bindings/tcp/test_server.py::test_port_as_int_string_range_and_list"
    ),
    "bindings.tcp.server.routes[].when": Applied(
        "tests/bindings/tcp/test_server.py::test_routes_pick_the_exit_by_port_and_exit_takes_the_rest"
    ),
    "bindings.tcp.server.routes[].when[].port": Applied(
        "tests/bindings/tcp/test_server.py::test_routes_pick_the_exit_by_port_and_exit_takes_the_rest"
    ),
    "bindings.tcp.server.routes[].when[].cidr": TCP_WHEN,
    "bindings.tcp.server.routes[].when[].authority": TCP_WHEN,
    "bindings.tcp.server.routes[].guarded": _guard_refused("tcp", "server"),
    "bindings.tcp.client.options.host": Applied(
        "tests/bindings/tcp/test_client.py::test_connect_reaches_a_listening_server"
    ),
    "bindings.tcp.client.options.port": Applied(
        "tests/bindings/tcp/test_client.py::test_connect_reaches_a_listening_server"
    ),
    **_without_routes(
        "tcp",
        "client",
        "a tcp client connects to options.host and port",
        ("guarded", "when", "when[].cidr", "when[].authority", "when[].port"),
    ),
    # tls
    "bindings.tls.server.options.version": Applied(TLS_SERVER + "test_tls11_client_is_refused"),
    "bindings.tls.server.options.keys": Applied(
        TLS_SERVER + "test_sni_selects_the_key_named_by_the_client"
    ),
    "bindings.tls.server.options.trust": Applied(
        TLS_SERVER + "test_mutual_required_refuses_a_client_without_a_certificate"
    ),
    "bindings.tls.server.options.signers": Refused(SIGNERS),
    "bindings.tls.server.options.trustcacerts": Refused(
        "is not supported yet on a tls server: client certificates are checked against"
        " options.trust only"
    ),
    "bindings.tls.server.options.sni": Applied(
        TLS_SERVER + "test_a_server_name_outside_sni_is_refused_and_logged"
    ),
    "bindings.tls.server.options.alpn": Applied(
        TLS_SERVER + "test_alpn_negotiates_h2_first_then_http11"
    ),
    "bindings.tls.server.options.mutual": Applied(
        TLS_SERVER + "test_mutual_required_refuses_a_client_without_a_certificate"
    ),
    "bindings.tls.server.routes[].when": Applied(TLS_SERVER + "test_alpn_routes_pick_the_exit"),
    "bindings.tls.server.routes[].when[].alpn": Applied(
        TLS_SERVER + "test_alpn_routes_pick_the_exit"
    ),
    "bindings.tls.server.routes[].when[].authority": Refused(
        "tls routes by alpn only in this version", at="routes[0].when[0].authority"
    ),
    "bindings.tls.server.routes[].when[].port": Refused(
        "tls routes by alpn only in this version", at="routes[0].when[0].port"
    ),
    "bindings.tls.server.routes[].guarded": _guard_refused("tls", "server"),
    "bindings.tls.client.options.version": Applied(
        TLS_CLIENT + "test_version_bounds_the_protocol_the_client_speaks"
    ),
    "bindings.tls.client.options.keys": Applied(
        TLS_CLIENT + "test_keys_present_a_client_certificate_to_a_server_that_asks"
    ),
    "bindings.tls.client.options.trust": Applied(
        TLS_CLIENT + "test_client_trusts_the_vault_ca_and_checks_the_sni_name"
    ),
    "bindings.tls.client.options.signers": Refused(SIGNERS),
    "bindings.tls.client.options.trustcacerts": Applied(
        TLS_CLIENT + "test_trustcacerts_adds_the_system_cas_to_the_vault_trust"
    ),
    "bindings.tls.client.options.sni": Applied(
        TLS_CLIENT + "test_client_trusts_the_vault_ca_and_checks_the_sni_name"
    ),
    "bindings.tls.client.options.alpn": Applied(
        TLS_CLIENT + "test_client_trusts_the_vault_ca_and_checks_the_sni_name"
    ),
    "bindings.tls.client.options.mutual": Refused(
        "is a tls server option: a tls client presents options.keys when it has them"
    ),
    **_without_routes(
        "tls",
        "client",
        "a tls client hands every connection to its exit",
        ("guarded", "when", "when[].authority", "when[].alpn", "when[].port"),
    ),
    # http
    **_http_options("server"),
    **_http_options("client"),
    "bindings.http.server.options.http1": Applied(
        "tests/bindings/http/test_server.py::"
        "test_the_http1_request_timeout_is_its_own_and_defaults_to_the_http2_one"
    ),
    "bindings.http.server.options.http1.request-timeout": Applied(
        "tests/bindings/http/test_h1_limits_gateway.py::"
        "test_a_body_that_trickles_past_the_request_timeout_is_answered_408_and_closed"
    ),
    "bindings.http.server.options.http2": Applied(
        "tests/bindings/http/test_server.py::"
        "test_http2_options_become_the_connection_limits_and_the_rest_keep_their_defaults"
    ),
    **{
        f"bindings.http.server.options.http2.frames-per-second{name}": Applied(
            H2
            + "test_a_flood_of_one_frame_kind_gets_goaway_enhance_your_calm_and_others_are_served"
        )
        for name in (
            "",
            ".settings",
            ".ping",
            ".empty-data",
            ".rst-stream",
            ".window-update",
            ".priority",
            ".extension",
        )
    },
    "bindings.http.server.options.http2.frame-burst": Applied(
        H2 + "test_a_flood_of_one_frame_kind_gets_goaway_enhance_your_calm_and_others_are_served"
    ),
    "bindings.http.server.options.http2.max-unread-acks": Applied(
        H2 + "test_a_peer_that_sends_pings_and_reads_nothing_is_dropped"
    ),
    "bindings.http.server.options.http2.request-timeout": Applied(
        H2 + "test_requests_that_never_end_are_reset_with_cancel_after_the_request_timeout"
    ),
    "bindings.http.server.routes[].when": Applied(
        "tests/bindings/http/test_server.py::test_a_matching_route_reaches_its_exit_with_captured_params"
    ),
    "bindings.http.server.routes[].when[].headers": Applied(
        "tests/bindings/http/test_server.py::test_a_matching_route_reaches_its_exit_with_captured_params"
    ),
    "bindings.http.server.routes[].guarded": Applied(
        "tests/test_guard_placement.py::test_a_role_expression_is_evaluated_per_request"
    ),
    "bindings.http.client.options.max-head-bytes": Applied(
        "tests/bindings/http/test_client.py::test_http11_response_head_over_a_limit_ends_the_stream"
    ),
    "bindings.http.client.options.max-headers": Applied(
        "tests/bindings/http/test_client.py::test_http11_response_head_over_a_limit_ends_the_stream"
    ),
    **_without_routes(
        "http",
        "client",
        "an http client hands every request to its exit",
        ("guarded", "when", "when[].headers"),
    ),
    # http-filesystem and filesystem
    "bindings.http-filesystem.proxy.routes[].when": Applied(
        "tests/bindings/http_filesystem/test_proxy.py::test_seed_route_maps_the_path_to_the_file"
    ),
    "bindings.http-filesystem.proxy.routes[].when[].path": Applied(
        "tests/bindings/http_filesystem/test_proxy.py::test_seed_route_maps_the_path_to_the_file"
    ),
    "bindings.http-filesystem.proxy.routes[].with": Applied(
        "tests/bindings/http_filesystem/test_proxy.py::test_seed_route_maps_the_path_to_the_file"
    ),
    "bindings.http-filesystem.proxy.routes[].with.path": Applied(
        "tests/bindings/http_filesystem/test_proxy.py::test_seed_route_maps_the_path_to_the_file"
    ),
    "bindings.http-filesystem.proxy.routes[].guarded": Applied(
        "tests/test_guard_placement.py::"
        "test_a_guarded_http_filesystem_route_evaluates_its_role_expression"
    ),
    "bindings.filesystem.server.options.location": Applied(
        FS + "test_build_resolves_location_against_the_config_directory"
    ),
    "bindings.filesystem.server.options.symlinks": Applied(
        FS + "test_follow_mode_serves_links_that_stay_inside_location"
    ),
    **_without_routes(
        "filesystem", "server", "a filesystem server ends the chain", ("guarded", "when")
    ),
    # sse
    **_sse_options("server"),
    **_sse_options("client"),
    "bindings.sse.server.routes[].when": Applied(
        SSE + "test_routes_match_path_globs_without_query_and_no_route_is_404"
    ),
    "bindings.sse.server.routes[].when[].path": Applied(
        SSE + "test_routes_match_path_globs_without_query_and_no_route_is_404"
    ),
    "bindings.sse.server.routes[].guarded": Applied(
        "tests/test_challenge.py::test_an_unanswered_stream_ends_at_exp"
    ),
    **_without_routes(
        "sse",
        "client",
        "an sse client hands every stream to its exit",
        ("guarded", "when", "when[].path"),
    ),
    # sse-kafka
    "bindings.sse-kafka.proxy.routes[].when": Applied(
        "tests/bindings/sse_kafka/test_proxy.py::test_dynamic_filters_from_the_path_pick_messages"
    ),
    "bindings.sse-kafka.proxy.routes[].when[].path": Applied(
        "tests/bindings/sse_kafka/test_proxy.py::test_dynamic_filters_from_the_path_pick_messages"
    ),
    "bindings.sse-kafka.proxy.routes[].with": Applied(
        "tests/bindings/sse_kafka/test_proxy.py::test_dynamic_filters_from_the_path_pick_messages"
    ),
    "bindings.sse-kafka.proxy.routes[].with.topic": Applied(
        "tests/bindings/sse_kafka/test_proxy.py::test_dynamic_filters_from_the_path_pick_messages"
    ),
    "bindings.sse-kafka.proxy.routes[].with.filters": Applied(
        "tests/bindings/sse_kafka/test_filters.py::test_entries_are_ored"
    ),
    "bindings.sse-kafka.proxy.routes[].with.filters[].key": Applied(
        "tests/bindings/sse_kafka/test_filters.py::test_a_key_filter_passes_only_that_key"
    ),
    "bindings.sse-kafka.proxy.routes[].with.filters[].headers": Applied(
        "tests/bindings/sse_kafka/test_filters.py::test_every_header_of_an_entry_must_match"
    ),
    "bindings.sse-kafka.proxy.routes[].with.event": Applied(
        "tests/bindings/sse_kafka/test_proxy.py::"
        "test_the_key_form_puts_base64_key_and_progress_in_a_json_array"
    ),
    "bindings.sse-kafka.proxy.routes[].with.event.id": Applied(
        "tests/bindings/sse_kafka/test_proxy.py::"
        "test_the_key_form_puts_base64_key_and_progress_in_a_json_array"
    ),
    "bindings.sse-kafka.proxy.routes[].guarded": Applied(
        "tests/test_sse_kafka_guarded.py::"
        "test_a_guard_on_the_sse_kafka_route_challenges_and_ends_the_stream_at_exp"
    ),
    # kafka
    "bindings.kafka.client.options.servers": Applied(
        "tests/bindings/kafka/test_options.py::test_servers_and_sasl_become_the_librdkafka_configuration"
    ),
    **{
        f"bindings.kafka.client.options.sasl{name}": Applied(
            "tests/bindings/kafka/test_options.py::"
            "test_servers_and_sasl_become_the_librdkafka_configuration"
        )
        for name in ("", ".mechanism", ".username", ".password")
    },
    "bindings.kafka.cache_client.options.topics": Applied(
        "tests/test_sse_kafka_models.py::"
        "test_avro_values_arrive_as_json_and_invalid_ones_are_skipped_logged_and_counted"
    ),
    "bindings.kafka.cache_client.options.topics[].name": Applied(
        "tests/test_sse_kafka_models.py::"
        "test_avro_values_arrive_as_json_and_invalid_ones_are_skipped_logged_and_counted"
    ),
    "bindings.kafka.cache_client.options.topics[].key": Applied(
        MODELS + "test_a_topic_checks_key_and_value_and_lets_tombstones_through"
    ),
    "bindings.kafka.cache_client.options.topics[].value": Applied(
        "tests/test_sse_kafka_models.py::"
        "test_avro_values_arrive_as_json_and_invalid_ones_are_skipped_logged_and_counted"
    ),
    **{
        f"bindings.kafka.cache_server.options.{name}": Applied(
            "tests/bindings/kafka/test_options.py::"
            "test_bootstrap_cache_bounds_and_default_offsets_reach_the_cache_server"
        )
        for name in (
            "bootstrap",
            "cache",
            "cache.max-bytes",
            "cache.max-age",
            "topics",
            "topics[].name",
            "topics[].defaultOffset",
        )
    },
    "bindings.kafka.cache_server.options.cache.repeat-horizon": Applied(
        "tests/bindings/kafka/test_cache_server_repeats.py::"
        "test_the_horizon_bounds_how_far_back_a_first_copy_makes_a_repeat"
    ),
    "bindings.kafka.cache_server.options.topics[].key": Applied(
        "tests/bindings/kafka/test_cache_server.py::"
        "test_invalid_messages_are_skipped_logged_and_counted"
    ),
    "bindings.kafka.cache_server.options.topics[].value": Applied(
        "tests/bindings/kafka/test_cache_server.py::"
        "test_invalid_messages_are_skipped_logged_and_counted"
    ),
    "bindings.kafka.cache_server.options.topics[].transforms": Applied(
        "tests/test_sse_kafka_transforms.py::"
        "test_streams_filtered_on_extracted_fields_get_exactly_their_records"
    ),
    "bindings.kafka.cache_server.options.topics[].deltaType": Refused(
        "is not supported yet: the cache keeps and hands out whole values",
        at="options.topics[0].deltaType",
    ),
    **{
        f"bindings.kafka.{kind}.routes[].{name}": _no_routes(
            f"a kafka {kind} "
            + (
                "hands every connection to its exit"
                if kind == "client"
                else "reads every topic through its exit"
            )
        )
        for kind in ("client", "cache_client", "cache_server")
        for name in ("guarded", "when", "when[].topic", "when[].groupId")
    },
    # asyncapi
    **_asyncapi("server"),
    **_asyncapi("client"),
    **_asyncapi("proxy"),
    # every binding's telemetry
    **{
        f"bindings.{role}.telemetry.metrics": METRICS
        for role in schema()["$defs"]["bindings"]
        if not role.startswith("asyncapi.")
    },
    # guards
    "guards.jwt.options.issuer": Applied(JWT + "test_a_wrong_issuer_is_refused"),
    "guards.jwt.options.audience": Applied(JWT + "test_a_missing_or_wrong_audience_is_refused"),
    "guards.jwt.options.keys": Applied(JWT + "test_without_keys_the_jwks_url_is_under_the_issuer"),
    "guards.jwt.options.keys[].kty": Applied(
        JWT + "test_a_token_signed_by_a_known_key_gives_identity_and_roles"
    ),
    "guards.jwt.options.keys[].kid": Applied(
        JWT + "test_an_unknown_kid_is_refused_and_flagged_for_a_key_refetch"
    ),
    "guards.jwt.options.keys[].alg": Applied(JWT + "test_an_ec_kid_with_an_rs_alg_is_refused"),
    "guards.jwt.options.challenge": Applied(
        "tests/test_challenge.py::test_an_answered_challenge_keeps_the_stream_past_the_first_expiry"
    ),
    "guards.jwt.options.identity": Applied(
        JWT + "test_roles_come_from_a_claim_path_as_a_list_or_a_string"
    ),
    "guards.jwt.options.roles": Applied(
        JWT + "test_roles_come_from_a_claim_path_as_a_list_or_a_string"
    ),
    "guards.jwt.options.attributes": Applied(
        JWT + "test_roles_come_from_a_claim_path_as_a_list_or_a_string"
    ),
    # vaults
    **{
        f"vaults.filesystem.options.{store}{name}": Applied(
            "tests/vaults/test_filesystem_vault.py::test_wrong_password_points_at_the_password"
        )
        for store in ("keys", "trust")
        for name in ("", ".store", ".type", ".password")
    },
    **{
        f"vaults.filesystem.options.signers{name}": Refused(SIGNERS, at="options.signers")
        for name in ("", ".store", ".type", ".password")
    },
    # catalogs
    "catalogs.inline": Applied(CATALOGS + "test_inline_subjects_resolve_by_subject_version_and_id"),
    "catalogs.inline.options.subjects": Applied(
        CATALOGS + "test_inline_subjects_resolve_by_subject_version_and_id"
    ),
    "catalogs.inline.options.subjects.*.schema": Applied(
        CATALOGS + "test_inline_subjects_resolve_by_subject_version_and_id"
    ),
    "catalogs.inline.options.subjects.*.version": Applied(
        CATALOGS + "test_inline_subjects_resolve_by_subject_version_and_id"
    ),
    "catalogs.filesystem": Applied(
        CATALOGS + "test_filesystem_subjects_are_read_relative_to_the_config"
    ),
    "catalogs.filesystem.options.subjects": Applied(
        CATALOGS + "test_filesystem_subjects_are_read_relative_to_the_config"
    ),
    "catalogs.filesystem.options.subjects.*.path": Applied(
        CATALOGS + "test_filesystem_subjects_are_read_relative_to_the_config"
    ),
    **{
        f"catalogs.{type_}{name}": Applied(CATALOGS + test)
        for type_ in ("schema-registry", "karapace")
        for name, test in (
            ("", "test_confluent_catalog_asks_by_subject_version_and_by_id_once_each"),
            (".options.url", "test_confluent_catalog_asks_by_subject_version_and_by_id_once_each"),
            (".options.context", "test_confluent_context_qualifies_subjects_and_id_lookups"),
            (
                ".options.max-age",
                "test_latest_is_asked_again_after_max_age_and_numbered_versions_never",
            ),
        )
    },
    **{
        f"catalogs.apicurio{name}": Applied(
            CATALOGS + "test_apicurio_catalog_reads_meta_then_content_by_global_or_content_id"
        )
        for name in ("", ".options.url", ".options.group-id", ".options.use-id", ".options.max-age")
    },
    "catalogs.apicurio.options.id-encoding": Refused(
        "is not supported yet: ids are read in the default 4-byte encoding"
    ),
    # exporters and telemetry
    "telemetry.exporters.stdout": Applied(
        "tests/telemetry/test_stdout_exporter.py::test_events_become_json_lines_on_stdout"
    ),
    **{
        f"telemetry.exporters.prometheus{name}": Applied(
            "tests/telemetry/test_prometheus.py::test_endpoint_serves_the_rendering_and_404_elsewhere"
        )
        for name in (
            "",
            ".options.endpoints",
            ".options.endpoints[].port",
            ".options.endpoints[].path",
        )
    },
    "telemetry.exporters.prometheus.options.endpoints[].scheme": Applied(
        "tests/telemetry/test_prometheus.py::test_only_the_http_scheme_is_accepted"
    ),
    **{
        f"telemetry.exporters.otlp{name}": Applied(
            "tests/telemetry/test_otlp_collector.py::"
            "test_metrics_and_log_events_reach_a_real_collector"
        )
        for name in ("", ".options.endpoint", ".options.endpoint.protocol")
    },
    **{
        f"telemetry.exporters.otlp{name}": Applied(
            OTLP + "test_signals_choose_what_is_sent_and_overrides_resolve_against_the_location"
        )
        for name in (
            ".options.interval",
            ".options.signals",
            ".options.endpoint.overrides",
            ".options.endpoint.overrides.metrics",
            ".options.endpoint.overrides.logs",
        )
    },
    "telemetry.exporters.otlp.options.endpoint.location": Applied(
        OTLP + "test_a_location_that_is_not_an_http_url_is_refused_naming_it"
    ),
    **{
        f"telemetry.exporters.otlp.options{name}": Applied(
            "tests/telemetry/test_delivery_traces.py::"
            "test_a_record_with_traceparent_is_delivered_under_its_producers_span_stage_by_stage"
        )
        for name in (".traces", ".traces.sampling", ".endpoint.overrides.traces")
    },
    "telemetry.attributes": Applied(
        "tests/telemetry/test_stdout_exporter.py::test_telemetry_attributes_ride_on_every_line"
    ),
    "telemetry.metrics": METRICS,
    # models
    "models.model": Applied(MODELS + "test_json_with_a_schema_accepts_a_matching_document"),
    "models.view": Applied(MODELS + "test_avro_accepts_a_framed_record_and_views_it_as_json"),
    "models.encoding": Applied(MODELS + "test_string_in_utf_16"),
    "models.minLength": Applied(
        MODELS + "test_string_checks_encoding_lengths_and_a_whole_text_pattern"
    ),
    "models.maxLength": Applied(
        MODELS + "test_string_checks_encoding_lengths_and_a_whole_text_pattern"
    ),
    "models.pattern": Applied(
        MODELS + "test_string_checks_encoding_lengths_and_a_whole_text_pattern"
    ),
    "models.catalog": Applied(MODELS + "test_json_with_a_schema_accepts_a_matching_document"),
    "models.catalog.*[].id": Applied(
        MODELS + "test_json_in_the_confluent_wire_format_is_checked_against_the_schema_its_id_names"
    ),
    "models.catalog.*[].subject": Applied(
        MODELS + "test_a_subject_the_catalog_lacks_is_a_config_error_naming_the_catalog_entry"
    ),
    "models.catalog.*[].version": Applied(
        CATALOGS + "test_inline_subjects_resolve_by_subject_version_and_id"
    ),
    "models.catalog.*[].strategy": Applied(
        MODELS + "test_the_topic_strategy_names_the_subject_topic_dash_value"
    ),
    "models.catalog.*[].record": Applied(
        "tests/models/test_protobuf.py::test_a_record_limits_which_message_a_topic_may_carry"
    ),
}


# -- the checks -----------------------------------------------------------------------------------


def test_every_option_of_the_schema_has_an_entry_and_every_entry_an_option() -> None:
    paths = set(option_paths())
    missing = sorted(paths - set(TABLE))
    assert not missing, (
        f"options without an entry (applied by which test, or refused how?): {missing}"
    )
    stale = sorted(set(TABLE) - paths)
    assert not stale, f"entries for options the schema does not have: {stale}"


@cache
def _test_functions(file: str) -> frozenset[str]:
    tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    )


def _named_test(entry: Applied | Refused) -> str:
    return entry.test if isinstance(entry, Applied) else entry.test or ""


@pytest.mark.parametrize("path", sorted(p for p, e in TABLE.items() if _named_test(e)))
def test_the_named_test_exists(path: str) -> None:
    file, _, name = _named_test(TABLE[path]).partition("::")
    assert name in _test_functions(file), f"{path}: {file} has no {name}"


def _sample(path: str, entry: Refused) -> tuple[str, Binding | Component]:
    """A binding or component holding just the refused option, and where its refusal points."""
    parts = path.split(".")
    if parts[0] in ("vaults", "catalogs"):
        kind = {"vaults": "vault", "catalogs": "catalog"}[parts[0]]
        name = parts[3]
        component = Component("c", parts[1], {name: {}}, path=f"{parts[0]}.c")
        return kind, component
    type_, kind, rest = parts[1], parts[2], ".".join(parts[3:])
    if rest.startswith("options."):
        name = rest.removeprefix("options.").split(".")[0].split("[")[0]
        value: Any = [{"name": "t", "deltaType": "none"}] if name == "topics" else {}
        return "binding", Binding("b", type_, kind, options={name: value})
    head, _, tail = rest.removeprefix("routes[].").partition(".")
    route = Route(exit="e", path="bindings.b.routes[0]")
    if head.startswith("when"):
        route = Route(exit="e", when=[{tail: "x"} if tail else {}], path=route.path)
    elif head == "guarded":
        route = Route(exit="e", guarded={"g": []}, path=route.path)
    elif head == "with":
        route = Route(exit="e", with_={}, path=route.path)
    return "binding", Binding("b", type_, kind, routes=[route])


REFUSED_HERE = sorted(p for p, e in TABLE.items() if isinstance(e, Refused) and e.test is None)


@pytest.mark.parametrize("path", REFUSED_HERE)
def test_a_refused_option_is_refused_naming_its_path(path: str) -> None:
    entry = TABLE[path]
    assert isinstance(entry, Refused)
    kind, sample = _sample(path, entry)
    with pytest.raises(NotSupportedYet) as raised:
        if isinstance(sample, Binding):
            refuse_unsupported(sample)
        else:
            refuse_unsupported_component(kind, sample)
    at = entry.at or f"options.{path.split('.options.')[1].split('.')[0].split('[')[0]}"
    assert raised.value.path == f"{sample.path}.{at}"
    assert raised.value.message == entry.message


CONFIG = """\
name: refusals
vaults:
  servers:
    type: filesystem
    options:
      signers:
        store: nowhere.p12
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {host: 127.0.0.1, port: 0}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    exit: south_sse_client
  south_sse_client:
    type: sse
    kind: client
    options: {keepalive: 5}
    exit: south_http_client
  south_http_client:
    type: http
    kind: client
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
    options: {host: 127.0.0.1, port: 1}
"""


def test_validate_lists_every_refusal_and_fails_as_start_does(tmp_path: Path) -> None:
    config = tmp_path / "zilla.yaml"
    config.write_text(CONFIG)

    def ssegate(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ssegate", *args, "-c", str(config)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    validated = ssegate("validate")
    assert validated.returncode == 2, validated.stderr
    assert validated.stderr.splitlines() == [
        "ssegate: bindings.south_sse_client.options.keepalive: " + SSE_SERVER_ONLY,
        "ssegate: vaults.servers.options.signers: " + SIGNERS,
    ]
    started = ssegate("start")
    assert started.returncode != 0
    keepalive = "ssegate: bindings.south_sse_client.options.keepalive: "
    assert started.stderr == f"{keepalive}{SSE_SERVER_ONLY}\n"
    config.write_text(CONFIG.replace("store: nowhere.p12", "store: x"))
    started = ssegate("start")
    assert started.returncode != 0
    assert "bindings.south_sse_client.options.keepalive: " + SSE_SERVER_ONLY in started.stderr


def test_the_schema_walk_finds_nested_and_shared_options() -> None:
    paths = option_paths()
    assert "bindings.http.server.options.requests[].params.query" in paths
    assert "bindings.http.client.options.overrides" in paths  # through a $ref to the server's
    assert "catalogs.apicurio.options.id-encoding" in paths
    assert json.dumps(sorted(paths)) == json.dumps(sorted(set(paths)))
