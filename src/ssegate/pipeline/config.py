"""The pipeline file: parsed and checked into plain values, every problem naming its YAML path.

A pipeline file declares where records come from, how they are checked and what goes out::

    name: sensors
    catalogs: {...}                     # as in zilla.yaml; what source models name
    bootstrap: 127.0.0.1:9092           # Kafka of every source and sink (--bootstrap overrides)
    checkpoint: .ssegate/checkpoints/sensors   # relative to the file (--checkpoint overrides)
    trigger: 100 milliseconds           # every query's trigger (--trigger overrides); below
    sources:
      readings:
        kafka: {topic: sensors.raw, starting_offsets: earliest}
        # or generator: {shape: sensors, rate: 200, devices: 12, tenants: [acme, globex]}
        model: {model: json, catalog: {sensors: [{subject: reading}]}}  # as in zilla.yaml
        fields: "device STRING, tenant STRING, temperature DOUBLE, ts TIMESTAMP"
        event_time: ts
        watermark: 5 seconds
        dead_letter: sensors.dead-letter
        validate: python                # or jvm: Spark expressions from the schema
    sinks:
      alerts:
        from: readings
        where: temperature > 30              # Spark SQL, before any aggregation
        window: {...} | latest: {...}        # optional, at most one
        select: {device: device, celsius: temperature}   # the JSON value's fields
        topic: alerts
        key: device
        headers: {tenant: tenant}
        trigger: real-time 5 minutes         # this sink's query only

A trigger is ``N seconds`` (any duration: one micro-batch per interval, 100 ms by default;
``0 seconds`` starts the next one as soon as the last ends), ``available-now`` (what the sources
hold, then stop), ``continuous N seconds`` (Spark's continuous processing, checkpointing every
N seconds) or ``real-time N seconds`` (Spark's real-time mode, batches of N seconds whose records
are written as they come). Spark refuses the last two for queries they cannot run
(aggregations, ``latest``); :mod:`ssegate.pipeline.job` says which query.

Nothing here imports Spark: SQL expressions are checked when the job is built
(:mod:`ssegate.pipeline.job`), which reports them with the same paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.config.yaml_reader import load_yaml_text, read_text

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_DURATION = re.compile(r"^\s*(\d+)\s*(millisecond|second|minute|hour|day)s?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"millisecond": 0.001, "second": 1, "minute": 60, "hour": 3600, "day": 86400}
_ZERO = re.compile(r"^\s*0+\s*(millisecond|second|minute|hour|day)s?\s*$", re.IGNORECASE)
TRIGGER_KINDS = ("interval", "available-now", "continuous", "real-time")
SHAPES = ("sensors",)


@dataclass(frozen=True)
class KafkaInput:
    topic: str
    starting_offsets: str = "earliest"
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Generator:
    """Synthetic records from Spark's ``rate`` source; ``shape`` says what they look like."""

    shape: str = "sensors"
    rate: int = 100
    devices: int = 10
    tenants: tuple[str, ...] = ("acme", "globex")
    invalid_ratio: float = 0.0
    silent_devices: int = 0
    silent_after: str = "60 seconds"
    day: str = "4 minutes"


@dataclass(frozen=True)
class Trigger:
    """When a query runs its next batch: ``kind`` is one of :data:`TRIGGER_KINDS`; ``seconds``
    the interval (``interval``: 0 for back to back), or the checkpoint interval (``continuous``)
    or batch duration (``real-time``)."""

    kind: str = "interval"
    seconds: float = 0.0


DEFAULT_TRIGGER = Trigger("interval", 0.1)
"""A micro-batch every 100 ms: at 1,000 records/s it measured a lower p99 than back to back
(which keeps polling Kafka and costs more CPU) and, unlike the continuous and real-time
modes, it runs every kind of sink (docs/pipeline.md, Performance)."""


@dataclass(frozen=True)
class Source:
    name: str
    kafka: KafkaInput | None
    generator: Generator | None
    model: Mapping[str, Any] | None
    fields: str
    event_time: str | None
    watermark: str | None
    dead_letter: str | None
    validate: str = "python"
    """Where records are checked: ``python`` (the model, in an Arrow UDF) or ``jvm`` (Spark
    expressions derived from the model, where they can say what it says)."""


VALIDATE_IN = ("python", "jvm")


