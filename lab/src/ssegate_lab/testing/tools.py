"""What tests take from ``./run``'s setup step: found, never fetched or built during a test."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssegate.cache import NotPrepared


def prepared(step: str) -> Path:
    """The artifact of setup step ``step`` (see :mod:`ssegate_lab.setup_tools`).

    When it is missing the test fails at once, saying which ``./run`` step provides it (for
    example ``the Apicurio registry 2.4.2.Final jar is missing (...): run ./run test or ./run
    setup (setup step 'registry')``).
    """
    from ssegate_lab.setup_tools import SetupFailed
    from ssegate_lab.setup_tools import prepared as find

    try:
        return find(step)
    except (NotPrepared, SetupFailed) as missing:
        reason = str(missing)
    pytest.fail(reason, pytrace=False)
