"""AsyncAPI as Zilla's configs and documents write it, read one way by the bindings and the CLI.

Spec entries name servers as objects or URL strings (``servers: ['http://...']``, or one
``server:``); routes name specs with ``spec`` or the older ``api-id``; SSE operations may
``receive``; an address parameter may go undeclared. ``ssegate asyncapi validate`` says of a
document what a binding says of it, and a dangling ``$ref`` is refused at its pointer by both.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.asyncapi.test_expand import KAFKA_API, KAFKA_CONFIG, SSE_API, load, mutated

from ssegate.asyncapi.cli import add_asyncapi_parser
from ssegate.config.errors import ConfigError
from ssegate.config.loader import load_config_text
from ssegate.config.model import Config

ZILLA_SSE_API = mutated(
    mutated(SSE_API, ["operations", "onEvents", "action"], "receive"),
    ["channels", "events"],
    {"address": "/events/{id}", "messages": SSE_API["channels"]["events"]["messages"]},
)
"""The SSE document as Zilla's examples write it: ``receive``, ``{id}`` not declared."""
KAFKA_BY_ID = mutated(
    KAFKA_API,
    ["channels", "topic"],
    {"address": "events.{id}", "parameters": {"id": {}}},
)


def with_spec_entries(tmp_path: Path, entry: dict[str, Any], routes_key: str) -> Config:
    """:data:`KAFKA_CONFIG` with every spec read from an inline catalog through ``entry``
    (plus its ``catalog``) and the proxy's route naming specs by ``routes_key``."""
    (tmp_path / "sse.yaml").write_text(yaml.safe_dump(ZILLA_SSE_API))
    (tmp_path / "kafka.yaml").write_text(yaml.safe_dump(KAFKA_BY_ID))
    subjects = {
        "sse": {"schema": json.dumps(ZILLA_SSE_API)},
        "kafka": {"schema": json.dumps(KAFKA_BY_ID)},
    }
    document = yaml.safe_load(KAFKA_CONFIG)
    document["catalogs"] = {"specs": {"type": "inline", "options": {"subjects": subjects}}}
    for binding in document["bindings"].values():
        for label in binding["options"]["specs"]:
            subject = "sse" if label == "sse_api" else "kafka"
            chosen = entry if subject == "sse" else {}
            catalog = {"specs": {"subject": subject, "version": "latest"}}
            binding["options"]["specs"][label] = {**chosen, "catalog": catalog}
    [route] = document["bindings"]["mapping"]["routes"]
    route["when"] = [{routes_key: "sse_api"}]
    route["with"] = {routes_key: "kafka_api"}
    return load_config_text(yaml.safe_dump(document), base_dir=str(tmp_path))


@pytest.mark.parametrize("routes_key", ["spec", "api-id"])
@pytest.mark.parametrize(
    "entry",
    [
        {"servers": ["http://localhost:7114"]},
        {"server": "http://localhost:7114"},
        {"servers": [{"url": "http://localhost:7114"}]},
        {},
    ],
    ids=["servers-as-urls", "one-server", "servers-as-objects", "no-servers"],
)
def test_zillas_spellings_of_servers_and_routes_expand_alike(
    tmp_path: Path, entry: dict[str, Any], routes_key: str
) -> None:
    config = with_spec_entries(tmp_path, entry, routes_key)
    [route] = config.bindings["mapping_sse_kafka"].routes
    assert route.when == [{"path": "/events/{id}"}]
    assert route.with_ == {"topic": "events.${params.id}"}
    assert config.bindings["north_tcp_server"].options == {"host": "localhost", "port": 7114}
    [sse_route] = config.bindings["north_sse_server"].routes
    assert sse_route.when == [{"path": "/events/*"}]


def test_a_server_url_the_document_does_not_list_moves_its_servers_there(tmp_path: Path) -> None:
    config = with_spec_entries(tmp_path, {"server": "http://127.0.0.1:9001"}, "spec")
    assert config.bindings["north_tcp_server"].options == {"host": "127.0.0.1", "port": 9001}


def test_a_server_url_of_a_protocol_the_document_lacks_selects_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        with_spec_entries(tmp_path, {"servers": ["mqtt://localhost:1883"]}, "spec")
    assert str(raised.value) == (
        "bindings.north.options.specs.sse_api.servers: selects none of the document's servers"
    )