@dataclass(frozen=True)
class Window:
    duration: str
    slide: str | None
    group_by: tuple[str, ...]
    aggregates: Mapping[str, str]


@dataclass(frozen=True)
class Latest:
    """The latest record per key; a tombstone once a key has been silent for ``silent_after``."""

    key: str
    silent_after: str


@dataclass(frozen=True)
class Sink:
    name: str
    source: str
    where: str | None
    window: Window | None
    latest: Latest | None
    select: Mapping[str, str] | None
    topic: str
    key: str | None
    headers: Mapping[str, str]
    compacted: bool
    partitions: int
    trigger: Trigger | None = None
    """This sink's own trigger, else the pipeline's."""


@dataclass(frozen=True)
class Pipeline:
    name: str
    bootstrap: str
    checkpoint: Path
    sources: Mapping[str, Source]
    sinks: Mapping[str, Sink]
    catalogs: Mapping[str, Component] = field(default_factory=dict)
    base: Path = Path()
    """The pipeline file's folder: what relative paths (filesystem catalogs) start from."""
    trigger: Trigger = DEFAULT_TRIGGER


def load_pipeline(path: str | Path) -> Pipeline:
    """Read and check a pipeline file; relative paths in it are relative to the file."""
    path = Path(path)
    text = read_text(str(path), "pipeline file")
    data = load_yaml_text(text, str(path), "pipeline file")
    return parse_pipeline(data, base=path.parent)


def parse_pipeline(data: object, base: Path = Path()) -> Pipeline:
    top = _mapping(data, "")
    _only(top, "", {"name", "catalogs", "bootstrap", "checkpoint", "sources", "sinks", "trigger"})
    name = _name(top.get("name"), "name")
    bootstrap = _text(top.get("bootstrap", "127.0.0.1:9092"), "bootstrap")
    checkpoint = base / _text(top.get("checkpoint", f".ssegate/checkpoints/{name}"), "checkpoint")
    raw_sources = _mapping(top.get("sources"), "sources")
    if not raw_sources:
        raise ConfigError("sources", "declare at least one source")
    sources = {
        _name(key, f"sources.{key}"): _source(str(key), value, f"sources.{key}")
        for key, value in raw_sources.items()
    }
    raw_sinks = _mapping(top.get("sinks"), "sinks")
    sinks = {
        _name(key, f"sinks.{key}"): _sink(str(key), value, f"sinks.{key}", sources)
        for key, value in raw_sinks.items()
    }
    if not sinks and not any(source.dead_letter for source in sources.values()):
        raise ConfigError("sinks", "declare at least one sink")
    catalogs = {
        _name(key, f"catalogs.{key}"): _catalog(str(key), value, f"catalogs.{key}")
        for key, value in _mapping(top.get("catalogs", {}), "catalogs").items()
    }
    trigger = parse_trigger(top["trigger"], "trigger") if "trigger" in top else DEFAULT_TRIGGER
    return Pipeline(name, bootstrap, checkpoint, sources, sinks, catalogs, base, trigger)


def parse_trigger(value: object, path: str) -> Trigger:
    """``0 seconds``, ``500 milliseconds``, ``available-now``, ``continuous 1 second``,
    ``real-time 5 minutes``."""
    text = _text(value, path).strip()
    if text == "available-now":
        return Trigger("available-now")
    for kind in ("continuous", "real-time"):
        if text.startswith(kind + " "):
            return Trigger(kind, duration_seconds(_duration(text[len(kind) :], path)))
    if _ZERO.match(text):
        return Trigger("interval", 0.0)
    if not _DURATION.match(text):
        raise ConfigError(
            path,
            f"{text!r} is not a trigger: a duration ('500 milliseconds', '0 seconds'),"
            " 'available-now', 'continuous <duration>' or 'real-time <duration>'",
        )
    return Trigger("interval", duration_seconds(_duration(text, path)))


def _catalog(name: str, data: object, path: str) -> Component:
    raw = _mapping(data, path)
    _only(raw, path, {"type", "options"})
    kind = _text(raw.get("type"), f"{path}.type")
    return Component(name, kind, _mapping(raw.get("options", {}), f"{path}.options"), path)


def duration_seconds(text: str) -> float:
    """``"10 seconds"`` → ``10.0``; the text was checked by :func:`parse_pipeline`."""
    match = _DURATION.match(text)
    assert match is not None
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]


