"""What each stream of ``ssegate bench keyed`` filters on, and how its records carry it.

Every stream ``/<topic>/k<i>`` wants the records of its own key ``k<i>``; ``--filter`` says
where a record carries that key and what the stream's filter reads:

- ``key`` (the default): the Kafka key; each stream filters on it (``filters: [{key: k<i>}]``);
- ``header``: the Kafka key, and the same bytes again in the header :data:`HEADER`; each stream
  filters on the header (``filters: [{headers: {k: k<i>}}]``);
- ``extracted``: only a field of the value (``{"t":…,"n":…,"k":"k<i>"}``), with no Kafka key
  and no header; the cache server's ``topics[].transforms`` extract the header :data:`HEADER`
  from it (``extract-headers: {k: ${message.value.k}}``) and each stream filters on the header
  as in ``header``. With no key to partition by, a record goes to the partition of its key's
  number (``i % partitions``), so each key's records stay in one partition, in order.

So ``header`` against ``key`` measures a header filter, and ``extracted`` against ``header`` what
a transform adds to one. The value the streams read is the same JSON text in every mode (with
the field ``k`` in ``extracted``), so every mode is checked alike.
"""

from __future__ import annotations

from ssegate_lab.bench.kafka_rig import Record

FILTERS = ("key", "header", "extracted")
"""What a stream filters on: the Kafka key, a produced header, a header extracted from the
value."""
HEADER = "k"
"""The header name (and, in ``extracted``, the value's field) that carries the key."""


def check_filter(mode: str) -> None:
    """Refuse a mode that is not one of :data:`FILTERS`."""
    if mode not in FILTERS:
        raise ValueError(f"{mode!r} is not a keyed filter ({', '.join(FILTERS)})")


def filter_routes(mode: str) -> str | None:
    """The sse-kafka routes for ``mode`` (YAML under ``routes:``); ``None`` for ``key``: the
    bench rig's own keyed route."""
    check_filter(mode)
    if mode == "key":
        return None
    return (
        "      - when:\n          - path: /{topic}/{key}\n"
        "        exit: north_kafka_cache_client\n        with:\n"
        "          topic: ${params.topic}\n          filters:\n"
        f"            - headers:\n                {HEADER}: ${{params.key}}\n"
    )


def topic_options(mode: str) -> dict[str, object] | None:
    """What the cache server's ``topics[]`` entry adds for ``mode``: the transform for
    ``extracted``, nothing otherwise."""
    check_filter(mode)
    if mode != "extracted":
        return None
    return {"transforms": [{"extract-headers": {HEADER: f"${{message.value.{HEADER}}}"}}]}


def keyed_record(mode: str, key: bytes, stamp: int, number: int, partition: int) -> Record:
    """The record of key ``key`` produced at ``stamp`` with that key's sequence ``number``;
    ``partition`` is where it goes in ``extracted`` (the producer's partitioner places the
    others by their key)."""
    if mode == "key":
        return Record(key, b'{"t":%d,"n":%d}' % (stamp, number))
    if mode == "header":
        return Record(key, b'{"t":%d,"n":%d}' % (stamp, number), ((HEADER, key),))
    check_filter(mode)
    value = b'{"t":%d,"n":%d,"%s":"%s"}' % (stamp, number, HEADER.encode(), key)
    return Record(None, value, partition=partition)
