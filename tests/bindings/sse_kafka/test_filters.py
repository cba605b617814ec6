"""``with.filters``: OR of entries, AND inside one, static or rendered per request."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.schema_errors import binding_errors

from ssegate.bindings.sse_kafka.filters import FilterTemplate, MessageFilter
from ssegate.config.errors import ConfigError
from ssegate.contract.identity import Identity
from ssegate.engine.templates import MissingTemplateValue
from ssegate.kafka.topics import KafkaMessage


def message(key: bytes | None = None, **headers: str) -> KafkaMessage:
    return KafkaMessage(
        "t", 0, 0, key, b"v", tuple((name, value.encode()) for name, value in headers.items())
    )


def compiled(filters: Any) -> FilterTemplate:
    template = FilterTemplate.compile(filters, "bindings.p.routes[0].with.filters")
    assert template is not None
    return template


def rendered(filters: Any, params: dict[str, str] | None = None) -> MessageFilter:
    return compiled(filters).render(params or {}, None)


def test_a_key_filter_passes_only_that_key() -> None:
    accepts = rendered([{"key": "fred"}]).matches
    assert accepts(message(b"fred"))
    assert not accepts(message(b"fredx"))
    assert not accepts(message(None))


def test_every_header_of_an_entry_must_match() -> None:
    accepts = rendered([{"headers": {"zone": "eu", "kind": "order"}}]).matches
    assert accepts(message(zone="eu", kind="order"))
    assert not accepts(message(zone="eu"))
    assert not accepts(message(zone="us", kind="order"))


def test_key_and_headers_of_one_entry_are_anded() -> None:
    accepts = rendered([{"key": "k", "headers": {"zone": "eu"}}]).matches
    assert accepts(message(b"k", zone="eu"))
    assert not accepts(message(b"k", zone="us"))
    assert not accepts(message(b"j", zone="eu"))


def test_entries_are_ored() -> None:
    accepts = rendered([{"key": "a"}, {"headers": {"zone": "eu"}}]).matches
    assert accepts(message(b"a"))
    assert accepts(message(b"b", zone="eu"))
    assert not accepts(message(b"b", zone="us"))


def test_a_header_repeated_in_the_message_matches_on_any_occurrence() -> None:
    accepts = rendered([{"headers": {"tag": "blue"}}]).matches
    repeated = KafkaMessage("t", 0, 0, None, b"v", (("tag", b"red"), ("tag", b"blue")))
    assert accepts(repeated)


def test_values_are_rendered_from_path_parameters_per_request() -> None:
    template = compiled([{"key": "${params.user}", "headers": {"zone": "${params.zone}"}}])
    assert template.param_names == {"user", "zone"}
    fred = template.render({"user": "fred", "zone": "eu"}, None)
    assert fred.matches(message(b"fred", zone="eu"))
    assert not fred.matches(message(b"wilma", zone="eu"))


def test_values_are_rendered_from_the_guarded_identity() -> None:
    template = compiled([{"key": "${guarded['jwt'].identity}"}])
    assert template.guard_names == {"jwt"}
    mine = template.render({}, {"jwt": Identity("alice")})
    assert mine.matches(message(b"alice"))
    with pytest.raises(MissingTemplateValue):
        template.render({}, {})


def test_values_compare_as_utf8_bytes() -> None:
    accepts = rendered([{"key": "${params.k}"}], {"k": "zoë"}).matches
    assert accepts(message("zoë".encode()))


def test_static_filters_are_rendered_once() -> None:
    template = compiled([{"key": "a"}])
    assert template.render({}, None) is template.render({"x": "y"}, None)


def test_no_filters_compile_to_nothing() -> None:
    assert FilterTemplate.compile(None, "f") is None
    assert FilterTemplate.compile([], "f") is None


@pytest.mark.parametrize(
    ("filters", "path", "reason"),
    [
        ([{"headers": {1: "a"}}], "with.filters[0].headers", "a header name must be"),
        ([{"key": "${nope}"}], "with.filters[0].key", "unknown expression"),
    ],
)
def test_bad_filters_are_config_errors_naming_the_path(
    filters: Any, path: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        FilterTemplate.compile(filters, "with.filters")
    assert raised.value.path == path
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    ("filters", "error"),
    [
        ({"key": "a"}, ": expected a list, got a mapping"),
        ([{}], "[0]: {} should be non-empty"),
        ([{"value": "a"}], "[0].value: 'value' is not allowed here (allowed: key, headers)"),
        ([{"key": 5}], "[0].key: expected a string, got 5"),
        ([{"headers": ["a"]}], "[0].headers: expected a mapping, got a list"),
        ([{"headers": {"a": 1}}], "[0].headers.a: expected a string, got 1"),
    ],
)
def test_filters_of_another_shape_are_refused_by_the_schema(filters: Any, error: str) -> None:
    routes = [{"exit": "cache", "with": {"topic": "t", "filters": filters}}]
    errors = binding_errors("p", "sse-kafka", "proxy", routes=routes)
    assert errors == [f"bindings.p.routes[0].with.filters{error}"]
