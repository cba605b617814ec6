"""The fanout scenario at a tiny size, ssegate and a Mercure hub built with the machine's Go.

``./run``'s setup step ``mercure`` builds the hub (minutes, once); the scenario test fails naming
that step when the binary is missing, never builds it, and takes well under a minute. The
figures come from full runs (``docs/performance.md``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest

from ssegate.cache import OFFLINE
from ssegate.cli import main
from ssegate_lab.bench.latency import ReceiveCounters, StampTally
from ssegate_lab.bench.mercure import ensure_mercure, publisher_token
from ssegate_lab.testing.tools import prepared


def test_stamp_tally_reads_mercure_events_with_a_space_after_each_colon() -> None:
    counters = ReceiveCounters()
    tally = StampTally(counters)
    body = b":\nid: 1\ndata: 1000\n\nid: 2\ndata: 2000\n\nid: 4\ndata: 3000\n\n"
    for index in range(0, len(body), 5):
        tally.feed(body[index : index + 5], now_ns=1_000_000)
    assert (counters.received, counters.gaps, counters.duplicates) == (3, 1, 0)


def test_publisher_token_is_an_hs256_jwt_allowing_every_topic() -> None:
    key = b"0123456789abcdef0123456789abcdef"
    header, claims, signature = publisher_token(key).split(".")

    def decoded(part: str) -> bytes:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    assert json.loads(decoded(header)) == {"alg": "HS256", "typ": "JWT"}
    assert json.loads(decoded(claims)) == {"mercure": {"publish": ["*"]}}
    expected = hmac.new(key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    assert decoded(signature) == expected


def test_mercure_build_without_go_reports_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(OFFLINE)  # nothing can be built without go anyway
    build = ensure_mercure(tmp_path / "mercure")
    assert build.binary is None and build.reason == "go is not on PATH"
    assert build.as_json()["build"] == "go is not on PATH"


@pytest.mark.timeout(180)
def test_fanout_delivers_every_event_on_ssegate_and_mercure_and_reports_ratios(
    tmp_path: Path,
) -> None:
    prepared("mercure")
    out, plot = tmp_path / "fanout.json", tmp_path / "fanout.png"
    arguments = [
        *("bench", "fanout", "--clients", "3", "--rate", "50", "--duration", "1"),
        *("--transports", "h1,tls-h2", "--idle-clients", "4", "--ladder-clients", "3"),
        *("--ladder-rates", "50", "--ladder-duration", "1"),
        *("--plot", str(plot), "--out", str(out)),
    ]
    assert main(arguments) == 0
    result = json.loads(out.read_text())
    mercure = result["mercure"]
    assert mercure["build"] == "ok", mercure["build"]
    assert mercure["version"].startswith("v") and mercure["defaults"]["write_timeout"]

    cases = result["cases"]
    assert [(c["server"], c["transport"]) for c in cases] == [
        ("ssegate", "h1"), ("mercure", "h1"), ("ssegate", "tls-h2"), ("mercure", "tls-h2"),
    ]  # fmt: skip
    for case in cases:
        assert case["opened"] == 3, case["errors"]
        assert case["received"] == case["expected"] == 50 * 3
        assert (case["gaps"], case["duplicates"], case["closed_early"]) == (0, 0, 0)
        assert case["latency_ms"]["p99"] is not None
        assert case["publisher"]["written"] == 50
        assert case["cpu_s"]["server"] >= 0 and case["machine_busy_share"] >= 0
    assert cases[1]["publisher"]["acknowledged"] == 50
    for case in cases:
        assert case["client_cpu_share"] >= 0 and case["client_saturated"] is False
        assert case["cpu_s"]["server_fanout"] <= case["cpu_s"]["server"]
        assert "events_per_server_fanout_cpu_s" in case and "publisher_cpu_share" in case

    cost = mercure["publish_cost"]
    assert cost["mode"] == "separated" and cost["published"] > 0
    assert cost["hub_cpu_us_per_event"] > 0 and "nobody subscribes" in cost["what_was_done"]
    hub_case = cases[1]
    intake = cost["hub_cpu_us_per_event"] * hub_case["published"] / 1e6
    assert hub_case["cpu_s"]["server_publish_path_estimate"] == round(intake, 3)

    assert {entry["server"] for entry in result["idle"]} == {"ssegate", "mercure"}
    for entry in result["idle"]:
        assert entry["opened"] == 4 and isinstance(entry["bytes_per_idle_connection"], int)
    assert [entry["server"] for entry in result["ladder"]] == ["ssegate", "mercure"]
    for entry in result["ladder"]:
        assert len(entry["steps"]) == 1 and entry["steps"][0]["missing"] == 0
        assert (entry["best_rate"], entry["ceiling_found"]) == (50, False)

    ratios = result["ratios"]
    assert [(p["transport"], p["clients"]) for p in ratios["pairs"]] == [("h1", 3), ("tls-h2", 3)]
    for pair in ratios["pairs"]:
        assert pair["delivered_events_per_s"] > 0 and pair["p99_ms"] > 0
    assert "memory_per_idle_connection" in ratios and "throughput_at_p99_target" in ratios
    # both passed the only rate: neither ceiling was found, so nothing is decided
    assert ratios["throughput_at_p99_target_status"] == "no verdict"
    for entry in result["ladder"]:  # and each ladder says so, not "every rate passed" alone
        assert entry["stopped"].startswith("every rate passed, up to 50 ev/s")
    # the result records what it measured: the commit, the tree, the machine, the command
    assert result["provenance"]["argv"] and "tree_clean" in result["provenance"]
    assert "load_average_at_start" in result["machine"]
    assert plot.exists() or "matplotlib is not installed" in result["plot"]


@pytest.mark.timeout(180)
def test_the_fanout_ladder_climbs_over_the_transport_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "fanout.json"
    arguments = [
        *("bench", "fanout", "--clients", "3", "--rate", "50", "--duration", "1"),
        *("--transports", "tls-h2", "--idle-clients", "0", "--ladder-clients", "3"),
        *("--ladder-rates", "50", "--ladder-duration", "1", "--ladder-transport", "tls-h2"),
        *("--without-mercure", "--out", str(out)),
    ]
    assert main(arguments) == 0
    result = json.loads(out.read_text())
    assert result["ladder_transport"] == "tls-h2"
    [ladder] = result["ladder"]
    assert (ladder["server"], ladder["transport"]) == ("ssegate", "tls-h2")
    [step] = ladder["steps"]
    assert (step["missing"], step["duplicates"]) == (0, 0)
    assert step["delivered_events_per_s"] > 0 and step["latency_ms"]["p99"] is not None


def test_stamp_tally_counts_a_replayed_run_of_ids_as_duplicates_every_one() -> None:
    counters = ReceiveCounters()
    tally = StampTally(counters)
    run = b"".join(b"id: %d\ndata: 1000\n\n" % n for n in (1, 2, 3))
    tally.feed(run + run + b"id: 5\ndata: 1000\n\n", now_ns=1_000_000)
    assert (counters.received, counters.duplicates, counters.gaps) == (7, 3, 1)
    assert counters.body_bytes == len(run) * 2 + len(b"id: 5\ndata: 1000\n\n")
