"""``zilla.yaml`` text from a hostile or careless author: a config or a ``ConfigError``.

Whatever the text (arbitrary characters, YAML's own syntax in any order, anchors, aliases and
tags, ``${{env}}`` expressions, zilla-shaped documents with values of any type, and line edits
of the real seed configs), loading it ends in a resolved config or a ``ConfigError`` with a
message, never another exception.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from ssegate.config.errors import ConfigError
from ssegate.config.loader import load_config_text
from ssegate.config.model import Config

from .profiles import FUZZ

FIXTURES = Path(__file__).resolve().parents[1] / "config" / "fixtures"
SEEDS = [path.read_text() for path in sorted(FIXTURES.glob("*.zilla.yaml"))]
ENV = {"KEYSTORE_PASSWORD": "secret", "PORT": "7143"}

YAML_PIECES = [
    "name: fuzz",
    "bindings:",
    "guards:",
    "vaults:",
    "telemetry:",
    "type: http",
    "type: tcp",
    "kind: server",
    "exit: a",
    "options:",
    "routes:",
    "when:",
    "port: 7143",
    "  ",
    "\t",
    "- ",
    "\n",
    ": ",
    "&a ",
    "*a",
    "<<: *a",
    "!!str ",
    "!!binary ",
    "!!python/object:os.system ",
    "!custom ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "? ",
    "|",
    ">-",
    "'",
    '"',
    "#",
    "---",
    "...",
    "%YAML 1.1",
    "${{env.PORT}}",
    "${{env.UNSET}}",
    "${{env.",
    "${{",
    "}}",
    "~",
    "1e999",
    "0x1F",
    "\ufeff",
    "\x00",
]
SOUP = st.lists(st.sampled_from(YAML_PIECES) | st.text(max_size=4), max_size=60).map("".join)

KEYS = st.sampled_from(
    ["name", "bindings", "type", "kind", "options", "routes", "exit", "when", "with", "guarded",
     "vault", "telemetry", "port", "host", "versions", "keys", "location", "topic", "path"]
) | st.text(max_size=5)  # fmt: skip
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=24,
)
DOCUMENTS = st.fixed_dictionaries(
    {"name": st.text(max_size=6) | st.just("fuzz")},
    optional={
        "bindings": st.dictionaries(
            st.text(max_size=6),
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["tcp", "tls", "http", "sse", "sse-kafka", "kafka"]),
                    "kind": st.sampled_from(["server", "client", "proxy", "cache_server"]),
                },
                optional={"options": VALUES, "routes": VALUES, "exit": VALUES},
            ),
            max_size=3,
        ),
        "guards": VALUES,
        "vaults": VALUES,
        "telemetry": VALUES,
    },
).map(lambda document: yaml.safe_dump(document, allow_unicode=True))


def _edited(seed: int, edits: list[tuple[int, str, str]]) -> str:
    """A seed config with lines deleted, doubled, re-indented or overwritten."""
    lines = SEEDS[seed % len(SEEDS)].splitlines()
    for at, edit, text in edits:
        if not lines:
            break
        at %= len(lines)
        if edit == "delete":
            del lines[at]
        elif edit == "double":
            lines.insert(at, lines[at])
        elif edit == "indent":
            lines[at] = "  " + lines[at]
        elif edit == "dedent":
            lines[at] = lines[at][2:]
        elif edit == "value":
            key = lines[at].split(":", 1)[0]
            lines[at] = f"{key}: {text}"
        else:
            lines.insert(at, text)
    return "\n".join(lines) + "\n"


EDITED = st.builds(
    _edited,
    st.integers(0, 10),
    st.lists(
        st.tuples(
            st.integers(0, 500),
            st.sampled_from(["delete", "double", "indent", "dedent", "value", "insert"]),
            SOUP | st.text(max_size=10),
        ),
        min_size=1,
        max_size=4,
    ),
)


@FUZZ
@given(text=st.one_of(st.text(max_size=200), SOUP, DOCUMENTS, EDITED))
@example(text="?")  # a null key: its path is shown as [None]
@example(text="²:\n0:")  # a key that is a digit to str.isdigit but not to int()
def test_any_config_text_gives_a_config_or_a_config_error(
    text: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    base = str(tmp_path_factory.getbasetemp())
    try:
        config = load_config_text(text, source="fuzz.yaml", base_dir=base, env=ENV)
    except ConfigError as exc:
        assert str(exc).strip()
        return
    assert isinstance(config, Config)
