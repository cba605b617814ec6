"""``.proto`` text compiled by protoc (the one grpcio-tools ships) into file descriptors.

:func:`compile_proto` writes a schema as ``schema.proto`` into an empty temporary directory and
runs ``python -m grpc_tools.protoc`` there with ``--include_imports``: the answer is the
schema's ``FileDescriptorProto`` and those of the files it imports, imports first. The include
path is that directory and the ``google/protobuf`` files grpcio-tools ships (the well-known
types, ``descriptor.proto`` for custom options), so those are what a schema can import.
Everything protoc reads is protoc's: proto2, proto3, the editions it supports, maps, oneofs,
groups, options, extensions, services.

protoc runs in a child process (about 50 ms of CPU a schema, mostly the child Python's start,
against 0.6 ms in-process), because in-process it prints its diagnostics on the process's own
standard error: reading them would mean redirecting file descriptor 2 under every other thread.
A schema is compiled once per process (the descriptors are kept by its text), not per model and
never per message.

Errors are :class:`ProtoSchemaError`: protoc's first error in the schema, as
``line L, column C: <protoc's message>`` (both from 1, as protoc counts them).
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from google.protobuf.descriptor_pb2 import FileDescriptorProto, FileDescriptorSet
from google.protobuf.message import DecodeError

SCHEMA_FILE = "schema.proto"
DESCRIPTOR_SET = "schema.pb"
TIMEOUT = 30.0
"""Seconds protoc may take for one schema."""
CACHED_SCHEMAS = 256
"""How many schemas' compiled descriptors a process keeps, by their text."""
_DIAGNOSTIC = re.compile(
    r"(?P<file>[^:\s]+\.proto)(?::(?P<line>\d+):(?P<column>\d+))?: (?P<message>.*)"
)
"""One line of protoc's: ``schema.proto:4:3: "Foo" is not defined.``, ``x.proto: File not
found.``; a message that starts with ``warning:`` is a warning, one that starts with a space a
note on the line before."""


class ProtoSchemaError(ValueError):
    """``.proto`` text protoc refuses; with a position, the text starts ``line L, column C:``."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        where = f"line {line}, column {column}: " if line is not None else ""
        super().__init__(f"{where}{message}")
        self.line = line
        self.column = column


def compile_proto(text: str) -> tuple[FileDescriptorProto, ...]:
    """The files of a schema: those it imports, then its own (named ``schema.proto``).
    Raises ProtoSchemaError."""
    return tuple(FileDescriptorSet.FromString(_descriptor_set(text)).file)


@functools.lru_cache(maxsize=CACHED_SCHEMAS)
def _descriptor_set(text: str) -> bytes:
    """protoc's ``FileDescriptorSet`` for ``text``, kept for the next model with the same schema
    (each topic's model, each worker rebuilding the config)."""
    with tempfile.TemporaryDirectory(prefix="ssegate-proto-") as folder:
        Path(folder, SCHEMA_FILE).write_text(text, encoding="utf-8")
        command = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I.",
            "--include_imports",
            f"--descriptor_set_out={DESCRIPTOR_SET}",
            SCHEMA_FILE,
        ]
        try:
            done = subprocess.run(
                command,
                cwd=folder,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ProtoSchemaError(f"protoc did not finish within {TIMEOUT:g} s") from None
        except OSError as exc:
            raise ProtoSchemaError(f"protoc could not be started: {exc}") from None
        if done.returncode != 0:
            raise refusal(done.stderr.decode("utf-8", "replace"), done.returncode)
        try:
            written = Path(folder, DESCRIPTOR_SET).read_bytes()
            found = FileDescriptorSet.FromString(written)
        except (OSError, DecodeError) as exc:
            raise ProtoSchemaError(f"protoc left no readable descriptor set: {exc}") from None
    if not found.file or found.file[-1].name != SCHEMA_FILE:
        raise ProtoSchemaError("protoc's descriptor set does not end with the schema")
    return written


def refusal(stderr: str, status: int) -> ProtoSchemaError:
    """The error protoc's output describes: its first error in the schema, with the count of
    its other errors (not its warnings, notes or log lines), else the last line it wrote
    (protoc or grpcio-tools could not run)."""
    lines = stderr.splitlines()
    said = [found for found in map(_DIAGNOSTIC.fullmatch, lines) if found is not None]
    errors = [found for found in said if not found["message"].startswith(("warning: ", " "))]
    first = next((e for e in errors if e["file"] == SCHEMA_FILE and e["line"] is not None), None)
    if first is None:
        written = [line.strip() for line in lines if line.strip()]
        last = errors[0].group() if errors else written[-1] if written else "no message"
        return ProtoSchemaError(f"protoc exited with status {status}: {last}")
    message = first["message"]
    if message.startswith("Import ") and message.endswith(" was not found or had errors."):
        message += " Only the google/protobuf files can be imported."
    others = len(errors) - 1
    if others:
        message += f" (and {others} more error{'s' if others > 1 else ''})"
    return ProtoSchemaError(message, int(first["line"]), int(first["column"]))
