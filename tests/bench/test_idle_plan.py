"""Sizing an idle-connection run to the machine's limits, before anything is opened."""

from __future__ import annotations

import dataclasses

import pytest

from ssegate_lab.bench.idle_plan import MachineLimits, PlanError, plan_idle, source_addresses

SMALL_MACHINE = MachineLimits(
    open_files_soft=20_000,
    open_files_hard=20_000,
    ephemeral_ports=28_232,
    somaxconn=4096,
    syn_backlog=2048,
    conntrack_max=262_144,
    conntrack_count=0,
)


def test_what_fits_one_process_runs_in_one_gateway_and_one_client() -> None:
    plan = plan_idle(10_000, SMALL_MACHINE)
    assert (plan.gateway_workers, plan.client_processes, plan.sources) == (1, 1, 1)
    assert plan.notes == ()


def test_100k_connections_under_a_20k_open_file_limit_spread_over_processes_with_headroom() -> None:
    plan = plan_idle(100_000, SMALL_MACHINE)
    assert plan.gateway_workers == 6  # 16,667 each: 85 % of the 19,744 a process may hold
    assert plan.client_processes == 6
    assert plan.sources == 6  # 70 % of 28,232 ports per source address
    assert plan.connects_in_flight * plan.client_processes <= SMALL_MACHINE.somaxconn
    assert "RLIMIT_NOFILE hard limit 20,000" in plan.notes[0]


def test_a_fixed_gateway_worker_count_below_what_the_limit_needs_is_refused() -> None:
    with pytest.raises(PlanError, match="one process may hold at most 19,744"):
        plan_idle(100_000, SMALL_MACHINE, gateway_workers=1)


def test_a_conntrack_table_too_small_for_the_run_is_reported_first() -> None:
    tight = dataclasses.replace(SMALL_MACHINE, conntrack_max=50_000)
    with pytest.raises(PlanError, match="conntrack table holds 50,000"):
        plan_idle(100_000, tight)


def test_each_phase_binds_its_own_block_of_source_addresses() -> None:
    plan = plan_idle(100_000, SMALL_MACHINE)
    first, second = source_addresses(plan, 0), source_addresses(plan, 1)
    assert first[0] == "127.0.0.2" and len(first) == 6
    assert not set(first) & set(second)
    assert all(address.startswith("127.0.0.") for address in source_addresses(plan, 60))
