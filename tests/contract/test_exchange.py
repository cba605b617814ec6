"""The Request every binding sees: path, query and query parameters."""

from __future__ import annotations

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
