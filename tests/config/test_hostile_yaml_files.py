"""Every YAML file ssegate reads besides ``zilla.yaml`` is read within the same limits.

An AsyncAPI document named by an ``asyncapi`` binding (``ssegate validate`` and ``start``), one
given to ``ssegate asyncapi validate``, a config given to ``ssegate asyncapi expand``, and a
pipeline file (``ssegate pipeline check``): each over 4 MiB, or an alias bomb, is refused with
exit 2 and one line naming the file and the limit, never a traceback or a hang.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ssegate.cli import EXIT_CONFIG, main

ASYNCAPI_CONFIG = """\
name: hostile-spec
bindings:
  north:
    type: asyncapi
    kind: server
    options:
      specs:
        sse_api: spec.yaml
"""


def alias_bomb() -> str:
    """Nine levels of nine aliases each: 9**9 values once expanded, in a dozen lines."""
    lines = ["asyncapi: 3.0.0", "bomb:"]
    for level in range(9):
        values = "[1, 1, 1, 1, 1, 1, 1, 1, 1]"
        if level:
            values = "[" + ", ".join([f"*v{level - 1}"] * 9) + "]"
        lines.append(f"  l{level}: &v{level} {values}")
    return "\n".join(lines) + "\n"


def oversized() -> str:
    return "asyncapi: 3.0.0\n# " + "x" * (4 * 1024 * 1024) + "\n"


BOMB = "line 8, column 12: aliases expand to more than 100000 values (the alias expansion limit)"
OVER = "is larger than the size limit of 4194304 bytes (4 MiB)"
HOSTILE = {"alias-bomb": (alias_bomb(), BOMB), "over-4-mib": (oversized(), OVER)}


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == EXIT_CONFIG
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert error.count("\n") == 1, error
    return error


@pytest.mark.timeout(10)
@pytest.mark.parametrize("command", ["validate", "start"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_asyncapi_spec_of_a_binding_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    text, expected = HOSTILE[case]
    (tmp_path / "spec.yaml").write_text(text)
    (tmp_path / "zilla.yaml").write_text(ASYNCAPI_CONFIG)
    error = refusal([command, "-c", str(tmp_path / "zilla.yaml")], capsys)
    assert error.startswith("ssegate: bindings.north.options.specs.sse_api: ")
    assert "spec.yaml" in error and expected in error


@pytest.mark.timeout(10)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_document_given_to_asyncapi_validate_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    text, expected = HOSTILE[case]
    document = tmp_path / "api.yaml"
    document.write_text(text)
    error = refusal(["asyncapi", "validate", str(document)], capsys)
    assert error.startswith(f"ssegate: {document}: ") and expected in error


@pytest.mark.timeout(10)
def test_a_config_over_4_mib_given_to_asyncapi_expand_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "zilla.yaml"
    config.write_text(ASYNCAPI_CONFIG + "# " + "x" * (4 * 1024 * 1024) + "\n")
    error = refusal(["asyncapi", "expand", "-c", str(config)], capsys)
    assert error == f"ssegate: {config}: the config file {OVER}\n"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_pipeline_file_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    text, expected = HOSTILE[case]
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(text.replace("asyncapi: 3.0.0", "name: hostile"))
    error = refusal(["pipeline", "check", "-c", str(pipeline)], capsys)
    assert error.startswith(f"ssegate: {pipeline}: ") and expected in error
    if case == "over-4-mib":
        assert error == f"ssegate: {pipeline}: the pipeline file {OVER}\n"
