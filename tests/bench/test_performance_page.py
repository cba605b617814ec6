"""``docs/performance.md`` states the latest ``bench all`` verdicts, as the runs wrote them.

The kept runs are ``docs/results/all-*.json``, each with its steps' results beside it in the
directory of the same name (a quick run of every step, and a full-size run of the steps the
quick sizes cannot judge). The page carries each one's targets table, the rows of the steps it
ran, exactly as :func:`~ssegate_lab.bench.suite_report.targets_table` writes it, and names its
file; its targets at a glance agree with the latest verdict any kept run made on each target
(``met`` or ``missed``): the row of the same target, named as the judge names it, starts its
verdict with the same word. And the kept verdicts are what today's judges make of the kept
results, so a judge made stricter since is a page to re-run, not a page that silently disagrees.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ssegate_lab.bench.suite_report import judge_targets, targets_table
from ssegate_lab.bench.validity import MET, MISSED

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "performance.md"
RESULTS = ROOT / "docs" / "results"


def _kept() -> list[tuple[Path, dict[str, Any]]]:
    """Every kept ``bench all`` summary, oldest first."""
    summaries = [(path, json.loads(path.read_text())) for path in RESULTS.glob("all-*.json")]
    assert summaries, "no bench all summary is kept in docs/results"
    return sorted(summaries, key=lambda item: item[1]["started_utc"])


def _glance() -> dict[str, str]:
    """The page's targets at a glance: each row's target → its verdict cell."""
    text = PAGE.read_text()
    start = text.index("## The targets at a glance")
    rows: dict[str, str] = {}
    for line in text[start:].splitlines()[4:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0]] = cells[3]
    return rows


def _ran(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdicts on the targets of the steps the run had (all of them, or its ``--only``)."""
    steps = {step["name"] for step in summary["steps"]}
    return [verdict for verdict in summary["targets"] if verdict["step"] in steps]


def test_the_page_carries_every_kept_bench_all_targets_table_as_written() -> None:
    page = PAGE.read_text()
    for path, summary in _kept():
        assert f"results/{path.name}" in page
        assert "\n".join(targets_table(_ran(summary))) in page, path.name


def test_the_latest_verdict_on_each_target_is_the_one_the_page_gives_it() -> None:
    latest: dict[str, str] = {}
    for _, summary in _kept():
        latest |= {
            v["target"]: v["status"] for v in summary["targets"] if v["status"] in (MET, MISSED)
        }
    assert latest, "the kept runs judged nothing"
    glance = _glance()
    for target, status in latest.items():
        assert target in glance, f"no row on the page for {target!r}"
        assert glance[target].startswith(f"**{status}**"), (target, status, glance[target])


def test_the_kept_verdicts_are_what_todays_judges_make_of_the_kept_results() -> None:
    for path, summary in _kept():
        results: dict[str, list[dict[str, Any]]] = {}
        for step in summary["steps"]:
            if step["status"] != "ok":
                continue
            files = step.get("result_files") or [step["result_file"]]
            results[step["name"]] = [json.loads((path.parent / f).read_text()) for f in files]
        statuses = {step["name"]: step["status"] for step in summary["steps"]}
        assert judge_targets(results, statuses) == summary["targets"], path.name
