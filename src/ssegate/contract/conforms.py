"""``isinstance`` against a runtime-checkable protocol, answered once per type: :func:`conforms`.

Python 3.11 checks a value against a ``runtime_checkable`` protocol by collecting the
protocol's members and looking each up on the value: 3.5-5 µs a check on a socket here, where
the answer kept costs 0.13 µs. The sockets under connections are checked several times for every
connection opened (their descriptor, their options), so a thousand clients that connect at once
paid 10-15 ms of the loop for it. Every value of one type has the same members here (sockets,
asyncio's and uvloop's wrappers of them), so the answer is kept per type and protocol.
"""

from __future__ import annotations

_answers: dict[tuple[type, type], bool] = {}


def conforms(value: object, protocol: type) -> bool:
    """``isinstance(value, protocol)``, for a ``runtime_checkable`` ``protocol`` whose members
    every value of ``type(value)`` has or lacks alike."""
    key = (type(value), protocol)
    answer = _answers.get(key)
    if answer is None:
        answer = _answers[key] = isinstance(value, protocol)
    return answer
