"""protoc on ``.proto`` text: the files it hands back, and its errors turned into one line that
says where (the schema's line and column) and what, ignoring its warnings, notes and log lines."""

from __future__ import annotations

import pytest

from ssegate.models import proto_compiler
from ssegate.models.proto_compiler import ProtoSchemaError, compile_proto, refusal

IMPORTS_TWO = """
syntax = "proto3";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
message A { google.protobuf.Struct s = 1; }
"""


def test_the_schema_comes_last_after_every_file_it_imports_even_unused_ones() -> None:
    names = [file.name for file in compile_proto(IMPORTS_TWO)]
    assert names[-1] == "schema.proto"
    assert set(names[:-1]) == {
        "google/protobuf/struct.proto",
        "google/protobuf/timestamp.proto",
    }


@pytest.mark.parametrize("path", ["../schema.proto", "/etc/hostname", "other.proto"])
def test_a_schema_can_import_no_file_but_the_google_protobuf_ones(path: str) -> None:
    with pytest.raises(ProtoSchemaError) as raised:
        compile_proto(f'syntax = "proto3";\nimport "{path}";\n')
    assert (raised.value.line, raised.value.column) == (2, 1)
    assert f'Import "{path}" was not found' in str(raised.value)


def test_warnings_notes_and_log_lines_are_not_counted_as_errors() -> None:
    stderr = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "W0000 00:00:1.0 1 parser.cc:659] No edition or syntax specified for the proto file\n"
        "schema.proto:2:1: warning: Import google/protobuf/any.proto is unused.\n"
        "schema.proto:3:13: End-of-file inside block comment.\n"
        "schema.proto:1:1:   Comment started here.\n"
    )
    error = refusal(stderr, 1)
    assert str(error) == "line 3, column 13: End-of-file inside block comment."
    assert (error.line, error.column) == (3, 13)


def test_the_first_error_in_the_schema_is_given_with_the_count_of_the_others() -> None:
    stderr = (
        "x.proto: File not found.\n"
        'schema.proto:2:1: Import "x.proto" was not found or had errors.\n'
        'schema.proto:4:3: "x.Y" is not defined.\n'
    )
    assert str(refusal(stderr, 1)) == (
        'line 2, column 1: Import "x.proto" was not found or had errors.'
        " Only the google/protobuf files can be imported. (and 2 more errors)"
    )


def test_a_protoc_that_could_not_run_is_reported_with_its_status_and_last_line() -> None:
    stderr = (
        "Traceback (most recent call last):\nModuleNotFoundError: No module named 'grpc_tools'\n"
    )
    assert str(refusal(stderr, 1)) == (
        "protoc exited with status 1: ModuleNotFoundError: No module named 'grpc_tools'"
    )
    assert str(refusal("", -9)) == "protoc exited with status -9: no message"


def test_a_protoc_past_its_deadline_is_an_error_not_a_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(proto_compiler, "TIMEOUT", 0.001)
    with pytest.raises(ProtoSchemaError, match=r"protoc did not finish within 0\.001 s"):
        compile_proto(IMPORTS_TWO + "// not compiled before\n")


def test_a_text_compiled_once_is_not_given_to_protoc_again(monkeypatch: pytest.MonkeyPatch) -> None:
    text = IMPORTS_TWO + "// compiled once\n"
    first = compile_proto(text)
    monkeypatch.setattr(proto_compiler, "TIMEOUT", 0.000001)  # any run of protoc now fails
    assert compile_proto(text) == first
    with pytest.raises(ProtoSchemaError, match="did not finish"):
        compile_proto(text + "// another text\n")
