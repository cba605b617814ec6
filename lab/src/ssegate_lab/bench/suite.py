"""``ssegate bench all``: every scenario in turn, each in its own process and time, one summary.

The steps of a profile (:mod:`ssegate_lab.bench.suite_steps`) run one after another, each as
``python -m ssegate bench SCENARIO ... --out FILE`` in a session of its own, so a scenario that
fails, hangs or leaks cannot take the others down. A step that judges a target runs its scenario
three times (``Step.runs``), as three processes, since a verdict takes the median of three runs;
a run that does not end ``ok`` ends the step with its status. A step that outlives its timeout
is interrupted (SIGINT to its process group, so its gateway and broker are stopped by their own
cleanup), then killed, and recorded ``timed_out``. The whole run has a bound, printed up front;
no step runs past it, and steps left when it is reached are recorded ``skipped``. A step whose
scenario is not registered in this version is recorded ``not available``; options a scenario
does not know are left out and listed.

Then ``<out-dir>/all-<UTC>.json`` holds every step's status, seconds, result files and headline
figures (the median over its runs), and every target of the performance issue judged against
them (:mod:`ssegate_lab.bench.suite_report`); ``all-<UTC>.md`` is the same as tables. Step results
and logs go to ``all-<UTC>/`` (``<step>-<run>.json`` for a step of several runs); plots sit next
to the summary. The summary, like every step's result, records the commit measured, whether its
tree was clean, the machine, its load average at the start and the command line
(:mod:`ssegate_lab.bench.result_file`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ssegate_lab.bench import result_file
from ssegate_lab.bench.result_file import Provenance
from ssegate_lab.bench.suite_report import judge_targets, markdown
from ssegate_lab.bench.suite_steps import BOUNDS, PROFILES, Step, number

INTERRUPT_GRACE_SECONDS = 20.0
"""After SIGINT, how long a timed-out step has to stop its children before it is killed."""
MIN_STEP_SECONDS = 10.0
"""A step is not started with less than this left of the run's bound."""


def add_all_parser(scenarios: Any) -> None:
    everything = scenarios.add_parser(
        "all",
        help="every scenario in turn, each bounded in time; one summary with the targets",
        description="Run every scenario in its own process with bounded sizes and time, then"
        " write bench-results/all-<UTC>.json and .md: each step's status and headline figures,"
        " and each target met or missed.",
    )
    everything.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        metavar="{quick,full}",  # and tiny, the smallest sizes, for tests
        default="quick",
        help="quick: small sizes, about 30 min; full: the documented sizes, at most 8 h (every"
        " step that judges a target runs three times: a verdict takes the median of three)",
    )
    everything.add_argument("--only", type=_names, default=None, help=argparse.SUPPRESS)
    everything.add_argument("--out-dir", type=Path, default=Path("bench-results"))
    everything.set_defaults(func=_all)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError("give step names separated by commas")
    return names


def _all(args: argparse.Namespace) -> int:
    steps = PROFILES[args.profile]
    if args.only is not None:
        unknown = [name for name in args.only if name not in {step.name for step in steps}]
        if unknown:
            known = ", ".join(step.name for step in steps)
            print(f"ssegate: --only: no step {', '.join(unknown)} (steps: {known})")
            return 2
        steps = tuple(step for step in steps if step.name in args.only)
    summary = run_suite(
        steps, args.profile, BOUNDS[args.profile], args.out_dir, getattr(args, "provenance", None)
    )
    return 0 if all(s["status"] in ("ok", "not available") for s in summary["steps"]) else 1


def registered_scenarios() -> dict[str, argparse.ArgumentParser]:
    """The scenarios ``ssegate bench`` has in this version, with their parsers."""
    from ssegate_lab.bench.cli import add_bench_parser

    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers())
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            bench = action.choices["bench"]
            for inner in bench._actions:
                if isinstance(inner, argparse._SubParsersAction):
                    return dict(inner.choices)
    return {}


