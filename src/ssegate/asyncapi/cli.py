"""``ssegate asyncapi``: export a config's SSE endpoints, check a document, show an expansion.

- ``ssegate asyncapi export -c zilla.yaml [-o FILE]``: the AsyncAPI 3.0.0 document (JSON; YAML
  when FILE ends in ``.yaml``/``.yml``) of the config's SSE endpoints.
- ``ssegate asyncapi validate FILE``: check an AsyncAPI 3.0.0/2.6.0 document as an
  ``asyncapi`` binding reads it (:mod:`~ssegate.asyncapi.roles`: the official schema, every
  ``$ref``, the rules of an SSE document); exit 2 with ``<json pointer>: <problem>`` when it
  fails. A valid document's notes (where it relies on Zilla's reading rather than the AsyncAPI
  specification) follow, one ``note:`` line each.
- ``ssegate asyncapi expand -c zilla.yaml``: the config with its ``asyncapi`` bindings expanded,
  as YAML, to see what runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import yaml

from ssegate.config.errors import ConfigError
from ssegate.config.yaml_reader import read_text


def add_asyncapi_parser(commands: Any) -> None:
    asyncapi = commands.add_parser(
        "asyncapi",
        help="export, check or expand AsyncAPI documents",
        description="AsyncAPI 3.0.0 (and 2.6.0) documents for ssegate configs.",
    )
    asyncapi.set_defaults(func=lambda _: _usage(asyncapi))
    tools = asyncapi.add_subparsers(title="tools", metavar="TOOL")
    export = tools.add_parser("export", help="write the AsyncAPI 3.0 document of a config")
    export.add_argument("-c", "--config", required=True, metavar="FILE", help="zilla.yaml")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default stdout)")
    export.set_defaults(func=_export)
    check = tools.add_parser("validate", help="check an AsyncAPI document")
    check.add_argument("document", metavar="FILE")
    check.set_defaults(func=_validate)
    expand = tools.add_parser("expand", help="print a config with asyncapi bindings expanded")
    expand.add_argument("-c", "--config", required=True, metavar="FILE", help="zilla.yaml")
    expand.set_defaults(func=_expand)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _export(args: argparse.Namespace) -> int:
    from ssegate.asyncapi.export import export_document
    from ssegate.config.loader import load_config

    document = export_document(load_config(args.config))
    output: str | None = args.output
    if output and output.endswith((".yaml", ".yml")):
        text = yaml.safe_dump(document, sort_keys=False)
    else:
        text = json.dumps(document, indent=2) + "\n"
    if not output:
        sys.stdout.write(text)
        return 0
    try:
        with open(output, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        print(f"ssegate: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def _validate(args: argparse.Namespace) -> int:
    from ssegate.asyncapi.document import AsyncApiError
    from ssegate.asyncapi.roles import check_spec, read_spec

    text = read_text(args.document, "AsyncAPI document")
    try:
        api = read_spec(text, args.document)
        role = check_spec(api)
    except AsyncApiError as exc:
        raise ConfigError(args.document, str(exc)) from None
    counts = f"{len(api.channels)} channels, {len(api.operations)} operations"
    kind = {"sse": "SSE ", "kafka": "Kafka "}.get(role, "")
    print(f"{args.document}: valid {kind}AsyncAPI {api.version} ({counts})")
    for note in api.notes:
        print(f"{args.document}: note: {note}")
    return 0


def _expand(args: argparse.Namespace) -> int:
    from ssegate.asyncapi.expand import expand_asyncapi
    from ssegate.config.loader import load_config_text, parse_document
    from ssegate.config.validate import validate_document

    text = read_text(args.config)
    base_dir = os.path.dirname(os.path.abspath(args.config))
    document = parse_document(text, source=args.config)
    validate_document(document)
    expanded = expand_asyncapi(document, base_dir=base_dir)
    load_config_text(text, source=args.config, base_dir=base_dir)  # the resolver's checks too
    sys.stdout.write(yaml.safe_dump(expanded, sort_keys=False))
    return 0
