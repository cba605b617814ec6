"""A pipeline stopped the normal way (SIGTERM, as ``./run demo`` and Ctrl-C do) stops cleanly.

The dashboard test's pipeline runs as ``./run demo`` runs its own (``ssegate pipeline run`` with
a trigger interval, in a child process) until it has written a few micro-batches to its own
topics; then SIGTERM. Its queries must end between two micro-batches (nothing cancelled), then
Spark, with status 0, and its log must hold no Python traceback and no Java exception or stack
frame, only the line that says it stopped.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from ssegate_lab.broker import BrokerInfo
from ssegate_lab.demo import start_pipeline, wait_for_message

from .records import unique

PIPELINE = Path(__file__).parents[1] / "dashboard" / "sensors.yaml"
STACK_TRACE = re.compile(
    r"Traceback \(most recent call last\)"  # Python
    r"|^\s+at [\w$.<>]+\(.*\)$"  # a Java stack frame
    r"|^Caused by: "
    r"|^[\w$.]+(Exception|Error)\b"  # a Java exception's first line
    r"| ERROR ",  # Spark's log lines at level ERROR
    re.MULTILINE,
)


@pytest.mark.timeout(240)
def test_a_stopped_pipeline_ends_between_micro_batches_and_logs_no_stack_trace(
    kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    data: dict[str, Any] = yaml.safe_load(PIPELINE.read_text())
    for sink in data["sinks"].values():  # topics of its own: other tests read the usual ones
        sink["topic"] = unique(sink["topic"])
    data["sources"]["readings"]["dead_letter"] = unique("dead")
    config = tmp_path / "sensors.yaml"
    config.write_text(yaml.safe_dump(data))
    log_path = tmp_path / "pipeline.log"
    with open(log_path, "wb") as log:
        pipeline = start_pipeline(config, kafka_broker.bootstrap, tmp_path / "checkpoints", log)
    try:
        # Windows are written one micro-batch after the readings they hold: both have run.
        for sink in ("devices", "events"):
            wait_for_message(kafka_broker.bootstrap, data["sinks"][sink]["topic"], pipeline, 150)
        pipeline.send_signal(signal.SIGTERM)
        status = pipeline.wait(timeout=60)
    finally:
        if pipeline.poll() is None:
            pipeline.kill()
            pipeline.wait()
    text = log_path.read_text(errors="replace")
    assert status == 0, text[-3000:]
    assert f"ssegate: pipeline {data['name']} stopped" in text
    found = STACK_TRACE.search(text)
    assert found is None, text[max(0, found.start() - 500) : found.end() + 2000]
