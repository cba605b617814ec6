"""The protobuf cost figures: every figure measured for both schemas, in sensible units."""

from __future__ import annotations

from ssegate.models.cost import protobuf_cost


def test_protobuf_cost_times_compile_and_each_kind_of_check_for_both_schemas() -> None:
    figures = protobuf_cost(runs=1, number=4, repeat=1)
    assert set(figures) == {
        "compile_ms",
        "compile_cpu_ms",
        "validate_us",
        "validate_json_us",
        "invalid_us",
    }
    for by_schema in figures.values():
        assert set(by_schema) == {"small", "large"}
        assert all(cost > 0 for cost in by_schema.values())
    assert figures["compile_ms"]["large"] * 1000 > figures["validate_us"]["large"]
