"""Datagrams from any local process on the relay's channel: a message or ``MalformedDatagram``.

Whatever a process of the same user writes to a gateway's relay socket is read by
:func:`ssegate.host.relay_wire.decode`. The datagrams here are arbitrary bytes, JSON values
of every shape, and real messages with one field replaced by a value of any JSON type; each
decodes to a message that encodes back to itself, or is refused with a reason.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ssegate.host.relay_wire import MalformedDatagram, Outcome, Renewal, decode, encode

from .profiles import FUZZ

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
MESSAGES = st.one_of(
    st.builds(Renewal, st.just("0" * 32), st.text(min_size=1, max_size=20), st.text(max_size=60)),
    st.builds(
        Outcome,
        st.just("f" * 32),
        st.integers(0, 10),
        st.integers(0, 10),
        st.none() | st.text(max_size=40),
    ),
)


def _edited(message: Renewal | Outcome, field: str, value: object) -> bytes:
    fields = json.loads(encode(message))
    if field in fields:
        fields[field] = value
    else:
        fields.pop(sorted(fields)[len(field) % len(fields)])
    return json.dumps(fields).encode()


DATAGRAMS = st.one_of(
    st.binary(max_size=300),
    JSON.map(lambda value: json.dumps(value).encode()),
    st.builds(
        _edited,
        MESSAGES,
        st.sampled_from(["v", "type", "id", "guard", "token", "extended", "held", "reason", "-"]),
        JSON,
    ),
    MESSAGES.map(encode),
)


@FUZZ
@given(datagram=DATAGRAMS)
def test_any_datagram_is_a_message_or_malformed(datagram: bytes) -> None:
    try:
        message = decode(datagram)
    except MalformedDatagram as exc:
        assert exc.reason
        return
    assert decode(encode(message)) == message
