"""Where a config reads a guard's identity, so a guard knows whether a token must carry one.

Zilla's jwt guard takes a token without its identity claim (``sub`` by default) and gives it an
empty identity; Zilla's own example tokens have none. ssegate does the same wherever nothing
reads the identity, and refuses such a token (``token has no 'sub' claim``) for a guard whose
identity something does read, since an empty identity there would silently mean "everyone".

The identity is read in exactly one way: the expression ``${guarded['<guard>'].identity}`` (or
with ``"<guard>"``) in a value a binding renders per request: a route's ``with`` (the
sse-kafka topic, filters, event id), or an option. :func:`identity_readers` finds every such
place, by YAML path. Nothing else reads it: attributes (``${guarded[...].attributes.x}``) are
other claims; role checks read roles; a challenge answer extends only streams whose roles it
covers, so among tokens without an identity it grants nothing a fresh request could not get.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ssegate.config.model import Config

_IDENTITY = re.compile(r"""\$\{\s*guarded\[\s*(?:'([^']+)'|"([^"]+)")\s*\]\.identity\s*\}""")


def identity_readers(config: Config, guard: str) -> list[str]:
    """The YAML paths of every value in ``config`` that reads ``guard``'s identity."""
    found = []
    for binding in config.bindings.values():
        places: list[tuple[str, object]] = [(f"{binding.path}.options", binding.options)]
        places += [(f"{route.path}.with", route.with_) for route in binding.routes]
        for where, value in places:
            for path, text in _strings(where, value):
                if any(_guard_of(m) == guard for m in _IDENTITY.finditer(text)):
                    found.append(path)
    return found


def _guard_of(match: re.Match[str]) -> str:
    return match.group(1) or match.group(2)


def _strings(where: str, value: object) -> Iterator[tuple[str, str]]:
    """Every string inside ``value``, with its YAML path."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(f"{where}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(f"{where}[{index}]", item)
