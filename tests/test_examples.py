"""Every shipped example config passes ``ssegate validate`` with the env file shipped beside it.

The env file of ``examples/<dir>/<name>.yaml`` is ``<name>.env.example`` next to it. The CLI runs
in a process whose environment holds nothing but ``PATH``, so every ``${{env.NAME}}`` comes from
the file, except where a test sets one: the environment wins over the file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CONFIGS = sorted(
    path for path in EXAMPLES.glob("*/*.yaml") if "${{env." in path.read_text(encoding="utf-8")
)


def validate(config: Path, env_file: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ssegate",
            "validate",
            "-c",
            str(config),
            "--env-file",
            str(env_file),
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        cwd="/",
        timeout=60,
    )


def env_file_of(config: Path) -> Path:
    return config.with_name(config.name.removesuffix(".yaml") + ".env.example")


def test_the_examples_with_env_variables_are_the_five_gateway_configs() -> None:
    assert [str(c.relative_to(EXAMPLES)) for c in CONFIGS] == [
        "asyncapi/zilla.kafka.yaml",
        "asyncapi/zilla.yaml",
        "dashboard/zilla.yaml",
        "sse.kafka/zilla.yaml",
        "sse.proxy/zilla.yaml",
    ]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: str(c.relative_to(EXAMPLES)))
def test_an_example_validates_with_its_env_file(config: Path) -> None:
    result = validate(config, env_file_of(config))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{config}: valid (")
    assert result.stderr == ""


def test_a_variable_set_in_the_environment_wins_over_the_env_file() -> None:
    config = EXAMPLES / "sse.proxy" / "zilla.yaml"
    result = validate(config, env_file_of(config), KEYSTORE_PASSWORD="not-the-password")
    assert result.returncode == 2
    assert result.stderr == (
        "ssegate: vaults.my_servers.options.keys.password:"
        " wrong password for '../tls/localhost.p12'\n"
    )


def test_an_env_file_that_cannot_be_read_is_one_line_and_status_2(tmp_path: Path) -> None:
    config = EXAMPLES / "sse.proxy" / "zilla.yaml"
    missing = tmp_path / "none.env"
    result = validate(config, missing)
    assert result.returncode == 2
    assert (
        result.stderr
        == f"ssegate: {missing}: cannot read the env file: No such file or directory\n"
    )


def test_start_reads_the_env_file_too(tmp_path: Path) -> None:
    config = EXAMPLES / "sse.proxy" / "zilla.yaml"
    missing = tmp_path / "none.env"
    result = subprocess.run(
        [sys.executable, "-m", "ssegate", "start", "-c", str(config), "--env-file", str(missing)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (
        2,
        f"ssegate: {missing}: cannot read the env file: No such file or directory\n",
    )
