"""How many examples each fuzz target tries: a brief run by default, a long one on request.

Every target in this package is decorated with :data:`FUZZ`: the hypothesis profile
``ssegate-fuzz`` (200 examples a target, all targets together well under a minute), or, when
``SSEGATE_FUZZ_EXAMPLES`` is set, ``ssegate-fuzz-long`` with that many examples a target::

    SSEGATE_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest tests/fuzz -p no:cacheprovider

The profiles are applied per test, never loaded for the whole session, so the other property
tests keep their own settings. Failing examples are kept in hypothesis's example database
(``.hypothesis/``) and tried first on the next run.
"""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, settings

EXAMPLES_VARIABLE = "SSEGATE_FUZZ_EXAMPLES"
BRIEF_EXAMPLES = 200

settings.register_profile(
    "ssegate-fuzz",
    max_examples=BRIEF_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "ssegate-fuzz-long",
    parent=settings.get_profile("ssegate-fuzz"),
    max_examples=int(os.environ.get(EXAMPLES_VARIABLE) or BRIEF_EXAMPLES),
)

FUZZ = settings.get_profile(
    "ssegate-fuzz-long" if os.environ.get(EXAMPLES_VARIABLE) else "ssegate-fuzz"
)
"""The settings every fuzz target runs with."""


def cuts(data: bytes, points: list[int]) -> list[bytes]:
    """``data`` split at ``points`` (taken modulo its length): the reads a socket might make."""
    edges = sorted({p % (len(data) + 1) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(edges)]
