"""The ``ssegate`` command: validate and start gateways, and run the tools that come with it.

Every failure a user can cause ends in one line on stderr and a non-zero status: 2 for a bad
config or bad arguments, 1 for anything that went wrong while running. No traceback reaches the
terminal for those.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

from ssegate import __version__
from ssegate.config.errors import ConfigError, NotSupportedYet

EXIT_CONFIG = 2


def main(argv: Sequence[str] | None = None) -> int:
    register_expanders()
    parser = _parser()
    args = parser.parse_args(argv)
    args.own_process = argv is None  # the command line this process was started with
    logging.basicConfig(
        level=logging.getLevelNamesMapping()[args.log_level.upper()],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.func is None:
        parser.print_help()
        return EXIT_CONFIG
    try:
        status: int = args.func(args)
    except ConfigError as exc:
        print(f"ssegate: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    return status


def register_expanders() -> None:
    """Give the config loader the binding types that stand for other bindings: ``asyncapi``
    (:func:`ssegate.asyncapi.expand.expand_asyncapi`), which the config layer cannot import."""
    from ssegate.asyncapi.expand import expand_asyncapi
    from ssegate.config.loader import register_expander

    register_expander("asyncapi", expand_asyncapi)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssegate",
        description="A Server-Sent Events gateway that reads Zilla's zilla.yaml.",
    )
    parser.add_argument("--version", action="version", version=f"ssegate {__version__}")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("SSEGATE_LOG_LEVEL", "warning"),
        choices=["debug", "info", "warning", "error"],
        help="what reaches stderr (default: warning, or $SSEGATE_LOG_LEVEL)",
    )
    parser.set_defaults(func=None)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    validate = commands.add_parser(
        "validate",
        help="check a zilla.yaml and exit",
        description="Check a config: schema, binding graph, vaults and keystores. Exit 0 when"
        " it can run, 2 with one line per problem (each naming its YAML path) when not.",
    )
    validate.add_argument("-c", "--config", required=True, metavar="FILE", help="zilla.yaml")
    _env_file_option(validate)
    validate.set_defaults(func=_validate)

    start = commands.add_parser(
        "start",
        help="run a gateway in the foreground",
        description="Run the gateway a config describes until SIGINT or SIGTERM, which drain"
        " open streams and exit 0 within 5 seconds.",
    )
    start.add_argument("-c", "--config", required=True, metavar="FILE", help="zilla.yaml")
    start.add_argument(
        "--workers",
        type=_positive_int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="worker processes sharing each port with SO_REUSEPORT (default: cores)",
    )
    start.add_argument(
        "--reuse-port",
        action="store_true",
        help="share the ports with other ssegate processes (SO_REUSEPORT) even with one worker;"
        " processes sharing a port pass HTTP/1.1 challenge answers to each other",
    )
    _env_file_option(start)
    start.set_defaults(func=_start)

    # The tools that come with the gateway; each module registers its own commands.
    from ssegate.asyncapi.cli import add_asyncapi_parser
    from ssegate.pipeline.cli import add_pipeline_parser
    from ssegate.tools.token import add_token_parser

    add_pipeline_parser(commands)
    add_token_parser(commands)
    add_asyncapi_parser(commands)
    # Commands of what is installed beside the gateway (the lab: `bench`, `kafka`).
    for entry in sorted(entry_points(group="ssegate.commands"), key=lambda e: e.name):
        register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]
        register = entry.load()
        register(commands)
    return parser


def _env_file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env-file",
        metavar="FILE",
        help="read ${{env.NAME}} values from FILE (dotenv: NAME=value lines); a variable"
        " already in the environment wins over the file",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _validate(args: argparse.Namespace) -> int:
    from ssegate.config.env_file import load_env_file
    from ssegate.config.loader import load_config
    from ssegate.engine.runtime import Runtime

    load_env_file(args.env_file)
    config = load_config(args.config)
    runtime = Runtime(config)
    warnings: list[str] = []
    for name in config.bindings:
        try:
            runtime.build_binding(name)
        except NotSupportedYet as exc:
            if str(exc) not in warnings:
                warnings.append(str(exc))
    checks: list[Callable[[], object]] = [
        *(lambda name=name: runtime.guard(name) for name in config.guards),
        *(lambda name=name: runtime.vault(name) for name in config.vaults),
        lambda: runtime.catalogs,
        *(lambda name=name: runtime.exporter(name) for name in config.exporters),
    ]
    for check in checks:
        try:
            check()
        except NotSupportedYet as exc:
            if str(exc) not in warnings:
                warnings.append(str(exc))
    if warnings:  # start would refuse these: so does validate, every one at once
        for line in warnings:
            print(f"ssegate: {line}", file=sys.stderr)
        return 2
    print(f"{args.config}: valid ({len(config.bindings)} bindings)")
    return 0


def _start(args: argparse.Namespace) -> int:
    if args.own_process:
        from ssegate.host import allocator

        allocator.choose()  # first: it may run this process again, on jemalloc
    from ssegate.config.env_file import load_env_file
    from ssegate.config.loader import load_config
    from ssegate.engine.process import serve
    from ssegate.engine.runtime import Runtime

    load_env_file(args.env_file)
    config = load_config(args.config)
    Runtime(config).build()  # every problem is reported before a worker starts

    def ready(runtime: Runtime) -> None:
        for binding, host, port in runtime.addresses:
            print(f"ssegate: {binding} listening on {host}:{port}", flush=True)
        print(f"ssegate: started '{config.name}' with {args.workers} worker(s)", flush=True)

    return serve(config, workers=args.workers, reuse_port=args.reuse_port, on_ready=ready)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
