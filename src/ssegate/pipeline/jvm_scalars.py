"""The checks of one scalar JSON value as Spark expressions (``type``, bounds, ``enum``, lengths,
``pattern``), for :mod:`ssegate.pipeline.jvm_checks`: each a test of a column that is true where
the value fails it, beside the words its reason ends with."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from ssegate.pipeline.json_checks import ValueChecks

if TYPE_CHECKING:
    from pyspark.sql import Column


def scalar_failures(checks: ValueChecks) -> list[tuple[Callable[[Column], Column], str]]:
    """Each check of a scalar as (whether a value fails it, what the reason says after it)."""
    from pyspark.sql import functions as F

    out: list[tuple[Callable[[Column], Column], str]] = []
    if checks.kind in ("number", "integer"):
        out.append((_not_finite, ' is not of type "number"'))
        if checks.kind == "integer":
            out.append((lambda c: F.rint(c) != c, ' is not of type "integer"'))
        bounds: list[tuple[float | None, str, Callable[[Column, Column], Column]]] = [
            (checks.minimum, "less than the minimum", _below),
            (checks.exclusive_minimum, "at or below the exclusive minimum", _at_or_below),
            (checks.maximum, "greater than the maximum", _above),
            (
                checks.exclusive_maximum,
                "greater than or equal to the exclusive maximum",
                _at_or_above,
            ),
        ]
        for bound, text, test in bounds:
            if bound is not None:
                out.append((_bounded(test, bound), f" is {text} {bound:g}"))
    if checks.enum is not None:
        values = list(checks.enum)
        if checks.kind in ("number", "integer"):
            values = [float(v) for v in values]
        shown = json.dumps(list(checks.enum))
        out.append((lambda c: ~c.isin(values), f" is not one of {shown}"))
    if checks.min_length is not None:
        n = checks.min_length
        out.append((lambda c: F.char_length(c) < n, f" is shorter than {n} characters"))
    if checks.max_length is not None:
        m = checks.max_length
        out.append((lambda c: F.char_length(c) > m, f" is longer than {m} characters"))
    if checks.java_pattern is not None:
        java = checks.java_pattern
        out.append((lambda c: ~c.rlike(java), f" does not match {json.dumps(checks.pattern)}"))
    return out


def one_argument(test: Callable[[Column], Column]) -> Callable[[Column], Column]:
    """``test`` as a function of exactly one argument, as Spark's lambdas must be."""
    return lambda item: test(item)


def _not_finite(value: Column) -> Column:
    from pyspark.sql import functions as F

    return F.isnan(value) | (F.abs(value) == F.lit(float("inf")))


def _below(value: Column, bound: Column) -> Column:
    return value < bound


def _at_or_below(value: Column, bound: Column) -> Column:
    return value <= bound


def _above(value: Column, bound: Column) -> Column:
    return value > bound


def _at_or_above(value: Column, bound: Column) -> Column:
    return value >= bound


def _bounded(test: Callable[[Column, Column], Column], bound: float) -> Callable[[Column], Column]:
    from pyspark.sql import functions as F

    return lambda value: test(value, F.lit(bound))
