"""Every result file the harness writes says what it measured: the commit and whether its tree
was clean, the machine and its load average at the start, and the exact command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ssegate
from ssegate.cli import main
from ssegate_lab.bench import result_file, tls_records
from ssegate_lab.bench.result_file import source_tree, started, write
from ssegate_lab.bench.suite import registered_scenarios, run_suite


def _git(tree: Path, *args: str) -> str:
    command = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout of one commit, its tree clean."""
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "gateway.py").write_text("print('a gateway')\n")
    _git(tree, "init", "-q")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "one")
    return tree


def test_a_clean_checkout_gives_its_commit_and_a_changed_one_names_what_changed(
    checkout: Path,
) -> None:
    commit = _git(checkout, "rev-parse", "HEAD")
    clean = source_tree(checkout / "src")
    assert (clean["commit"], clean["clean"], clean["changed"]) == (commit, True, 0)
    (checkout / "src" / "gateway.py").write_text("print('changed')\n")
    (checkout / "new.py").write_text("")
    dirty = source_tree(checkout / "src")
    assert (dirty["commit"], dirty["clean"], dirty["changed"]) == (commit, False, 2)
    assert sorted(dirty["changed_paths"]) == ["new.py", "src/gateway.py"]


def test_outside_a_checkout_the_commit_is_unknown_not_guessed(tmp_path: Path) -> None:
    assert source_tree(tmp_path) == {"commit": None, "clean": None, "path": str(tmp_path)}


def test_a_written_result_records_commit_tree_machine_load_and_command_line(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(result_file.os, "getloadavg", lambda: (3.14159, 2.5, 1.0))
    argv = ["/usr/bin/python3", "-m", "ssegate", "bench", "keyed", "--streams", "20000"]
    provenance = started(argv, source=checkout)
    monkeypatch.setattr(result_file.os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # the run's own
    out = write({"scenario": "keyed", "cases": []}, tmp_path / "out" / "keyed.json", provenance)
    written = json.loads(out.read_text())
    record = written["provenance"]
    assert record["command_line"] == "/usr/bin/python3 -m ssegate bench keyed --streams 20000"
    assert record["argv"] == argv
    assert (record["commit"], record["tree_clean"]) == (_git(checkout, "rev-parse", "HEAD"), True)
    machine = written["machine"]
    assert machine["load_average_at_start"] == [3.14, 2.5, 1.0]  # taken at the start
    assert machine["cpus"] >= 1 and machine["cores_available"] >= 1
    assert machine["memory_bytes"] > 0 and machine["kernel"] and "cpu_model" in machine
    assert written["finished_utc"].endswith("Z") and written["cases"] == []
    partial = tmp_path / "keyed.json.partial"
    write({"scenario": "keyed"}, partial, provenance, partial=True)
    assert "finished_utc" not in json.loads(partial.read_text())


def test_by_default_it_records_the_whole_command_line_and_the_gateways_own_tree() -> None:
    provenance = started()
    assert list(provenance.argv) == sys.orig_argv
    assert Path(ssegate.__file__).resolve().is_relative_to(provenance.source["path"])


def test_every_bench_command_takes_its_provenance_as_it_starts() -> None:
    for name, parser in registered_scenarios().items():
        command = parser.get_default("func")
        assert command.__qualname__.startswith("_recorded."), name


def test_a_bench_command_writes_its_provenance_into_its_result(tmp_path: Path) -> None:
    out = tmp_path / "jwt.json"
    arguments = ["bench", "jwt", "--verify-only", "--count", "3", "--runs", "1", "--out", str(out)]
    assert main(arguments) == 0
    written = json.loads(out.read_text())
    assert written["provenance"]["commit"] and "tree_clean" in written["provenance"]
    assert written["provenance"]["command_line"]
    assert len(written["machine"]["load_average_at_start"]) == 3


def test_the_suites_summary_records_its_provenance_in_the_file_and_on_the_page(
    tmp_path: Path,
) -> None:
    summary = run_suite((), "test", 60.0, tmp_path)
    [summary_file] = tmp_path.glob("all-*.json")
    written = json.loads(summary_file.read_text())
    assert written["provenance"] == summary["provenance"]
    assert "load_average_at_start" in written["machine"]
    page = summary_file.with_suffix(".md").read_text()
    commit = written["provenance"]["commit"]
    assert f"Commit {commit} (tree " in page and "at the start" in page


def test_a_standalone_probe_writes_its_provenance_too(tmp_path: Path) -> None:
    out = tmp_path / "tls.json"
    assert tls_records.main(["--events", "100", "--repeat", "1", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["scenario"] == "tls_records" and written["provenance"]["argv"]
    assert "load_average_at_start" in written["machine"]
