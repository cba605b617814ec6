"""What the ``protobuf`` model costs: compiling a schema once, and checking each message.

:func:`protobuf_cost` builds the model from an inline catalog with two schemas, a 3-field
message and an 11-field one (a map of messages, a oneof, a nested message, an enum, a
``Timestamp``), and times :meth:`~ssegate.models.protobuf_model.ProtobufModel.compile` of a
text not compiled before and, per message, ``validate``, ``validate`` then ``to_text`` with
``view: json`` (as the Kafka path calls them), and ``validate`` of a message with a field the
schema lacks. Each figure is the median over ``runs`` (3) of the best of ``repeat`` (5)
timings; ``compile_cpu_ms`` is the CPU a compile takes, protoc's child process included.
Run it with ``python -m ssegate.models.cost``.
"""

from __future__ import annotations

import dataclasses
import itertools
import resource
import statistics
import time
import timeit
from collections.abc import Callable
from typing import Any

from google.protobuf.json_format import ParseDict

from ssegate.catalogs import CatalogSet, Schema, SchemaRef
from ssegate.catalogs.local import build_inline
from ssegate.models.protobuf_model import ProtobufModel
from ssegate.models.schemas import frame

SMALL = """syntax = "proto3";
package bench;
message Reading { string device = 1; double celsius = 2; int64 at = 3; }
"""
LARGE = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Shipment {
  string id = 1;
  double kilograms = 2;
  optional string label = 3;
  repeated sint32 checks = 4;
  map<string, Stop> stops = 5;
  oneof destination { string depot = 6; Position position = 7; }
  State state = 8;
  google.protobuf.Timestamp sent = 9;
  int64 sequence = 10;
  bytes signature = 11;
  message Stop { string town = 1; }
  enum State { STATE_UNKNOWN = 0; PACKED = 1; SENT = 2; }
}
message Position { sint64 lat = 1; sint64 lon = 2; }
"""
VALUES: dict[str, tuple[str, dict[str, Any]]] = {
    "small": ("Reading", {"device": "d1", "celsius": 21.5, "at": 1_700_000_000}),
    "large": (
        "Shipment",
        {
            "id": "s-7",
            "kilograms": 19.25,
            "label": "fragile",
            "checks": [3, -4, 5],
            "stops": {"first": {"town": "Lyon"}, "last": {"town": "Metz"}},
            "position": {"lat": "45", "lon": "-3"},
            "state": "SENT",
            "sent": "2024-02-29T08:00:00Z",
            "sequence": "123456789",
            "signature": "q80=",
        },
    ),
}
SERIAL = itertools.count()
UNKNOWN_FIELD = b"\x60\x01"
"""Field 12 as a varint: neither message declares it."""


def protobuf_cost(
    runs: int = 3, number: int = 2000, repeat: int = 5
) -> dict[str, dict[str, float]]:
    """``{"compile_ms": {"small": .., "large": ..}, "validate_us": {..}, ...}``: per figure,
    the median over ``runs`` of the best of ``repeat`` timings of ``number`` calls (5 for
    ``compile``)."""
    subjects = {"small": {"schema": SMALL}, "large": {"schema": LARGE}}
    catalogs = CatalogSet({"local": build_inline("local", {"subjects": subjects}, "bench")})
    results: dict[str, dict[str, float]] = {}
    for schema_id, name in enumerate(("small", "large"), start=1):
        spec = {"model": "protobuf", "view": "json", "catalog": {"local": [{"subject": name}]}}
        model = ProtobufModel(spec, "bench", catalogs)
        schema = catalogs.resolve("local", SchemaRef(subject=name))
        message, value = VALUES[name]
        body = ParseDict(value, model.schemas.configured.by_name[message].new()).SerializeToString()
        valid = frame(schema_id, b"\x00" + body)
        for figure, cost in _costs(model, schema, valid, (runs, number, repeat)).items():
            results.setdefault(figure, {})[name] = cost
    return results


def fresh(schema: Schema) -> Schema:
    """``schema`` with a comment no other text has, so it is compiled, not found compiled."""
    return dataclasses.replace(schema, text=f"{schema.text}// {next(SERIAL)}\n")


def _costs(
    model: ProtobufModel, schema: Schema, valid: bytes, plan: tuple[int, int, int]
) -> dict[str, float]:
    runs, number, repeat = plan
    invalid = valid + UNKNOWN_FIELD
    if model.validate(valid) is not None or model.validate(invalid) is None:
        raise AssertionError("the bench messages are not what they should be")

    def shown() -> None:
        model.validate(valid)
        model.to_text(valid)

    timings: dict[str, tuple[Callable[[], object], int, float]] = {
        "compile_ms": (lambda: model.compile(fresh(schema)), 5, 1e3),
        "validate_us": (lambda: model.validate(valid), number, 1e6),
        "validate_json_us": (shown, number // 4, 1e6),
        "invalid_us": (lambda: model.validate(invalid), number // 4, 1e6),
    }
    costs: dict[str, float] = {}
    for figure, (call, count, unit) in timings.items():
        bests = [min(timeit.repeat(call, repeat=repeat, number=count)) / count for _ in range(runs)]
        costs[figure] = round(statistics.median(bests) * unit, 2)
    cpu = [_cpu_seconds(lambda: model.compile(fresh(schema)), 5) for _ in range(runs)]
    costs["compile_cpu_ms"] = round(statistics.median(cpu) * 1e3, 2)
    return costs


def _cpu_seconds(call: Callable[[], object], count: int) -> float:
    """CPU seconds per call, this process's and its children's (protoc)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.process_time()
    for _ in range(count):
        call()
    ours = time.process_time() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    theirs = after.ru_utime - children.ru_utime + after.ru_stime - children.ru_stime
    return (ours + theirs) / count


if __name__ == "__main__":
    import json

    print(json.dumps(protobuf_cost(), indent=2))
