"""The relay's datagrams: what one process writes the others read back, and nothing else."""

from __future__ import annotations

import json

import pytest

from ssegate.host.relay_wire import (
    MAX_DATAGRAM,
    MalformedDatagram,
    Outcome,
    Renewal,
    decode,
    encode,
    new_id,
)


def test_a_renewal_and_an_outcome_read_back_as_written() -> None:
    renewal = Renewal(new_id(), "authn_jwt", "eyJ.eyJ.sig")
    outcome = Outcome(new_id(), 2, 3, None)
    refused = Outcome(new_id(), 0, 1, "the answer does not expire later than the current token")
    assert [decode(encode(m)) for m in (renewal, outcome, refused)] == [renewal, outcome, refused]


def test_an_outcome_reason_is_cut_to_printable_ascii() -> None:
    written = encode(Outcome(new_id(), 0, 1, "lacks roles \u00e9t\u00e9\n" + "x" * 1000))
    read = decode(written)
    assert isinstance(read, Outcome) and read.reason is not None
    assert read.reason.startswith("lacks roles ?t??x") and len(read.reason) == 300


def _renewal(**changes: object) -> bytes:
    fields: dict[str, object] = {
        "v": 1,
        "type": "renewal",
        "id": "0" * 32,
        "guard": "g",
        "token": "t",
    }
    fields.update(changes)
    return json.dumps({k: v for k, v in fields.items() if v is not None}).encode()


@pytest.mark.parametrize(
    ("datagram", "reason"),
    [
        (b"", "not_json"),
        (b"\x80", "not_json"),
        (b"[" * 5000, "not_json"),
        (b" " * (MAX_DATAGRAM + 1), "oversize"),
        (b"7", "not_an_object"),
        (_renewal(v=2), "version"),
        (_renewal(v=True), "version"),
        (_renewal(v=1.0), "version"),
        (_renewal(type="grant"), "type"),
        (_renewal(type=["renewal"]), "type"),
        (_renewal(extra=1), "fields"),
        (_renewal(token=None), "fields"),
        (_renewal(id="A" * 32), "id"),
        (_renewal(id=7), "id"),
        (_renewal(guard=""), "guard"),
        (_renewal(guard="g\u00e9"), "guard"),
        (_renewal(token="t" * 20000), "oversize"),
        (_renewal(token="t" * 12289), "token"),
        (_renewal(token="a\nb"), "token"),
        (
            json.dumps(
                {
                    "v": 1,
                    "type": "outcome",
                    "id": "0" * 32,
                    "extended": -1,
                    "held": 0,
                    "reason": None,
                }
            ).encode(),
            "extended",
        ),
        (
            json.dumps(
                {
                    "v": 1,
                    "type": "outcome",
                    "id": "0" * 32,
                    "extended": 0,
                    "held": True,
                    "reason": None,
                }
            ).encode(),
            "held",
        ),
        (
            json.dumps(
                {"v": 1, "type": "outcome", "id": "0" * 32, "extended": 0, "held": 0, "reason": 5}
            ).encode(),
            "reason",
        ),
    ],
)
def test_anything_else_is_malformed_with_a_reason(datagram: bytes, reason: str) -> None:
    with pytest.raises(MalformedDatagram) as raised:
        decode(datagram)
    assert raised.value.reason == reason
