"""`./run`'s setup step: what each step reports; tests find its artifacts and never fetch them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ssegate.cache import NotPrepared
from ssegate_lab.setup_tools import STEPS, SetupFailed, Step, prepared, run_step, size_of, steps_for


def test_test_is_every_step_and_demo_only_the_kafka_and_spark_jars() -> None:
    assert [step.name for step in steps_for([])] == list(STEPS)
    assert [step.name for step in steps_for(["demo"])] == ["kafka", "spark-connector"]
    assert [step.name for step in steps_for(["registry", "demo", "registry"])] == [
        "registry",
        "kafka",
        "spark-connector",
    ]


@pytest.mark.parametrize("name", list(STEPS))
def test_in_an_empty_cache_every_step_is_missing_and_named_without_fetching(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSEGATE_CACHE", str(tmp_path))
    with pytest.raises((NotPrepared, SetupFailed)) as missing:
        prepared(name)
    message = str(missing.value)
    assert f"is missing (looked in {tmp_path}/" in message
    assert message.endswith(f"run ./run test or ./run setup (setup step '{name}')")
    assert sorted(tmp_path.iterdir()) == []  # nothing was fetched, built or even prepared


def test_a_present_artifact_is_reported_with_its_size_and_not_fetched_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = tmp_path / "tool"
    artifact.write_bytes(b"x" * 3000)
    calls: list[str] = []

    def ensure() -> Path:
        calls.append("ensure")
        return artifact

    assert run_step(Step("tool", "a tool", ensure))
    assert capsys.readouterr().err == f"==> setup tool: present, 2.9K in {artifact}\n"
    assert calls == ["ensure"]  # once, offline: found


def test_a_failed_step_says_why_and_counts_as_failed(capsys: pytest.CaptureFixture[str]) -> None:
    def ensure() -> Path:
        raise SetupFailed("no network")

    assert not run_step(Step("tool", "a tool from afar", ensure))
    assert capsys.readouterr().err.splitlines() == [
        "==> setup tool: fetching a tool from afar",
        "==> setup tool: FAILED: no network",
    ]


def test_sizes_read_like_du(tmp_path: Path) -> None:
    sizes = []
    for count in (5, 2048, 15 * 1024**2, 3 * 1024**3):
        sparse = tmp_path / f"file-{count}"
        with open(sparse, "wb") as file:
            file.truncate(count)
        sizes.append(size_of(sparse))
    assert sizes == ["5B", "2.0K", "15M", "3.0G"]
    assert size_of(tmp_path) == "3.0G"


def test_an_unknown_step_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ssegate_lab.setup_tools", "no-such-step"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "no step no-such-step; the steps are test, demo, kafka" in done.stderr
