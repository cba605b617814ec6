"""``--env-file`` is operator input: whatever the file holds, ``validate`` and ``start`` answer
with one line naming the file (and the line) and exit 2, never a traceback, a hang or unbounded
memory; and a config the file's variables would carry past the size limit is refused after
substitution too. Each case runs the real CLI in a process of its own with a memory limit."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ssegate.config.env_file import MAX_VARIABLES, check_env_text
from ssegate.config.errors import ConfigError
from ssegate.telemetry.log import MAX_FIELD_CHARS

CONFIG = """\
name: env-file
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {host: "${{env.HOST}}", port: 8080}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    routes:
      - exit: east_http_filesystem
  east_http_filesystem:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /{path}
        with:
          path: ${params.path}
        exit: east_filesystem_server
  east_filesystem_server:
    type: filesystem
    kind: server
    options:
      location: "${{env.WWW}}"
"""
MEMORY_LIMIT = 2 * 1024 * 1024 * 1024


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def ssegate(command: str, config: Path, env_file: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ssegate", command, "-c", str(config), "--env-file", env_file]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        preexec_fn=_limited,
        timeout=60,
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "www").mkdir()
    path = tmp_path / "zilla.yaml"
    path.write_text(CONFIG)
    return path


def doubling_chain(links: int) -> str:
    lines = ["HOST=127.0.0.1", "WWW=www", "B0=xxxxxxxxxxxxxxxx"]
    lines += [f"B{n}=${{B{n - 1}}}${{B{n - 1}}}" for n in range(1, links + 1)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    "nul": ("HOST=127.0.0.1\nWWW=w\0w\n", "line 2: holds the control character U+0000"),
    "escaped-bell": ('HOST=127.0.0.1\nWWW="w\\aw"\n', "line 2: WWW's value holds the control"),
    "escape": ("HOST=127.0.0.1\x1b[2J\n", "line 1: holds the control character U+001B"),
    "not-a-line": ("HOST=127.0.0.1\nthis is not one\n", "line 2: is not a NAME=value line"),
    "doubling": (doubling_chain(40), "line 4: B1's value holds '${': ssegate does not expand"),
    "unclosed": ('WWW="' + "${" * 1_000_000 + '"\n', "line 1: WWW's value holds '${'"),
    "many": (
        "".join(f"V{n}=1\n" for n in range(MAX_VARIABLES + 1)),
        f"line {MAX_VARIABLES + 1}: the file sets more than {MAX_VARIABLES} variables",
    ),
    "not-utf8": ("HOST=\udcff\n", "the env file is not UTF-8 text (byte 5)"),
}


@pytest.mark.parametrize("command", ["validate", "start"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_env_file_is_refused_in_one_line_naming_its_line(
    config: Path, tmp_path: Path, command: str, case: str
) -> None:
    text, reason = HOSTILE[case]
    env_file = tmp_path / "hostile.env"
    env_file.write_bytes(text.encode("utf-8", "surrogateescape"))
    result = ssegate(command, config, str(env_file))
    assert result.returncode == 2
    assert result.stderr.startswith(f"ssegate: {env_file}: {reason}"), result.stderr[:300]
    assert result.stderr.count("\n") == 1


def test_an_endless_env_file_is_read_no_further_than_the_size_limit(config: Path) -> None:
    result = ssegate("validate", config, "/dev/zero")
    assert (result.returncode, result.stderr) == (
        2,
        "ssegate: /dev/zero: the env file is larger than the size limit of 4194304 bytes (4 MiB)\n",
    )


def test_variables_that_carry_the_config_past_its_size_limit_are_refused(
    config: Path, tmp_path: Path
) -> None:
    env_file = tmp_path / "large.env"
    env_file.write_text(f"HOST=127.0.0.1\nWWW={'w' * (4 * 1024 * 1024 - 100)}\n")
    result = ssegate("validate", config, str(env_file))
    assert (result.returncode, result.stderr) == (
        2,
        f"ssegate: {config}: the config, its environment expressions substituted, is larger"
        " than the size limit of 4194304 bytes (4 MiB)\n",
    )


def test_a_long_value_is_cut_in_the_line_that_shows_it(config: Path, tmp_path: Path) -> None:
    env_file = tmp_path / "long.env"
    env_file.write_text(f"HOST=127.0.0.1\nWWW=www/{'w' * 1_000_000}\n")
    result = ssegate("validate", config, str(env_file))
    assert result.returncode == 0, result.stderr
    (warning,) = [line for line in result.stderr.splitlines() if "location_missing" in line]
    assert f"...({len(str(config.parent)) + 1_000_005} characters)" in warning
    assert len(warning) < MAX_FIELD_CHARS + 200


def test_quotes_comments_and_export_are_read_as_dotenv_reads_them(
    config: Path, tmp_path: Path
) -> None:
    env_file = tmp_path / "good.env"
    env_file.write_text("# a comment\nexport HOST='127.0.0.1'\nWWW=\"www\"  # trailing\n")
    result = ssegate("validate", config, str(env_file))
    assert (result.returncode, result.stderr) == (0, "")


def test_a_refused_line_is_named_in_a_larger_file() -> None:
    text = "A=1\n\n# note\nB='two\nlines'\nC=3\x7f\n"
    with pytest.raises(ConfigError) as refused:
        check_env_text(text, "f.env")
    assert str(refused.value) == "f.env: line 6: holds the control character U+007F"
