"""``conforms``: a runtime-checkable protocol's answer, kept per type."""

from __future__ import annotations

import socket
from typing import Protocol, runtime_checkable

from ssegate.contract.conforms import conforms


@runtime_checkable
class HasFileno(Protocol):
    def fileno(self) -> int: ...


@runtime_checkable
class CanFly(Protocol):
    def fly(self) -> None: ...


def test_it_answers_as_isinstance_does_for_each_type_and_protocol() -> None:
    with socket.socket() as sock:
        assert conforms(sock, HasFileno) and not conforms(sock, CanFly)
        assert conforms(sock, HasFileno)  # kept, the same answer
    assert not conforms(None, HasFileno) and not conforms(3, HasFileno)
    with open(__file__) as file:
        assert conforms(file, HasFileno)