def step_argv(
    step: Step, parser: argparse.ArgumentParser, plot: Path | None
) -> tuple[list[str], list[str]]:
    """The step's arguments the scenario knows, plus ``--plot``; (kept, left out).

    Raises ``ValueError`` when the scenario refuses a value it knows the option of.
    """
    args = list(step.args)
    known: list[str] = []
    dropped: list[str] = []
    index = 0
    while index < len(args):
        option = args[index]
        takes_value = index + 1 < len(args) and not args[index + 1].startswith("--")
        chunk = args[index : index + (2 if takes_value else 1)]
        (known if option in parser._option_string_actions else dropped).extend(chunk)
        index += len(chunk)
    plot_action = parser._option_string_actions.get("--plot")
    if plot is not None and plot_action is not None:
        known += ["--plot"] if plot_action.nargs == 0 else ["--plot", str(plot)]
    try:
        parser.parse_args(known)
    except SystemExit:
        raise ValueError(f"the {step.scenario} scenario refuses {' '.join(known)}") from None
    return known, dropped


def run_suite(
    steps: tuple[Step, ...],
    profile: str,
    bound: float,
    out_dir: Path,
    provenance: Provenance | None = None,
) -> dict[str, Any]:
    """Run ``steps`` within ``bound`` seconds; the summary (also written to ``out_dir``), with
    ``provenance`` (default: taken now)."""
    provenance = provenance or result_file.started()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    step_dir = out_dir / f"all-{stamp}"
    step_dir.mkdir(parents=True, exist_ok=True)
    registered = registered_scenarios()
    started = time.monotonic()
    print(
        f"ssegate bench all: profile {profile}, {len(steps)} steps, bounded to"
        f" {bound / 60:.1f} min (until {_clock(time.time() + bound)}); results in {step_dir}",
        flush=True,
    )
    records: list[dict[str, Any]] = []
    results: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        left = bound - (time.monotonic() - started)
        plot = out_dir / f"all-{stamp}-{step.name}.png"
        record, result = _run_step(step, registered, step_dir, plot, left)
        for field in ("result_file", "log_file", "plot"):
            record[field] = _relative(record.get(field), out_dir)
        for run in record.get("runs", []):
            for field in ("result_file", "log_file"):
                run[field] = _relative(run.get(field), out_dir)
        if "result_files" in record:
            record["result_files"] = [_relative(f, out_dir) for f in record["result_files"]]
        if result is not None:
            results[step.name] = result
        records.append(record)
        print(f"  {step.name}: {record['status']} ({record.get('seconds', 0):.0f} s)", flush=True)
    summary: dict[str, Any] = {
        "scenario": "all",
        "profile": profile,
        "bound_s": bound,
        "started_utc": _clock(time.time() - (time.monotonic() - started)),
        "seconds": round(time.monotonic() - started, 1),
        "steps": records,
        "targets": judge_targets(results, {r["name"]: r["status"] for r in records}),
    }
    result_file.write(summary, out_dir / f"all-{stamp}.json", provenance)
    (out_dir / f"all-{stamp}.md").write_text(markdown(summary))
    print(f"written to {out_dir / f'all-{stamp}.json'} and .md", flush=True)
    return summary


