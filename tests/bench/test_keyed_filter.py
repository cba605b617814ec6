"""``ssegate bench keyed --filter``: each mode's gateway config and records, read as the gateway
reads them (config loader, sse-kafka filters, cache server transforms), without a broker."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from ssegate.bindings.kafka.transforms import build_transforms
from ssegate.bindings.sse_kafka.filters import FilterTemplate, MessageFilter
from ssegate.catalogs import build_catalogs
from ssegate.config.loader import load_config
from ssegate.kafka.topics import KafkaMessage
from ssegate_lab.bench.cli import add_bench_parser
from ssegate_lab.bench.held_streams import STAMPED_JSON
from ssegate_lab.bench.kafka_rig import Record, write_kafka_gateway_config
from ssegate_lab.bench.keyed_filter import (
    FILTERS,
    filter_routes,
    keyed_record,
    topic_options,
)

TOPIC = "bench-keyed-a"


def _gateway(tmp_path: Path, mode: str) -> tuple[MessageFilter, Any]:
    """The filter of the stream ``/<topic>/k7``, and a function giving a record as the cache
    server hands it on (after the topic's transforms, if any)."""
    ports = write_kafka_gateway_config(
        tmp_path, "127.0.0.1:9", [TOPIC], keyed=True,
        routes=filter_routes(mode), topic_options=topic_options(mode),
    )  # fmt: skip
    config = load_config(ports.config)
    [route] = config.bindings["north_sse_kafka_mapping"].routes
    assert route.with_ is not None
    template = FilterTemplate.compile(route.with_["filters"], "filters")
    assert template is not None
    stream = template.render({"topic": TOPIC, "key": "k7"}, None)
    topics = config.bindings["south_kafka_cache_server"].options.get("topics") or []
    transforms = build_transforms(topics, "topics", build_catalogs(config, str))

    def fetched(record: Record) -> KafkaMessage:
        message = KafkaMessage(TOPIC, record.partition or 0, 0, record.key, record.value,
                               record.headers)  # fmt: skip
        if TOPIC in transforms:
            message, unextracted = transforms[TOPIC].apply(message)
            assert unextracted == []
        return message

    return stream, fetched


@pytest.mark.parametrize("mode", FILTERS)
def test_each_filter_mode_delivers_a_stream_its_key_and_nothing_else(
    tmp_path: Path, mode: str
) -> None:
    stream, fetched = _gateway(tmp_path, mode)
    assert stream.matches(fetched(keyed_record(mode, b"k7", 123, 4, 1)))
    assert not stream.matches(fetched(keyed_record(mode, b"k8", 123, 4, 2)))
    # the warm-up's keys reach no stream
    assert not stream.matches(fetched(keyed_record(mode, b"w7", 123, 0, 1)))


def test_the_key_mode_is_the_rig_s_keyed_config_unchanged(tmp_path: Path) -> None:
    assert filter_routes("key") is None and topic_options("key") is None
    plain = write_kafka_gateway_config(tmp_path / "a", "127.0.0.1:9", [TOPIC], keyed=True)
    (tmp_path / "b").mkdir()
    moded = write_kafka_gateway_config(
        tmp_path / "b", "127.0.0.1:9", [TOPIC], keyed=True,
        routes=filter_routes("key"), topic_options=topic_options("key"),
    )  # fmt: skip
    ports = (plain.plain, plain.tls, moded.plain, moded.tls)
    texts = [p.config.read_text() for p in (plain, moded)]
    for port in ports:
        texts = [text.replace(str(port), "PORT") for text in texts]
    assert texts[0] == texts[1]
    assert keyed_record("key", b"k7", 123, 4, 1) == Record(b"k7", b'{"t":123,"n":4}')


def test_a_header_filter_keeps_the_key_and_filters_on_a_header_carrying_it(
    tmp_path: Path,
) -> None:
    record = keyed_record("header", b"k7", 123, 4, 1)
    assert record == Record(b"k7", b'{"t":123,"n":4}', (("k", b"k7"),))
    assert record.produce_options() == {"headers": [("k", b"k7")]}
    stream, _ = _gateway(tmp_path, "header")
    interest = stream.interest()  # what the cache indexes the stream by: the header alone
    assert interest is not None
    assert (interest.keys, interest.headers) == (frozenset(), {("k", b"k7")})


def test_an_extracted_record_carries_its_key_only_in_its_value_in_its_key_s_partition(
    tmp_path: Path,
) -> None:
    record = keyed_record("extracted", b"k7", 123, 4, 1)
    assert (record.key, record.headers, record.partition) == (None, (), 1)
    assert record.value == b'{"t":123,"n":4,"k":"k7"}'
    assert record.produce_options() == {"partition": 1}
    stamped = STAMPED_JSON.search(record.value)  # the load client reads it as any other
    assert stamped is not None and (stamped[1], stamped[2]) == (b"123", b"4")
    ports = write_kafka_gateway_config(
        tmp_path, "127.0.0.1:9", [TOPIC], topic_options=topic_options("extracted"),
        default_offset="live",
    )  # fmt: skip
    [entry] = load_config(ports.config).bindings["south_kafka_cache_server"].options["topics"]
    assert entry == {
        "name": TOPIC,
        "defaultOffset": "live",
        "transforms": [{"extract-headers": {"k": "${message.value.k}"}}],
    }


def test_an_unknown_filter_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="not a keyed filter"):
        filter_routes("value")
    with pytest.raises(ValueError, match="not a keyed filter"):
        keyed_record("value", b"k7", 123, 4, 1)


def test_the_cli_offers_every_filter_mode_and_defaults_to_the_key() -> None:
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers())
    assert parser.parse_args(["bench", "keyed"]).filter == "key"
    for mode in FILTERS:
        assert parser.parse_args(["bench", "keyed", "--filter", mode]).filter == mode
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "keyed", "--filter", "value"])
