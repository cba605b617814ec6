"""The targets ``bench all`` judges beyond the first ones, against fake results shaped as the
scenarios write them: met and missed on the median of three runs, a loss or a duplicate fails
the target whatever the other runs say, fewer than three runs and an absent figure are not
measured, and a figure at another size than the target's is shown but not judged."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from ssegate_lab.bench.stalled_report import verdicts
from ssegate_lab.bench.suite_pipeline import sink_owed
from ssegate_lab.bench.suite_report import TARGETS, judge_targets

Result = dict[str, Any]


def _verdict(text: str, results: list[Result]) -> dict[str, Any]:
    """The verdict of the target whose text starts with ``text``, on ``results`` of its step."""
    [target] = [target for target in TARGETS if target.text.startswith(text)]
    [verdict] = [
        verdict
        for verdict in judge_targets({target.step: results}, {target.step: "ok"})
        if verdict["target"] == target.text
    ]
    return verdict


def _delivery_case(**fields: Any) -> dict[str, Any]:
    return {
        "missing": 0, "duplicates": 0, "failed": 0, "closed_early": 0,
        "client_cpu_share": 0.3, "client_saturated": False, "delivered_events_per_s": 1000.0,
    } | fields  # fmt: skip


def _kafka_fanout(us: float, p99: float = 20.0, clients: int = 10_000, **more: Any) -> Result:
    case = _delivery_case(
        server="ssegate", clients=clients, rate=30, latency_ms={"p99": p99},
        events_per_server_cpu_s=round(1e6 / us),
    )  # fmt: skip
    return {"duration_s": 5.0, "cases": [case | more]}


def _kafka_fanout_p99(p99: float, **more: Any) -> Result:
    return _kafka_fanout(2.0, p99, **more)


def _proxy_10k(p99: float, clients: int = 10_000, **more: Any) -> Result:
    rate = 20_000 / clients
    case = _delivery_case(protocol="h1", clients=clients, rate=rate, latency_ms={"p99": p99})
    return {"duration_s": 5.0, "cases": [case | more]}


def _mercure_p99(ratio: float, workers: int = 2, **more: Any) -> Result:
    pair = {"transport": "tls-h2", "clients": 1000, "rate": 20, "p99_ms": ratio}
    ours = _delivery_case(server="ssegate", transport="tls-h2") | more
    theirs = _delivery_case(server="mercure", transport="tls-h2")
    return {"gateway_workers": workers, "duration_s": 4.0, "ratios": {"pairs": [pair]},
            "cases": [ours, theirs]}  # fmt: skip


def _ladder_step(rate: float, seconds: float = 3.0, **more: Any) -> dict[str, Any]:
    publisher = {"rate": rate, "written": round(rate * seconds)}
    return {"rate": rate, "client_saturated": False, "publisher": publisher} | more


def _mercure_throughput(
    ratio: float | None, workers: int = 2, status: str = "met", **step: Any
) -> Result:
    ratios = {"throughput_at_p99_target": ratio, "throughput_at_p99_target_status": status}
    ladder = [
        {"server": "ssegate", "steps": [_ladder_step(200.0, **step), _ladder_step(800.0, **step)]},
        {"server": "mercure", "steps": [_ladder_step(200.0, **step)]},
    ]
    return {"gateway_workers": workers, "ratios": ratios, "ladder": ladder}


def _keyed_case(streams: int, **more: Any) -> dict[str, Any]:
    return {
        "gateway": "ssegate", "streams": streams, "lost": 0, "duplicates": 0, "failed": 0,
        "closed_early": 0, "gateway_cpu_share": 0.7, "client_saturated": False,
        "latency_ms": {"p99": 100.0},
    } | more  # fmt: skip


def _keyed_100k(p99: float, streams: int = 100_000, **more: Any) -> Result:
    case = _keyed_case(streams, latency_ms={"p99": p99}, **more)
    return {"rate": 5000.0, "duration_s": 300.0, "keys": 200_000, "cases": [case]}


def _soak(growth: float, duration: float = 1800.0, **more: Any) -> Result:
    samples = [[30.0, 300.0], [300.0, 400.0], [1200.0, 400.0 * (1 + growth)], [1800.0, 401.0]]
    case = _keyed_case(19_000, rss_mib_samples=samples, **more)
    return {"rate": 1160.0, "duration_s": duration, "cases": [case]}


def _stalled_run(p99_ratio: float = 1.5, rss_ratio: float = 1.05, late: int = 0, lost: int = 0,
                 duplicates: int = 0) -> dict[str, Any]:  # fmt: skip
    run: dict[str, Any] = {
        "p99_ratio": p99_ratio,
        "rss_ratio": rss_ratio,
        "live": {"wanted": 20, "opened": 20, "lost": lost, "duplicates": duplicates,
                 "closed_early": 0},
        "stalled_clients": {
            "connected": 1000, "within_bound": 1000 - late, "by_reset": 1000, "bound_s": 13.6,
            "end_s": {"p50": 12.0, "max": 13.0},
        },
        "phases": {"stalled": {"load_cpu_share": 0.1, "latency_ms": {"p99": 10.0}}},
    }  # fmt: skip
    run["verdicts"] = verdicts(run)
    return run


def _stalled(stalled: int = 1000, duration: float = 30.0, **run: Any) -> Result:
    return {"stalled": stalled, "duration_s": duration, "runs": [_stalled_run(**run)]}


def _failover(clients: int = 1000, **more: Any) -> Result:
    case = {"lost": 0, "duplicates": 0, "out_of_order": 0, "unexpected": 0, "gap_s": 9.0,
            "kills": [{"gap_s": 9.0}, {"gap_s": 6.0}]} | more  # fmt: skip
    return {"clients": clients, "hold": 5.0, "cases": [case]}


def _pipeline(case: str, warm: bool = False) -> Callable[[float], Result]:
    """One session's result: the run at ``rate`` is its first of ``case``, or (``warm``) its
    second, after a first run far below any limit that the warm target must not read."""

    def result(rate: float, records: int = 1_000_000, **more: Any) -> Result:
        run = {"records_per_s": rate, "sink_records": sink_owed(case, records)} | more
        cold = {"records_per_s": 1_000, "sink_records": sink_owed(case, records)}
        return {"records": records, case: {"runs": [cold, run] if warm else [run]}}

    return result


SINK_OWED = 28_680
"""Of 30 s of readings at 1,000/s, those over 16 °C: what the stateless job's sink owes."""