def _clock(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _relative(path: Any, base: Path) -> str | None:
    if not path:
        return None
    with contextlib.suppress(ValueError):
        return str(Path(path).relative_to(base))
    return str(path)


def _run_step(
    step: Step,
    registered: dict[str, argparse.ArgumentParser],
    step_dir: Path,
    plot: Path,
    left: float,
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """Run one step ``step.runs`` times; its summary record, and its results when every run
    wrote one. A run that does not end ``ok`` ends the step with its status."""
    record: dict[str, Any] = {"name": step.name, "scenario": step.scenario, "seconds": 0.0}
    parser = registered.get(step.scenario)
    if parser is None:
        reason = f"no '{step.scenario}' scenario in this version of ssegate bench"
        return record | {"status": "not available", "reason": reason}, None
    if left < MIN_STEP_SECONDS:
        return record | {"status": "skipped", "reason": "the run's time bound was reached"}, None
    try:
        args, dropped = step_argv(step, parser, plot if step.plot else None)
    except ValueError as exc:
        return record | {"status": "failed", "reason": str(exc)}, None
    record |= {"dropped_options": dropped, "runs_asked": step.runs}
    runs: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    started = time.monotonic()
    for index in range(1, step.runs + 1):
        remaining = left - (time.monotonic() - started)
        if remaining < MIN_STEP_SECONDS:
            why = f"the run's time bound was reached after {index - 1} of {step.runs} runs"
            runs.append({"status": "skipped", "reason": why})
            break
        name = step.name if step.runs == 1 else f"{step.name}-{index}"
        run, result = _run_once(step, name, args, step_dir, min(step.timeout, remaining))
        runs.append(run)
        if result is not None:
            results.append(result)
        if run["status"] != "ok":
            break
    record["seconds"] = round(time.monotonic() - started, 1)
    last = runs[-1]
    record |= {k: v for k, v in last.items() if k not in ("seconds", "result_file", "headlines")}
    record["status"] = last["status"]
    files = [run["result_file"] for run in runs if run.get("result_file")]
    if files:
        record["result_file"] = files[0]
    if step.runs > 1:
        record["runs"] = [_brief(run) for run in runs]
        record["result_files"] = files
    figures = []
    for result in results:
        try:
            figures.append(step.headlines(result))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            record["headlines_error"] = f"{type(exc).__name__}: {exc}"
    record["headlines"] = _median_figures(figures)
    if plot.exists() and step.plot:
        record["plot"] = str(plot)
    return record, results if record["status"] == "ok" else None


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    kept = ("status", "seconds", "exit_code", "result_file", "log_file", "reason")
    return {key: run[key] for key in kept if key in run}


def _median_figures(each: list[dict[str, Any]]) -> dict[str, Any]:
    """Every run's headline figures as one: the median of each over the runs that have it."""
    names = list(dict.fromkeys(name for figures in each for name in figures))
    merged: dict[str, Any] = {}
    for name in names:
        values = [number(figures.get(name)) for figures in each]
        present = [v for v in values if v is not None]
        merged[name] = statistics.median(present) if present else None
    return merged


def _run_once(
    step: Step, name: str, args: list[str], step_dir: Path, timeout: float
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One run of a step's scenario in its own process group, bounded by ``timeout``."""
    out, log = step_dir / f"{name}.json", step_dir / f"{name}.log"
    argv = [sys.executable, "-m", "ssegate", "bench", step.scenario, *args, "--out", str(out)]
    record: dict[str, Any] = {"argv": argv[2:], "timeout_s": round(timeout, 1)}
    record["log_file"] = str(log)
    print(f"  {name}: {' '.join(argv[3:])} (at most {timeout:.0f} s)", flush=True)
    started = time.monotonic()
    with log.open("w") as sink:
        child = subprocess.Popen(
            argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code: int | None = child.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
            _stop_group(child)
        except BaseException:
            _stop_group(child)
            raise
    record["seconds"] = round(time.monotonic() - started, 1)
    record["pid"] = child.pid
    record["exit_code"] = code if code is not None else child.returncode
    if code is None:
        record["status"] = "timed_out"
    elif code != 0:
        record["status"] = "failed"
    else:
        record["status"] = "ok" if out.exists() else "failed"
    result: dict[str, Any] | None = None
    if out.exists():
        try:
            result = json.loads(out.read_text())
        except ValueError as exc:
            record["status"] = "failed"
            record["reason"] = f"unreadable result: {exc}"
        else:
            record["result_file"] = str(out)
    if record["status"] != "ok":
        record.setdefault("reason", _tail(log))
    return record, result


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """SIGINT the step's process group (cleanup runs), then SIGKILL what is left of it."""
    for signum, grace in ((signal.SIGINT, INTERRUPT_GRACE_SECONDS), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signum)
        try:
            child.wait(grace)
        except subprocess.TimeoutExpired:
            continue
        if signum == signal.SIGINT:
            # The leader is gone; what it started in its group goes with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        return


def _tail(log: Path, lines: int = 8) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])
