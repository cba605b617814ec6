"""Each piece of host tuning has its own switch, and one switch turns them all off."""

from __future__ import annotations

from ssegate.host import switches


def test_a_piece_is_on_unless_its_own_variable_says_off() -> None:
    assert switches.GC.on({})
    assert not switches.GC.on({"SSEGATE_GC": "python"})
    assert switches.TURNS.on({"SSEGATE_GC": "python"})
    assert not switches.SHARED_FETCH.on({"SSEGATE_SHARED_FETCH": "off"})


def test_host_tuning_off_turns_every_piece_off_whatever_its_own_variable_says() -> None:
    environ = {"SSEGATE_HOST_TUNING": "off", "SSEGATE_ALLOCATOR": "jemalloc"}
    assert [switch.on(environ) for switch in switches.EVERY] == [False] * len(switches.EVERY)