def test_server_and_servers_together_are_refused(tmp_path: Path) -> None:
    entry = {"server": "http://localhost:7114", "servers": ["http://localhost:7114"]}
    with pytest.raises(ConfigError) as raised:
        with_spec_entries(tmp_path, entry, "spec")
    assert str(raised.value) == (  # the proxy's entry comes first: the dump sorts the bindings
        "bindings.mapping.options.specs.sse_api.server: give servers or server, not both"
    )


def test_a_receive_operation_and_a_send_operation_both_stream(tmp_path: Path) -> None:
    receive = load(tmp_path, mutated(SSE_API, ["operations", "onEvents", "action"], "receive"))
    send = load(tmp_path, SSE_API)
    for name in ("mapping_sse_kafka", "north_sse_server", "north_http_server"):
        assert receive.bindings[name].routes == send.bindings[name].routes


def validate(tmp_path: Path, document: dict[str, Any]) -> str:
    """``ssegate asyncapi validate`` on ``document``: its output, or its refusal."""
    path = tmp_path / "doc.yaml"
    path.write_text(yaml.safe_dump(document))
    parser = argparse.ArgumentParser()
    add_asyncapi_parser(parser.add_subparsers())
    args = parser.parse_args(["asyncapi", "validate", str(path)])
    try:
        args.func(args)
    except ConfigError as exc:
        return str(exc).removeprefix(f"{path}: ")
    return "valid"


def binding_says(tmp_path: Path, document: dict[str, Any]) -> str:
    try:
        load(tmp_path, document, KAFKA_BY_ID)
    except ConfigError as exc:
        return str(exc).removeprefix("bindings.north.options.specs.sse_api: ")
    return "valid"


DANGLING = "#/channels/events/messages/missing"


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (ZILLA_SSE_API, "valid"),
        (
            mutated(ZILLA_SSE_API, ["operations", "onEvents", "messages"], [{"$ref": DANGLING}]),
            "valid",  # nothing follows an operation's messages: noted, run as Zilla runs it
        ),
        (
            mutated(ZILLA_SSE_API, ["components"], {"messages": {"m": {"$ref": DANGLING}}}),
            "valid",
        ),
        (
            mutated(ZILLA_SSE_API, ["operations", "onEvents", "channel"], {"$ref": DANGLING}),
            f"/operations/onEvents/channel/$ref: '{DANGLING}' points at nothing",
        ),
        (
            mutated(ZILLA_SSE_API, ["channels", "events", "address"], "events/{id}"),
            "/channels/events/address: 'events/{id}' is not a path: an SSE channel address"
            " starts with '/'",
        ),
        (
            mutated(ZILLA_SSE_API, ["servers", "plain", "protocol"], "ws"),
            "/servers/plain/protocol: 'ws' is not an SSE server protocol"
            " (http, sse, https, secure-sse)",
        ),
    ],
    ids=[
        "zilla-shaped",
        "dangling-unread-in-operation",
        "dangling-unused",
        "dangling-followed",
        "not-a-path",
        "ws-server",
    ],
)
def test_validate_and_the_binding_say_the_same_of_a_document(
    tmp_path: Path, document: dict[str, Any], expected: str
) -> None:
    assert validate(tmp_path, document) == expected
    assert binding_says(tmp_path, document) == expected


def test_validate_notes_an_undeclared_parameter_as_zillas_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert validate(tmp_path, ZILLA_SSE_API) == "valid"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(": valid SSE AsyncAPI 3.0.0 (1 channels, 1 operations)")
    assert lines[1].endswith(
        ": note: /channels/events/address: parameter {id} is not declared in"
        " /channels/events/parameters; read as one path segment, as Zilla does"
    )


def test_a_kafka_document_is_checked_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert validate(tmp_path, copy.deepcopy(KAFKA_API)) == "valid"
    assert "valid Kafka AsyncAPI 3.0.0" in capsys.readouterr().out


def test_validate_names_a_dangling_ref_nothing_follows_in_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = mutated(ZILLA_SSE_API, ["operations", "onEvents", "messages"], [{"$ref": DANGLING}])
    assert validate(tmp_path, document) == "valid"
    notes = [line for line in capsys.readouterr().out.splitlines() if ": note: " in line]
    assert any(
        f"/operations/onEvents/messages/0/$ref: '{DANGLING}' points at nothing; nothing reads it"
        in line
        for line in notes
    ), notes
