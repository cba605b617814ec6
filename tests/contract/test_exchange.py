"""The Request every binding sees: path, query and query parameters; immutable once built."""

from __future__ import annotations

import dataclasses

import pytest

from ssegate.contract.exchange import Request


def _request(target: str) -> Request:
    return Request("GET", "https", "localhost:7143", target, {})


def test_path_drops_the_query_string() -> None:
    assert _request("/events?lastEventId=5").path == "/events"
    assert _request("/events").path == "/events"


def test_query_parameters_are_url_decoded() -> None:
    request = _request("/events?a=1&lastEventId=AQQA%2FBAIC%3D&empty=")
    assert request.query_param("lastEventId") == "AQQA/BAIC="
    assert request.query_param("empty") == ""
    assert request.query_param("missing") is None
    assert _request("/events").query_param("a") is None


def test_a_request_cannot_be_changed_once_built_and_a_copy_says_what_was_learned() -> None:
    request = _request("/events")
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.target = "/other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.params = {"topic": "orders"}  # type: ignore[misc]
    routed = dataclasses.replace(request, params={"topic": "orders"})
    assert routed.params == {"topic": "orders"} and routed.target == "/events"
    assert request.params == {}
