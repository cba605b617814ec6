"""``ssegate bench all``: each step in its own bounded process, then one summary with targets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ssegate.cli import main
from ssegate_lab.bench.suite import registered_scenarios, run_suite, step_argv
from ssegate_lab.bench.suite_steps import PROFILES, Step, idle_figures, static_figures


def test_all_runs_two_cheap_steps_and_writes_the_summary_with_their_figures(
    tmp_path: Path,
) -> None:
    argv = ["bench", "all", "--profile", "tiny", "--only", "static,idle"]
    assert main([*argv, "--out-dir", str(tmp_path)]) == 0
    [summary_file] = tmp_path.glob("all-*.json")
    summary = json.loads(summary_file.read_text())
    assert [step["name"] for step in summary["steps"]] == ["static", "idle"]
    for step in summary["steps"]:
        assert step["status"] == "ok" and step["seconds"] > 0
        assert (tmp_path / step["result_file"]).is_file()
    static, idle = (step["headlines"] for step in summary["steps"])
    assert static["http1_plain_rps"] > 0 and static["h2_tls_rps"] > 0
    assert idle["plain_opened"] == idle["plain_held_by_gateway"] == 10_000
    assert idle["tls_opened"] == 20
    assert isinstance(idle["plain_bytes_per_connection"], int)

    targets = {verdict["target"]: verdict for verdict in summary["targets"]}
    plain = targets["RSS per idle plain connection ≤ 4 KiB"]
    # tiny runs every step once: the figure is shown, but one run is no verdict
    assert plain["status"] == "not measured" and "KiB" in plain["measured"]
    assert "a verdict takes the median of 3" in plain["note"]
    tls = targets["RSS per idle TLS connection ≤ 30 KiB"]
    assert tls["status"] == "not measured" and "at 20 connections" in tls["note"]
    assert targets["≥ 100,000 idle connections held by one gateway process"]["status"] == (
        "not measured"
    )
    not_run = targets["p99 ≤ 50 ms at that load"]
    assert not_run["status"] == "not measured" and "not in this profile" in not_run["note"]

    page = summary_file.with_suffix(".md").read_text()
    assert "| static | ok |" in page and "| idle | ok |" in page
    assert f"| {plain['target']} | {plain['measured']} | not measured |" in page
    assert f"| idle | plain_bytes_per_connection | {idle['plain_bytes_per_connection']:,} |" in page


def test_a_step_past_its_timeout_is_stopped_with_its_processes_and_the_next_still_runs(
    tmp_path: Path,
) -> None:
    slow = Step("slow", "static", ("--duration", "60", "--connections", "2"), 4.0, static_figures)
    missing = Step("missing", "no-such-scenario", (), 10.0, static_figures)
    idle = Step("idle", "idle", ("--connections", "20", "--tls-connections", "0"), 60, idle_figures)
    summary = run_suite((slow, missing, idle), "test", 300.0, tmp_path)
    records = {step["name"]: step for step in summary["steps"]}
    assert records["slow"]["status"] == "timed_out"
    assert records["slow"]["seconds"] < 4.0 + 25
    with pytest.raises(ProcessLookupError):
        os.killpg(records["slow"]["pid"], 0)  # nothing of its process group is left
    assert records["missing"]["status"] == "not available"
    assert records["idle"]["status"] == "ok"
    assert records["idle"]["headlines"]["plain_opened"] == 20


def test_every_step_of_every_profile_is_accepted_whole_by_its_scenario() -> None:
    registered = registered_scenarios()
    for steps in PROFILES.values():
        for step in steps:
            plot = Path("plot.png") if step.plot else None
            args, dropped = step_argv(step, registered[step.scenario], plot)
            assert dropped == [], (step.name, dropped)
            assert ("--plot" in args) == (plot is not None)


def test_options_a_scenario_does_not_know_are_left_out_and_listed() -> None:
    step = Step("static", "static", ("--duration", "1", "--no-such", "3"), 10.0, static_figures)
    args, dropped = step_argv(step, registered_scenarios()["static"], None)
    assert (args, dropped) == (["--duration", "1"], ["--no-such", "3"])


def test_a_step_of_three_runs_runs_three_processes_and_reports_the_median_figures(
    tmp_path: Path,
) -> None:
    args = ("--duration", "1", "--connections", "2", "--runs", "1")
    step = Step("static", "static", args, 60.0, static_figures, runs=3)
    summary = run_suite((step,), "test", 300.0, tmp_path)
    [record] = summary["steps"]
    assert record["status"] == "ok" and record["runs_asked"] == 3
    assert [run["status"] for run in record["runs"]] == ["ok"] * 3
    assert [Path(f).name for f in record["result_files"]] == [f"static-{i}.json" for i in (1, 2, 3)]
    each = [
        json.loads((tmp_path / f).read_text())["http1_plain_rps"] for f in record["result_files"]
    ]
    assert record["headlines"]["http1_plain_rps"] == sorted(each)[1]
