"""Hostile config files: ``ssegate validate`` (and ``start``) refuse each one with exit 2.

Each refusal is one line naming the limit exceeded, or the YAML path and the text of a
malformed ``${{`` expression; none is a traceback or a hang (the timeouts are pytest's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ssegate.cli import EXIT_CONFIG, main
from ssegate.config.errors import ConfigError
from ssegate.config.loader import load_config_text
from ssegate.config.yaml_reader import ConfigLimits

FILESYSTEM = """\
name: hostile
bindings:
  east_filesystem_server:
    type: filesystem
    kind: server
    options:
      location: {location}
"""


def alias_bomb() -> str:
    """Nine levels of nine aliases each: 9**9 ports once expanded, in 40 lines of YAML."""
    lines = ["name: bomb", "bindings:"]
    for level in range(9):
        ports = "[1, 1, 1, 1, 1, 1, 1, 1, 1]"
        if level:
            ports = "[" + ", ".join([f"*ports{level - 1}"] * 9) + "]"
        lines += [
            f"  tcp{level}:",
            "    type: tcp",
            "    kind: server",
            f"    options: {{host: 127.0.0.1, port: &ports{level} {ports}}}",
            f"    exit: tcp{(level + 1) % 9}",
        ]
    return "\n".join(lines) + "\n"


def refusal(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], *, command: str) -> str:
    """What ``ssegate <command>`` prints when it refuses the config ``text``."""
    config = tmp_path / "zilla.yaml"
    config.write_text(text)
    assert main([command, "-c", str(config)]) == EXIT_CONFIG
    error = capsys.readouterr().err
    assert "Traceback" not in error
    return error


HOSTILE = {
    "alias-bomb": (
        alias_bomb(),
        "line 31, column 47: aliases expand to more than 100000 values"
        " (the alias expansion limit), passed at alias *ports4",
    ),
    "nested-20000-deep": (
        "name: deep\nbindings:\n  a: " + "[" * 20000 + "]" * 20000 + "\n",
        "line 3, column 68: values nest more than 64 levels deep (the nesting limit)",
    ),
    "alias-nesting-past-the-limit": (
        f"name: deep\nbindings:\n  a: &deep {'[' * 40}{']' * 40}\n  b: {'[' * 40}*deep{']' * 40}\n",
        "line 4, column 46: values nest more than 64 levels deep (the nesting limit),"
        " through alias *deep",
    ),
    "alias-inside-what-it-names": (
        "name: loop\nbindings:\n  a: &loop [1, *loop]\n",
        "line 3, column 16: alias *loop refers to a collection that contains it",
    ),
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("command", ["validate", "start"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_config_is_refused_naming_the_limit_it_exceeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    text, expected = HOSTILE[case]
    assert refusal(tmp_path, text, capsys, command=command) == f"ssegate: {expected}\n"


@pytest.mark.timeout(10)
def test_a_config_over_4_mib_is_refused_at_the_size_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = FILESYSTEM.format(location="www") + "# " + "x" * (4 * 1024 * 1024) + "\n"
    error = refusal(tmp_path, text, capsys, command="validate")
    assert error == (
        f"ssegate: {tmp_path / 'zilla.yaml'}: the config file is larger than the size limit"
        " of 4194304 bytes (4 MiB)\n"
    )


@pytest.mark.parametrize(
    "expression",
    ["${{env.}}", "${{env.WWW_DIR", '"${{env.WWW_DIR"', "${{ WWW_DIR }}"],
    ids=["empty-name", "unclosed", "unclosed-quoted", "no-env"],
)
def test_a_malformed_env_expression_is_named_with_its_yaml_path_and_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expression: str
) -> None:
    error = refusal(tmp_path, FILESYSTEM.format(location=expression), capsys, command="validate")
    written = expression.strip('"') + ('"' if expression.startswith('"') else "")
    assert error == (
        "ssegate: bindings.east_filesystem_server.options.location: "
        f"{written!r} is not an environment expression ${{{{env.NAME}}}} (line 7)\n"
    )


def test_a_malformed_env_expression_in_a_comment_does_not_matter() -> None:
    text = FILESYSTEM.format(location="www  # not ${{env.") + "# nor ${{\n"
    assert load_config_text(text, env={}).name == "hostile"


def test_anchors_and_merge_keys_within_the_limits_still_load() -> None:
    text = """\
name: anchors
bindings:
  east_a:
    type: filesystem
    kind: server
    options: &files {location: www/a, symlinks: follow}
  east_b:
    type: filesystem
    kind: server
    options:
      <<: *files
      location: www/b
  east_c:
    type: filesystem
    kind: server
    options: *files
"""
    config = load_config_text(text, env={})
    options = {name: binding.options for name, binding in config.bindings.items()}
    assert options == {
        "east_a": {"location": "www/a", "symlinks": "follow"},
        "east_b": {"location": "www/b", "symlinks": "follow"},
        "east_c": {"location": "www/a", "symlinks": "follow"},
    }


def test_the_limits_can_be_set_lower() -> None:
    limits = ConfigLimits(max_bytes=64, max_depth=3, max_alias_nodes=2)
    with pytest.raises(ConfigError, match="larger than the size limit of 64 bytes"):
        load_config_text("name: x\n" + "#" * 64, env={}, limits=limits)
    with pytest.raises(ConfigError, match="more than 3 levels deep"):
        load_config_text("name: [[[x]]]\n", env={}, limits=limits)
    with pytest.raises(ConfigError, match="more than 2 values"):
        load_config_text("name: x\nbindings: {a: &a [1, 2], b: *a}\n", env={}, limits=limits)