def _source(name: str, data: object, path: str) -> Source:
    raw = _mapping(data, path)
    _only(raw, path, {"kafka", "generator", "model", "fields", "event_time", "watermark",
                      "dead_letter", "validate"})  # fmt: skip
    kafka = generator = None
    if ("kafka" in raw) == ("generator" in raw):
        raise ConfigError(path, "declare exactly one of 'kafka' or 'generator'")
    if "kafka" in raw:
        kafka = _kafka_input(raw["kafka"], f"{path}.kafka")
    else:
        generator = _generator(raw["generator"], f"{path}.generator")
    model = raw.get("model")
    if isinstance(model, str):
        model = {"model": model}
    if model is not None:
        model = _mapping(model, f"{path}.model")
        if not isinstance(model.get("model"), str):
            raise ConfigError(f"{path}.model.model", "name the model: json, avro or string")
    fields = _text(raw.get("fields"), f"{path}.fields")
    event_time = _optional_text(raw.get("event_time"), f"{path}.event_time")
    watermark = _optional_duration(raw.get("watermark"), f"{path}.watermark")
    if (event_time is None) != (watermark is None):
        raise ConfigError(path, "'event_time' and 'watermark' go together")
    dead_letter = _optional_topic(raw.get("dead_letter"), f"{path}.dead_letter")
    validate = _text(raw.get("validate", "python"), f"{path}.validate")
    if validate not in VALIDATE_IN:
        raise ConfigError(f"{path}.validate", "expected python or jvm")
    return Source(
        name, kafka, generator, model, fields, event_time, watermark, dead_letter, validate
    )


def _kafka_input(data: object, path: str) -> KafkaInput:
    raw = _mapping(data, path)
    _only(raw, path, {"topic", "starting_offsets", "options"})
    topic = _topic(raw.get("topic"), f"{path}.topic")
    offsets = _text(raw.get("starting_offsets", "earliest"), f"{path}.starting_offsets")
    if offsets not in ("earliest", "latest") and not offsets.lstrip().startswith("{"):
        raise ConfigError(
            f"{path}.starting_offsets",
            "expected earliest, latest or Spark's JSON of offsets per partition",
        )
    options = _mapping(raw.get("options", {}), f"{path}.options")
    return KafkaInput(topic, offsets, {str(k): str(v) for k, v in options.items()})


