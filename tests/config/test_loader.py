"""Loading zilla.yaml files: environment expressions, YAML problems, the seed configs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ssegate.config.errors import ConfigError, ConfigErrors
from ssegate.config.loader import load_config, load_config_text, substitute_env

FIXTURES = Path(__file__).parent / "fixtures"
ENV = {"KEYSTORE_PASSWORD": "generated"}


def messages(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    error = exc.value
    return [str(e) for e in error.errors] if isinstance(error, ConfigErrors) else [str(error)]


def test_sse_proxy_seed_loads_with_its_keystore_password_from_the_environment() -> None:
    config = load_config(FIXTURES / "sse-proxy.zilla.yaml", env=ENV)

    assert config.name == "example"
    assert config.vaults["my_servers"].options["keys"]["password"] == "generated"
    assert config.guards["authn_jwt"].options["challenge"] == 10
    assert config.bindings["north_tls_server"].exit == "north_http_server"
    assert config.exporters["stdout_logs_exporter"].type == "stdout"
    assert config.base_dir == str(FIXTURES)
    assert config.source == str(FIXTURES / "sse-proxy.zilla.yaml")


def test_sse_kafka_seed_loads_with_its_keystore_password_from_the_environment() -> None:
    config = load_config(str(FIXTURES / "sse-kafka.zilla.yaml"), env=ENV)

    assert config.bindings["north_tcp_server"].options["port"] == [7143, 7114]
    assert config.bindings["north_sse_kafka_mapping"].routes[0].with_ == {
        "topic": "${params.topic}"
    }
    assert config.bindings["south_kafka_client"].exit == "south_tcp_client"


def test_load_config_reads_os_environ_when_no_env_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEYSTORE_PASSWORD", "from-os")

    config = load_config(FIXTURES / "sse-proxy.zilla.yaml")

    assert config.vaults["my_servers"].options["keys"]["password"] == "from-os"


def test_unset_variable_is_named_with_its_yaml_path_and_line() -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(FIXTURES / "sse-proxy.zilla.yaml", env={})

    assert messages(exc) == [
        "vaults.my_servers.options.keys.password: "
        "environment variable 'KEYSTORE_PASSWORD' is not set (line 11)"
    ]


def test_unset_variable_in_broken_yaml_is_reported_by_line() -> None:
    text = "name: x\nbindings: {a: [\npassword: ${{env.NOPE}}\n"

    with pytest.raises(ConfigError) as exc:
        load_config_text(text, env={})

    assert messages(exc)[0] == "line 3: environment variable 'NOPE' is not set"
    assert messages(exc)[1].startswith("line 4, column 1: ")


def test_unset_variable_inside_a_comment_does_not_matter() -> None:
    text = "name: x  # was ${{env.OLD_NAME}}\n"

    assert load_config_text(text, env={}).name == "x"


def test_env_expression_allows_spaces_inside_the_braces() -> None:
    text, unset = substitute_env(
        "a: ${{ env.HOST }}\nb: ${{env.PORT}}\n", {"HOST": "h", "PORT": "1"}
    )

    assert (text, unset) == ("a: h\nb: 1\n", [])


def test_params_and_guarded_expressions_are_not_environment_expressions() -> None:
    source = "p: ${params.path}\ng: ${guarded['jwt'].identity}\ne: ${{ env.A }}\n"

    text, unset = substitute_env(source, {"A": "1"})

    assert text == "p: ${params.path}\ng: ${guarded['jwt'].identity}\ne: 1\n"
    assert unset == []


def test_yaml_syntax_error_gives_line_and_column() -> None:
    with pytest.raises(ConfigError) as exc:
        load_config_text("name: x\nbindings:\n  a: b: c\n", env={})

    assert messages(exc) == ["line 3, column 7: mapping values are not allowed here"]


def test_duplicate_key_is_rejected_with_both_lines() -> None:
    with pytest.raises(ConfigError) as exc:
        load_config_text("name: x\nbindings: {}\nname: y\n", env={})

    assert messages(exc) == ["line 3, column 1: duplicate key 'name' (first at line 1)"]


def test_empty_document_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as exc:
        load_config_text("# nothing yet\n", source="zilla.yaml", env={})

    assert str(exc.value) == (
        "zilla.yaml: the config is empty; it needs at least 'name' and 'bindings'"
    )


def test_top_level_list_is_rejected() -> None:
    with pytest.raises(ConfigError) as exc:
        load_config_text("- name: x\n", source="zilla.yaml", env={})

    assert (
        str(exc.value) == "zilla.yaml: the config must be a mapping of top-level keys, not a list"
    )


def test_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"

    with pytest.raises(ConfigError) as exc:
        load_config(missing, env={})

    assert str(exc.value) == f"{missing}: cannot read the config file: No such file or directory"


def test_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "zilla.yaml"
    path.write_bytes(b"name: \xff\n")

    with pytest.raises(ConfigError) as exc:
        load_config(path, env={})

    assert str(exc.value) == f"{path}: the config file is not UTF-8 text (byte 6)"


def test_relative_paths_resolve_against_the_config_directory(tmp_path: Path) -> None:
    path = tmp_path / "zilla.yaml"
    path.write_text("name: x\n")

    config = load_config(os.path.relpath(path), env={})

    assert config.base_dir == str(tmp_path)
    assert config.bindings == {}


def test_twelve_unset_variables_are_each_reported_once_at_their_own_path() -> None:
    names = [f"UNSET_{n}" for n in range(12)]
    bindings = "".join(
        f"  tcp_{n}:\n    type: tcp\n    kind: server\n"
        f"    options: {{host: 127.0.0.1, port: '${{{{env.{name}}}}}'}}\n"
        for n, name in enumerate(names)
    )
    text = f"name: x\nbindings:\n{bindings}"

    with pytest.raises(ConfigError) as exc:
        load_config_text(text, env={})

    assert messages(exc) == [
        f"bindings.tcp_{n}.options.port: "
        f"environment variable '{name}' is not set (line {6 + 4 * n})"
        for n, name in enumerate(names)
    ]
