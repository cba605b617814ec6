"""Run by Python's ``site`` at the start of every process whose ``PYTHONPATH`` begins with this
directory: switches on :mod:`ssegate_lab.loop_lag` when ``SSEGATE_LAB_LOOP_LAG_DIR`` is set.

Python imports only the first ``sitecustomize`` it finds, so this one also runs the one it
shadows (an installation's own), if there is one.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("SSEGATE_LAB_LOOP_LAG_DIR"):
    from ssegate_lab import loop_lag

    loop_lag.install()


def _run_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_run_shadowed()