def _generator(data: object, path: str) -> Generator:
    raw = _mapping(data, path)
    _only(raw, path, {"shape", "rate", "devices", "tenants", "invalid_ratio", "silent_devices",
                      "silent_after", "day"})  # fmt: skip
    shape = _text(raw.get("shape", "sensors"), f"{path}.shape")
    if shape not in SHAPES:
        raise ConfigError(f"{path}.shape", f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    rate = _whole(raw.get("rate", 100), f"{path}.rate", minimum=1)
    devices = _whole(raw.get("devices", 10), f"{path}.devices", minimum=1)
    tenants = raw.get("tenants", ["acme", "globex"])
    if (
        not isinstance(tenants, list)
        or not tenants
        or not all(isinstance(t, str) and t for t in tenants)
    ):
        raise ConfigError(f"{path}.tenants", "expected a list of tenant names")
    ratio = raw.get("invalid_ratio", 0.0)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
        raise ConfigError(f"{path}.invalid_ratio", "expected a number from 0 to 1")
    silent = _whole(raw.get("silent_devices", 0), f"{path}.silent_devices", minimum=0)
    if silent > devices:
        raise ConfigError(f"{path}.silent_devices", f"more than the {devices} devices")
    silent_after = _duration(raw.get("silent_after", "60 seconds"), f"{path}.silent_after")
    day = _duration(raw.get("day", "4 minutes"), f"{path}.day")
    return Generator(shape, rate, devices, tuple(tenants), float(ratio), silent, silent_after, day)


def _sink(name: str, data: object, path: str, sources: Mapping[str, Source]) -> Sink:
    raw = _mapping(data, path)
    _only(raw, path, {"from", "where", "window", "latest", "select", "topic", "key", "headers",
                      "compacted", "partitions", "trigger"})  # fmt: skip
    source_name = _text(raw.get("from"), f"{path}.from")
    if source_name not in sources:
        raise ConfigError(f"{path}.from", f"no source named {source_name!r}")
    source = sources[source_name]
    if "window" in raw and "latest" in raw:
        raise ConfigError(path, "declare at most one of 'window' or 'latest'")
    window = _window(raw["window"], f"{path}.window") if "window" in raw else None
    latest = _latest(raw["latest"], f"{path}.latest") if "latest" in raw else None
    if (window or latest) and source.event_time is None:
        kind = "window" if window else "latest"
        raise ConfigError(
            f"{path}.{kind}", f"source {source_name!r} needs 'event_time' and 'watermark'"
        )
    select = None
    if "select" in raw:
        select = _expressions(raw["select"], f"{path}.select")
        if not select:
            raise ConfigError(f"{path}.select", "select at least one field")
    compacted = raw.get("compacted", False)
    if not isinstance(compacted, bool):
        raise ConfigError(f"{path}.compacted", "expected true or false")
    if latest is not None and raw.get("key") is not None:
        raise ConfigError(f"{path}.key", "a 'latest' sink is keyed by 'latest.key'")
    return Sink(
        name=name,
        source=source_name,
        where=_optional_text(raw.get("where"), f"{path}.where"),
        window=window,
        latest=latest,
        select=select,
        topic=_topic(raw.get("topic"), f"{path}.topic"),
        key=latest.key if latest else _optional_text(raw.get("key"), f"{path}.key"),
        headers=_expressions(raw.get("headers", {}), f"{path}.headers"),
        compacted=compacted,
        partitions=_whole(raw.get("partitions", 1), f"{path}.partitions", minimum=1),
        trigger=parse_trigger(raw["trigger"], f"{path}.trigger") if "trigger" in raw else None,
    )


def _window(data: object, path: str) -> Window:
    raw = _mapping(data, path)
    _only(raw, path, {"duration", "slide", "group_by", "aggregates"})
    group_by = raw.get("group_by", [])
    if isinstance(group_by, str):
        group_by = [group_by]
    if not isinstance(group_by, list) or not all(isinstance(g, str) and g for g in group_by):
        raise ConfigError(f"{path}.group_by", "expected a list of expressions")
    aggregates = _expressions(raw.get("aggregates"), f"{path}.aggregates")
    if not aggregates:
        raise ConfigError(f"{path}.aggregates", "declare at least one aggregate")
    return Window(
        duration=_duration(raw.get("duration"), f"{path}.duration"),
        slide=_optional_duration(raw.get("slide"), f"{path}.slide"),
        group_by=tuple(group_by),
        aggregates=aggregates,
    )


def _latest(data: object, path: str) -> Latest:
    raw = _mapping(data, path)
    _only(raw, path, {"key", "silent_after"})
    return Latest(
        key=_text(raw.get("key"), f"{path}.key"),
        silent_after=_duration(raw.get("silent_after"), f"{path}.silent_after"),
    )


def _mapping(value: object, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(path, f"expected a mapping, got {_kind(value)}")
    return {str(k): v for k, v in value.items()}


def _only(raw: Mapping[str, Any], path: str, allowed: set[str]) -> None:
    for key in raw:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise ConfigError(
                where, f"unknown property; expected one of {', '.join(sorted(allowed))}"
            )


def _expressions(value: object, path: str) -> dict[str, str]:
    if isinstance(value, list):
        value = {str(item): item for item in value}
    raw = _mapping(value, path)
    return {_name(k, f"{path}.{k}"): _text(v, f"{path}.{k}") for k, v in raw.items()}


def _name(value: object, path: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ConfigError(path, "expected a name of letters, digits, '_' and '-'")
    return value


def _text(value: object, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float) or value == "":
        raise ConfigError(path, f"expected a non-empty string, got {_kind(value)}")
    return str(value)


def _optional_text(value: object, path: str) -> str | None:
    return None if value is None else _text(value, path)


def _topic(value: object, path: str) -> str:
    text = _text(value, path)
    if not _TOPIC.match(text):
        raise ConfigError(path, f"{text!r} is not a Kafka topic name")
    return text


def _optional_topic(value: object, path: str) -> str | None:
    return None if value is None else _topic(value, path)


def _duration(value: object, path: str) -> str:
    text = _text(value, path)
    if not _DURATION.match(text) or duration_seconds(text) <= 0:
        raise ConfigError(path, f"{text!r} is not a duration like '10 seconds'")
    return text.strip()


def _optional_duration(value: object, path: str) -> str | None:
    return None if value is None else _duration(value, path)


def _whole(value: object, path: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(path, f"expected a whole number of at least {minimum}")
    return value


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__
