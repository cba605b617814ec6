"""The pipeline file: what it accepts, and the YAML path every mistake is reported at."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ssegate.config.errors import ConfigError
from ssegate.pipeline.config import DEFAULT_TRIGGER, Trigger, load_pipeline, parse_pipeline

EXAMPLE = Path(__file__).parents[2] / "examples" / "pipeline" / "sensors.yaml"


def _example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return copy.deepcopy(data)


def test_the_example_pipeline_parses_with_paths_relative_to_its_file() -> None:
    pipeline = load_pipeline(EXAMPLE)
    assert set(pipeline.sinks) == {"readings", "events", "alerts", "alert_counts", "devices"}
    assert pipeline.sinks["devices"].compacted
    assert pipeline.sinks["devices"].key == "device"
    assert pipeline.sinks["events"].window is not None
    assert pipeline.checkpoint == EXAMPLE.parent / "../../.ssegate/checkpoints/sensors"
    assert pipeline.sources["readings"].generator is not None
    assert pipeline.sources["readings"].generator.silent_devices == 1


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        (lambda d: d["sinks"]["alerts"].update({"from": "nowhere"}), "sinks.alerts.from",
         "no source named 'nowhere'"),
        (lambda d: d["sinks"]["events"]["window"].update({"duration": "ten seconds"}),
         "sinks.events.window.duration", "not a duration"),
        (lambda d: d["sinks"]["alerts"].update({"topic": "no spaces allowed"}),
         "sinks.alerts.topic", "not a Kafka topic name"),
        (lambda d: d["sources"]["readings"].update({"kafka": {"topic": "raw"}}),
         "sources.readings", "exactly one of 'kafka' or 'generator'"),
        (lambda d: d["sources"]["readings"].pop("watermark"), "sources.readings",
         "'event_time' and 'watermark' go together"),
        (lambda d: d["sources"]["readings"]["generator"].update({"rate": 0}),
         "sources.readings.generator.rate", "at least 1"),
        (lambda d: d["sinks"]["devices"].update({"key": "device"}), "sinks.devices.key",
         "keyed by 'latest.key'"),
        (lambda d: d["sinks"]["events"].update({"latest": {"key": "device",
                                                            "silent_after": "1 second"}}),
         "sinks.events", "at most one of 'window' or 'latest'"),
        (lambda d: d["sinks"]["alerts"].update({"colour": "red"}), "sinks.alerts.colour",
         "unknown property"),
        (lambda d: d["sinks"]["alerts"].update({"trigger": "soon"}), "sinks.alerts.trigger",
         "is not a trigger"),
        (lambda d: d.update({"trigger": "real-time never"}), "trigger", "not a duration"),
        (lambda d: d["sources"]["readings"].update({"validate": "gpu"}),
         "sources.readings.validate", "expected python or jvm"),
    ],
)  # fmt: skip
def test_a_mistake_is_reported_at_its_yaml_path(edit: Any, path: str, words: str) -> None:
    data = _example()
    edit(data)
    with pytest.raises(ConfigError) as caught:
        parse_pipeline(data)
    assert caught.value.path == path
    assert words in caught.value.message


def test_a_window_over_a_source_without_event_time_is_refused() -> None:
    data = _example()
    source = data["sources"]["readings"]
    del source["event_time"], source["watermark"]
    data["sinks"] = {"events": data["sinks"]["events"]}
    with pytest.raises(ConfigError) as caught:
        parse_pipeline(data)
    assert caught.value.path == "sinks.events.window"


def test_triggers_are_the_pipeline_s_unless_a_sink_names_its_own() -> None:
    data = _example()
    data["trigger"] = "250 milliseconds"
    data["sinks"]["alerts"]["trigger"] = "continuous 1 second"
    data["sinks"]["readings"]["trigger"] = "real-time 5 seconds"
    data["sinks"]["events"]["trigger"] = "0 seconds"
    pipeline = parse_pipeline(data)
    assert pipeline.trigger == Trigger("interval", 0.25)
    assert pipeline.sinks["alerts"].trigger == Trigger("continuous", 1)
    assert pipeline.sinks["readings"].trigger == Trigger("real-time", 5)
    assert pipeline.sinks["events"].trigger == Trigger("interval", 0)
    assert pipeline.sinks["devices"].trigger is None
    assert parse_pipeline(_example()).trigger == DEFAULT_TRIGGER