def _latency(p99: float, sink_p99: float | None = None, **client: Any) -> Result:
    """A 30 s latency case whose SSE client had ``p99`` (its sink ``sink_p99``, by default
    half)."""
    sse = {"received": SINK_OWED, "duplicates": 0, "missing": 0, "p99_ms": p99} | client
    case = {"supported": True, "rate": 1000, "seconds": 30.0, "received": SINK_OWED,
            "p99_ms": p99 / 2 if sink_p99 is None else sink_p99, "sse": sse}  # fmt: skip
    return {"latency": {"trigger_100ms": case}}


def _sink_latency(p99: float) -> Result:
    """A latency case from before the SSE client was measured: the sink only."""
    case = {"supported": True, "rate": 1000, "seconds": 30.0, "p99_ms": p99, "received": SINK_OWED}
    return {"latency": {"trigger_100ms": case}}


@dataclass(frozen=True)
class Shape:
    """One target: a run's result at a figure, the figure met and missed, what makes a loss,
    and a result without the figure."""

    target: str
    run: Callable[..., Result]
    met: float
    missed: float | None
    loss: dict[str, Any] | None
    absent: Result

    def __str__(self) -> str:
        return self.target


SHAPES = [
    Shape("≤ 3.3 µs of gateway CPU per delivery", _kafka_fanout, 2.5, 4.5,
          {"missing": 300}, {"duration_s": 5.0, "cases": [_delivery_case(
              server="ssegate", clients=10_000, rate=30, latency_ms={"p99": 20.0})]}),
    Shape("p99 ≤ 50 ms at 10,000 subscribers", _kafka_fanout_p99, 30.0, 80.0,
          {"duplicates": 12}, {"cases": []}),
    Shape("p99 ≤ 25 ms at 10,000 clients", _proxy_10k, 12.0, 40.0, {"closed_early": 2},
          {"duration_s": 5.0, "cases": [_delivery_case(protocol="h1", clients=10_000, rate=2,
                                                       latency_ms={})]}),
    Shape("≤ 0.7\u00d7 Mercure's p99 at equal load, 2 workers, TLS h2", _mercure_p99, 0.6, 0.9,
          {"missing": 40}, {"gateway_workers": 2, "ratios": {"pairs": []}}),
    Shape("≥ 1.5\u00d7 Mercure's throughput at equal p99, 2 workers, plain", _mercure_throughput,
          1.6, 1.2, None, {"gateway_workers": 2, "ratios": {}}),
    Shape("100,000 key-filtered streams", _keyed_100k, 200.0, 400.0, {"lost": 7},
          {"rate": 5000.0, "duration_s": 300.0, "cases": []}),
    Shape("19,000 key-filtered streams at 1,160 msg/s", _soak, 0.05, 0.2, {"lost": 1},
          {"rate": 1160.0, "duration_s": 1800.0, "cases": [_keyed_case(19_000)]}),
    Shape("1,000 stalled clients: live p99", lambda v, **m: _stalled(p99_ratio=v, **m), 1.8,
          3.0, {"lost": 2}, {"stalled": 1000, "runs": []}),
    Shape("1,000 stalled clients: every one ended", lambda v, **m: _stalled(late=int(v), **m),
          0, 5, {"duplicates": 1}, {"stalled": 1000, "runs": []}),
    Shape("1,000 stalled clients: gateway RSS", lambda v, **m: _stalled(rss_ratio=v, **m),
          1.05, 1.2, {"lost": 1}, {"stalled": 1000, "runs": []}),
    Shape("1,000 stalled clients: the live readers", lambda v, **m: _stalled(**m), 0, None,
          {"duplicates": 3}, {"stalled": 1000, "runs": []}),
    Shape("Kafka leaders killed", lambda v, **m: _failover(**m), 0, None,
          {"out_of_order": 2}, {"clients": 1000, "cases": []}),
    Shape("pipeline, stateless, a session's first run", _pipeline("stateless"), 120_000,
          80_000, None, {"records": 1_000_000}),
    Shape("pipeline, stateless, warm", _pipeline("stateless", warm=True), 120_000, 80_000,
          None, {"records": 1_000_000}),
    Shape("pipeline, windowed, a session's first run", _pipeline("windowed"), 60_000, 40_000,
          None, {"records": 1_000_000, "windowed": {"runs": []}}),
    Shape("pipeline, windowed, warm", _pipeline("windowed", warm=True), 60_000, 40_000, None,
          {"records": 1_000_000, "windowed": {"runs": []}}),
    Shape("pipeline: produce → SSE client p99", _latency, 400.0, 1500.0, {"missing": 3},
          {"latency": {"trigger_100ms": {"supported": False, "reason": "refused"}}}),
]  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_target_is_met_or_missed_on_the_median_of_three_runs(shape: Shape) -> None:
    met = _verdict(shape.target, [shape.run(shape.met)] * 3)
    assert met["status"] == "met", met
    assert "median of 3 runs" in met["note"] or "in every run" in met["note"]
    if shape.missed is not None:
        runs = [shape.run(shape.missed), shape.run(shape.met), shape.run(shape.missed)]
        assert _verdict(shape.target, runs)["status"] == "missed"


