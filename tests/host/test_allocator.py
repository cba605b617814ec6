"""The allocator a starting gateway chooses (:mod:`ssegate.host.allocator`): pure."""

from __future__ import annotations

import json

import pytest

from ssegate.config.errors import ConfigError
from ssegate.host.allocator import LIBRARY, RESTORE, plan, restored


def test_a_gateway_runs_itself_again_on_jemalloc_where_it_is_found() -> None:
    decided = plan({"PATH": "/bin"}, LIBRARY)
    assert decided.allocator == "jemalloc"
    assert decided.environment is not None
    assert decided.environment["LD_PRELOAD"] == LIBRARY
    assert decided.environment["PYTHONMALLOC"] == "malloc"
    assert decided.environment["PATH"] == "/bin"
    assert json.loads(decided.environment[RESTORE]) == {"LD_PRELOAD": None, "PYTHONMALLOC": None}


def test_a_preload_the_user_set_is_kept_beside_jemalloc_and_put_back_after() -> None:
    environ = {"LD_PRELOAD": "libtrace.so", "PYTHONMALLOC": "pymalloc_debug"}
    decided = plan(environ, LIBRARY)
    assert decided.environment is not None
    assert decided.environment["LD_PRELOAD"] == f"{LIBRARY} libtrace.so"
    again = restored(decided.environment)
    assert again == environ


def test_the_process_run_again_goes_on_and_gives_its_children_the_environment_first_given() -> None:
    first = plan({"HOME": "/root"}, LIBRARY).environment
    assert first is not None
    second = plan(first, LIBRARY)
    assert second == plan(first, None)  # found or not, it is running on jemalloc now
    assert second.allocator == "jemalloc" and second.environment is None
    assert restored(first) == {"HOME": "/root"}


def test_a_process_not_run_again_keeps_its_environment() -> None:
    assert restored({"HOME": "/root"}) is None


def test_python_keeps_cpythons_own_allocator() -> None:
    assert plan({"SSEGATE_ALLOCATOR": "python"}, LIBRARY).environment is None
    assert plan({"SSEGATE_ALLOCATOR": "python"}, LIBRARY).allocator == "python"


def test_without_the_library_the_gateway_goes_on_on_cpythons_allocator() -> None:
    decided = plan({}, None)
    assert decided.allocator == "python" and decided.environment is None


def test_jemalloc_asked_for_and_missing_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"SSEGATE_ALLOCATOR.*libjemalloc\.so\.2 is not on"):
        plan({"SSEGATE_ALLOCATOR": "jemalloc"}, None)


def test_an_unknown_allocator_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"SSEGATE_ALLOCATOR: 'tcmalloc' is not an allocator"):
        plan({"SSEGATE_ALLOCATOR": "tcmalloc"}, LIBRARY)


def test_a_process_started_on_jemalloc_already_is_not_run_again() -> None:
    environ = {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2", "PYTHONMALLOC": "malloc"}
    decided = plan(environ, LIBRARY)
    assert decided.allocator == "jemalloc" and decided.environment is None
