"""The upstream request head: fields encoded and checked, HTTP/1.1 bytes from h11, h2 fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssegate.bindings.http.request_head import (
    RequestHead,
    RequestRefused,
    http1_request,
    http2_request,
)

DROPPED = frozenset({"host", "connection"})


def head(
    headers: tuple[tuple[str, str], ...] = (), target: str = "/events?x=1", authority: str = "up:80"
) -> RequestHead:
    return RequestHead("GET", "http", authority, target, headers)


def test_the_http11_head_has_host_first_and_values_in_utf_8() -> None:
    request = head((("accept", "text/event-stream"), ("last-event-id", "日本")))
    assert http1_request(request) == (
        b"GET /events?x=1 HTTP/1.1\r\nhost: up:80\r\naccept: text/event-stream\r\n"
        + "last-event-id: 日本\r\n\r\n".encode()
    )


def test_the_h2_fields_lead_with_the_pseudo_headers_and_leave_out_the_dropped_ones() -> None:
    request = head((("accept", "text/event-stream"), ("connection", "close")))
    assert http2_request(request, DROPPED) == [
        (b":method", b"GET"),
        (b":scheme", b"http"),
        (b":authority", b"up:80"),
        (b":path", b"/events?x=1"),
        (b"accept", b"text/event-stream"),
    ]


def test_the_target_and_authority_go_out_as_the_bytes_received() -> None:
    received = "caf\xc3\xa9.example"  # UTF-8 bytes read as Latin-1 by the server edge
    assert b"\r\nhost: caf\xc3\xa9.example\r\n" in http1_request(head(authority=received))


def test_spaces_and_tabs_around_a_value_are_dropped() -> None:
    request = head((("last-event-id", " \t5 6\t "),))
    assert b"\r\nlast-event-id: 5 6\r\n" in http1_request(request)
    assert (b"last-event-id", b"5 6") in http2_request(request, DROPPED)


@pytest.mark.parametrize(
    "value", ["1\r\nx-injected: yes", "1\r", "1\nx", "1\x00", "a\x0bb", "a\x0cb"]
)
@pytest.mark.parametrize("serialize", [http1_request, lambda h: http2_request(h, DROPPED)])
def test_a_value_with_a_line_break_or_nul_is_refused(value: str, serialize: object) -> None:
    with pytest.raises(RequestRefused) as caught:
        serialize(head((("last-event-id", value),)))  # type: ignore[operator]
    assert str(caught.value).startswith("header 'last-event-id' value ")
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (head(target="/a b"), "request target '/a b' holds a character it may not"),
        (head(target="/ü"), "request target '/ü' holds a character it may not"),
        (head(target="/日"), "request target '/日' is not the bytes of a request"),
        (head(authority="a\r\nx: y"), "header 'host' value 'a\\r\\nx: y' holds a character"),
        (head((("bad name", "v"),)), "header name 'bad name' is not a token"),
        (head((("x-id", "\udc80"),)), "header 'x-id' is not text: surrogates not allowed"),
    ],
    ids=["space-in-target", "latin-1-target", "text-target", "authority", "name", "surrogate"],
)
def test_what_cannot_be_sent_is_refused_with_the_reason(request_: RequestHead, reason: str) -> None:
    for serialize in (http1_request, lambda h: http2_request(h, DROPPED)):
        with pytest.raises(RequestRefused) as caught:
            serialize(request_)
        assert str(caught.value).startswith(reason)


@given(st.text(max_size=40))
def test_http11_and_h2_accept_and_refuse_the_same_values(value: str) -> None:
    request = head((("last-event-id", value),))
    outcomes = []
    for serialize in (http1_request, lambda h: http2_request(h, DROPPED)):
        try:
            serialize(request)
            outcomes.append("sent")
        except RequestRefused:
            outcomes.append("refused")
    assert outcomes[0] == outcomes[1]
    breaks = any(c in "\r\n\x00\x0b\x0c" or "\ud800" <= c <= "\udfff" for c in value)
    if not breaks:
        assert outcomes == ["sent", "sent"]