@pytest.mark.parametrize("shape", [s for s in SHAPES if s.loss], ids=str)
def test_a_run_with_a_loss_or_a_duplicate_fails_the_target(shape: Shape) -> None:
    assert shape.loss is not None
    runs = [shape.run(shape.met), shape.run(shape.met, **shape.loss), shape.run(shape.met)]
    verdict = _verdict(shape.target, runs)
    assert (verdict["status"], verdict["measured"]) == ("missed", "loss"), verdict
    assert verdict["note"].startswith("run 2 of 3: ")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fewer_than_three_runs_are_not_measured_but_show_the_figure(shape: Shape) -> None:
    verdict = _verdict(shape.target, [shape.run(shape.met)] * 2)
    assert verdict["status"] == "not measured"
    assert "a verdict takes the median of 3" in verdict["note"]
    assert verdict["measured"] not in ("—", "loss")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_result_without_the_figure_is_not_measured(shape: Shape) -> None:
    verdict = _verdict(shape.target, [copy.deepcopy(shape.absent)] * 3)
    assert (verdict["status"], verdict["measured"]) == ("not measured", "—"), verdict
    assert verdict["note"]


@pytest.mark.parametrize(
    ("target", "results", "size"),
    [
        ("≤ 3.3 µs", [_kafka_fanout(2.0, clients=1000)] * 3, "at 1,000 clients"),
        ("p99 ≤ 25 ms at 10,000", [_proxy_10k(5.0, clients=1000)] * 3, "at 1,000 clients"),
        ("≤ 0.7\u00d7 Mercure's p99 at equal load, 2 workers, TLS",
         [_mercure_p99(0.5, workers=1)] * 3, "at 1 gateway worker(s)"),
        ("100,000 key-filtered", [_keyed_100k(90.0, streams=2000)] * 3, "at 2,000 streams"),
        ("19,000 key-filtered streams at 1,160", [_soak(0.0, duration=30)] * 3,
         "at 30 s of producing"),
        ("1,000 stalled clients: live", [_stalled(stalled=100)] * 3, "at 100 stalled clients"),
        ("Kafka leaders killed", [_failover(clients=100)] * 3, "at 100 streams"),
        ("pipeline, stateless, a session's first run",
         [_pipeline("stateless")(90_000, records=30_000)] * 3,
         "at 30,000 records"),
    ],
)  # fmt: skip
def test_a_run_at_another_size_shows_its_figure_and_says_its_size(
    target: str, results: list[Result], size: str
) -> None:
    verdict = _verdict(target, results)
    assert verdict["status"] == "not measured"
    assert verdict["note"].startswith(size + ": the target's is")
    assert verdict["measured"].endswith(size[3:])


