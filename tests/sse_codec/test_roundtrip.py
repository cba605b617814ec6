"""Property tests: what the encoder writes, the parser reads back, however the bytes arrive."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from ssegate.sse_codec.encoder import encode_comment, encode_event, encode_retry
from ssegate.sse_codec.parser import SseEvent, SseIdOnly, SseParser

Item = SseEvent | SseIdOnly

_any_char = st.characters(codec="utf-8")
_tricky = st.sampled_from(["\r", "\n", "\r\n", " ", "  ", ":", "\x00", "\ufeff", "é", "😀"])
_data = st.lists(st.one_of(_tricky, st.text(_any_char, max_size=8)), max_size=12).map("".join)
_line_value = st.lists(st.one_of(_tricky, st.text(_any_char, max_size=8)), max_size=6).map(
    lambda parts: "".join(parts).replace("\r", "").replace("\n", "")
)
_event_type = _line_value
_id = _line_value.map(lambda s: s.replace("\x00", ""))


def _normalised(data: str) -> str:
    return data.replace("\r\n", "\n").replace("\r", "\n")


@given(data=_data, event=st.none() | _event_type, id=st.none() | _id)
def test_encoded_event_parses_back_with_cr_and_crlf_in_data_normalised_to_lf(
    data: str, event: str | None, id: str | None
) -> None:
    parser = SseParser()
    items = parser.feed(encode_event(data, event=event, id=id))
    assert items == [SseEvent(event or "message", _normalised(data), id or "")]
    assert parser.last_event_id == (id or "")


@dataclass(frozen=True)
class Block:
    """One thing written to a stream: an event, an id-only block, a comment or a retry."""

    kind: str
    data: str | None = None
    event: str | None = None
    id: str | None = None
    retry: int = 0


_blocks = st.one_of(
    st.builds(
        Block,
        kind=st.just("event"),
        data=_data,
        event=st.none() | _event_type,
        id=st.none() | _id,
    ),
    st.builds(Block, kind=st.just("id"), id=_id),
    st.builds(Block, kind=st.just("comment"), data=_data),
    st.builds(Block, kind=st.just("retry"), retry=st.integers(0, 10**9)),
)


def _write(blocks: list[Block]) -> bytes:
    out = []
    for block in blocks:
        if block.kind == "event":
            out.append(encode_event(block.data, event=block.event, id=block.id))
        elif block.kind == "id":
            out.append(encode_event(None, id=block.id))
        elif block.kind == "comment":
            out.append(encode_comment(block.data or ""))
        else:
            out.append(encode_retry(block.retry))
    return b"".join(out)


def _expected(blocks: list[Block]) -> tuple[list[Item], str, int | None]:
    items: list[Item] = []
    last_id = ""
    retry = None
    for block in blocks:
        if block.kind == "event":
            if block.id is not None:
                last_id = block.id
            data = _normalised(block.data or "")
            items.append(SseEvent(block.event or "message", data, last_id))
        elif block.kind == "id" and block.id != last_id:
            last_id = block.id or ""
            items.append(SseIdOnly(last_id))
        elif block.kind == "retry":
            retry = block.retry
    return items, last_id, retry


def _parse(chunks: list[bytes]) -> tuple[list[Item], str, int | None]:
    parser = SseParser()
    items: list[Item] = []
    for chunk in chunks:
        items += parser.feed(chunk)
    parser.close()
    return items, parser.last_event_id, parser.retry


@settings(max_examples=300)
@given(blocks=st.lists(_blocks, max_size=12), cuts=st.data())
def test_any_chunking_of_an_encoded_stream_gives_the_same_events(
    blocks: list[Block], cuts: st.DataObject
) -> None:
    wire = _write(blocks)
    points = sorted(cuts.draw(st.lists(st.integers(0, len(wire)), max_size=20), label="cuts"))
    chunks = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    assert _parse(chunks) == _parse([wire]) == _expected(blocks)


@given(blocks=st.lists(_blocks, max_size=6))
def test_byte_by_byte_feeding_of_an_encoded_stream_gives_the_same_events(
    blocks: list[Block],
) -> None:
    wire = _write(blocks)
    assert _parse([wire[i : i + 1] for i in range(len(wire))]) == _expected(blocks)