def test_the_cost_per_delivery_is_not_met_when_batches_may_have_joined() -> None:
    joined = _verdict("≤ 3.3 µs", [_kafka_fanout(0.9, p99=1700.0)] * 3)
    assert joined["status"] == "not measured"
    assert "over the 33 ms between messages: batches may have joined" in joined["note"]
    assert joined["measured"].startswith("0.90 µs")
    # a cost over the limit with joined batches is over it with single events too
    assert _verdict("≤ 3.3 µs", [_kafka_fanout(4.5, p99=1700.0)] * 3)["status"] == "missed"


def test_one_stalled_run_late_fails_the_bound_however_the_others_went() -> None:
    runs = [_stalled(late=0), _stalled(late=3), _stalled(late=0)]
    verdict = _verdict("1,000 stalled clients: every one ended", runs)
    assert (verdict["status"], verdict["measured"]) == ("missed", "3 ended past the bound")


def test_throughput_over_tls_h2_is_not_measured_the_ladder_is_plain_http1_only() -> None:
    verdict = _verdict("≥ 1.5\u00d7 Mercure's throughput at equal p99, 2 workers, TLS h2",
                       [_mercure_throughput(2.0)] * 3)  # fmt: skip
    assert verdict["status"] == "not measured"
    assert "p99 ladder is over plain HTTP/1.1 only" in verdict["note"]


def test_throughput_over_tls_h2_is_judged_from_the_runs_whose_ladder_climbed_over_it() -> None:
    climbed = _mercure_throughput(1.3) | {"ladder_transport": "tls-h2"}
    verdict = _verdict("≥ 1.5\u00d7 Mercure's throughput at equal p99, 2 workers, TLS h2",
                       [climbed] * 3)  # fmt: skip
    assert (verdict["status"], verdict["measured"]) == ("missed", "1.30\u00d7")
    # and such a run says nothing of plain HTTP/1.1
    plain = _verdict("≥ 1.5\u00d7 Mercure's throughput at equal p99, 2 workers, plain",
                     [climbed] * 3)  # fmt: skip
    assert plain["status"] == "not measured"
    assert "p99 ladder is over TLS h2 only: no h1 one" in plain["note"]


def test_a_saturated_mercure_client_or_a_mercure_loss_voids_the_p99_pair() -> None:
    lossy = _mercure_p99(0.5)
    lossy["cases"][1]["missing"] = 9
    verdict = _verdict("≤ 0.7\u00d7 Mercure's p99 at equal load, 2 workers, TLS h2", [lossy] * 3)
    assert verdict["status"] == "no verdict"
    assert "Mercure: 9 lost, the pair does not compare" in verdict["note"]


def test_the_failover_verdict_shows_the_gap_with_no_target_on_it() -> None:
    verdict = _verdict("Kafka leaders killed", [_failover(gap_s=g) for g in (8.0, 9.0, 16.0)])
    assert verdict["status"] == "met"
    assert verdict["measured"].endswith("gap after a kill 9.0 s (max 16.0 s)")


def test_the_pipeline_latency_is_judged_at_the_sse_client_with_the_sink_shown_beside() -> None:
    slow_gateway = [_latency(1400.0, sink_p99=600.0)] * 3
    verdict = _verdict("pipeline: produce → SSE client p99", slow_gateway)
    assert (verdict["status"], verdict["measured"]) == ("missed", "1,400 ms (to the sink 600 ms)")
    assert "produce → sink → gateway → SSE client at trigger_100ms" in verdict["note"]
    assert _verdict("pipeline: produce → SSE client p99", [_latency(900.0)] * 3)["status"] == "met"


def test_a_pipeline_result_without_the_sse_client_is_judged_on_its_sink_and_says_so() -> None:
    verdict = _verdict("pipeline: produce → SSE client p99", [_sink_latency(800.0)] * 3)
    assert (verdict["status"], verdict["measured"]) == ("met", "800 ms")
    assert verdict["note"].endswith("produce → sink at trigger_100ms")


def test_an_event_the_sse_client_got_twice_or_never_fails_the_pipeline_latency() -> None:
    for loss, words in (({"duplicates": 2}, "2 duplicated"), ({"missing": 5}, "5 lost")):
        runs = [_latency(300.0), _latency(300.0, **loss), _latency(300.0)]
        verdict = _verdict("pipeline: produce → SSE client p99", runs)
        assert (verdict["status"], verdict["measured"]) == ("missed", "loss")
        assert verdict["note"].startswith(f"run 2 of 3: {words}")
    nothing = _latency(300.0, p99_ms=None, received=0, missing=9990)
    verdict = _verdict("pipeline: produce → SSE client p99", [nothing] * 3)
    assert verdict["measured"] == "loss"
    assert verdict["note"].startswith("run 1 of 3: 9,990 lost")
