"""``python -m ssegate_lab.setup_tools [test|demo|STEP ...]``: fetch and build, before anything
runs, everything the tests and the demo would otherwise fetch or build on first use.

``./run`` calls it after installing the Python and Debian packages: ``test`` (the default) runs
every step, ``demo`` only those the demo needs. Each step prints what it fetches and, once done,
its size; a step whose artifact is present is skipped. Everything lands under the cache root
(:func:`ssegate.cache.cache_root`). The steps reuse the ``ensure_*`` functions of the modules
that need the artifacts, with the generous timeouts a cold machine needs.

Tests never fetch: they run offline (``$SSEGATE_OFFLINE``) and take what a step left with
:func:`prepared`, which fails naming the step when it is missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ssegate.cache import OFFLINE, NotPrepared, cache_root, offline_mode, refuse_when_offline

SLOW_BUILD_TIMEOUT = 1800.0
"""Seconds a Go build or an npm install with a native compile may take on a busy two-core box."""
ASYNCAPI_SPECS_VERSION = "6.11.1"
"""The ``@asyncapi/specs`` release whose schemas ``ssegate/asyncapi/schemas`` ships."""
H2SPEC_MODULE = "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible"
OTELCOL_VERSION = "v0.165.0"
"""The OpenTelemetry Collector release the ``otelcol`` step builds (its ``v1`` modules are
those it was released with)."""
OTELCOL_STABLE_VERSION = "v1.71.0"
_OTELCOL_GO_MOD = f"""module ssegate_lab/otelcol

go 1.26

require (
\tgo.opentelemetry.io/collector/component {OTELCOL_STABLE_VERSION}
\tgo.opentelemetry.io/collector/confmap {OTELCOL_STABLE_VERSION}
\tgo.opentelemetry.io/collector/confmap/provider/fileprovider {OTELCOL_STABLE_VERSION}
\tgo.opentelemetry.io/collector/exporter/debugexporter {OTELCOL_VERSION}
\tgo.opentelemetry.io/collector/otelcol {OTELCOL_VERSION}
\tgo.opentelemetry.io/collector/receiver/otlpreceiver {OTELCOL_VERSION}
\tgo.opentelemetry.io/collector/service {OTELCOL_VERSION}
)
"""
_OTELCOL_MAIN = """\
// A collector with the otlp receiver and the debug exporter only: what the otlp exporter's
// tests send to. The core distribution (cmd/otelcorecol) is not published as a module, so this
// main package puts the released components together the way its generated main does.
package main

import (
\t"log"

\t"go.opentelemetry.io/collector/component"
\t"go.opentelemetry.io/collector/confmap"
\t"go.opentelemetry.io/collector/confmap/provider/fileprovider"
\t"go.opentelemetry.io/collector/exporter"
\t"go.opentelemetry.io/collector/exporter/debugexporter"
\t"go.opentelemetry.io/collector/otelcol"
\t"go.opentelemetry.io/collector/receiver"
\t"go.opentelemetry.io/collector/receiver/otlpreceiver"
\t"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func factories() (otelcol.Factories, error) {
\treceivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
\tif err != nil {
\t\treturn otelcol.Factories{}, err
\t}
\texporters, err := otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory())
\tif err != nil {
\t\treturn otelcol.Factories{}, err
\t}
\treturn otelcol.Factories{
\t\tReceivers: receivers,
\t\tExporters: exporters,
\t\tTelemetry: otelconftelemetry.NewFactory(),
\t}, nil
}

func main() {
\tinfo := component.BuildInfo{Command: "otelcol", Description: "otlp in, debug out"}
\tsettings := otelcol.CollectorSettings{
\t\tBuildInfo: info,
\t\tFactories: factories,
\t\tConfigProviderSettings: otelcol.ConfigProviderSettings{
\t\t\tResolverSettings: confmap.ResolverSettings{
\t\t\t\tProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
\t\t\t\tDefaultScheme:     "file",
\t\t\t},
\t\t},
\t}
\tif err := otelcol.NewCommand(settings).Execute(); err != nil {
\t\tlog.Fatal(err)
\t}
}
"""
_OUTPUT_TAIL_LINES = 15


class SetupFailed(RuntimeError):
    """A step could not fetch or build its artifact; the message says why."""


@dataclass(frozen=True, slots=True)
class Step:
    """One thing fetched or built once: ``ensure`` returns where it is, fetching it if allowed."""

    name: str
    fetches: str
    ensure: Callable[[], Path]
    demo: bool = False
    extent: Callable[[Path], Path] = Path
    """What the reported size counts, given what ``ensure`` returned."""


def _kafka() -> Path:
    from ssegate_lab.broker import ensure_broker_jars

    return ensure_broker_jars()


def _spark_connector() -> Path:
    from ssegate.pipeline.session import connector_jars

    return connector_jars()[0].parent


def _registry() -> Path:
    from ssegate_lab.registry import ensure_registry_jar

    return ensure_registry_jar()


def _mercure() -> Path:
    from ssegate_lab.bench.mercure import ensure_mercure

    build = ensure_mercure(timeout=SLOW_BUILD_TIMEOUT)
    if build.binary is None:
        raise SetupFailed(build.reason)
    return build.binary


def _kafkasse() -> Path:
    from ssegate_lab.bench.kafkasse import cache_dir, ensure_kafkasse

    reason = ensure_kafkasse(timeout=SLOW_BUILD_TIMEOUT)
    if reason:
        raise SetupFailed(reason)
    return cache_dir()


def _sse_floor() -> Path:
    from ssegate_lab.bench.floor_server import FloorBuildFailed, ensure_floor

    try:
        return ensure_floor()
    except FloorBuildFailed as exc:
        raise SetupFailed(str(exc)) from None


def asyncapi_specs() -> Path:
    """The ``@asyncapi/specs`` npm package (its ``schemas/`` folder holds the JSON Schemas)."""
    prefix = cache_root() / "npm"
    package = prefix / "node_modules" / "@asyncapi" / "specs"
    manifest = package / "package.json"
    if manifest.is_file() and f'"version": "{ASYNCAPI_SPECS_VERSION}"' in manifest.read_text():
        return package
    refuse_when_offline("asyncapi-specs", f"@asyncapi/specs {ASYNCAPI_SPECS_VERSION}", package)
    npm = _tool("npm")
    prefix.mkdir(parents=True, exist_ok=True)
    spec = f"@asyncapi/specs@{ASYNCAPI_SPECS_VERSION}"
    _run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save", spec])
    return package


def h2spec() -> Path:
    """The h2spec binary, built from its Go module."""
    binary = cache_root() / "bin" / "h2spec"
    if binary.is_file():
        return binary
    refuse_when_offline("h2spec", "h2spec", binary)
    go = _tool("go", fallback=Path("/usr/local/go/bin/go"))
    env = {**os.environ, "GOBIN": str(binary.parent), "GOFLAGS": "-mod=mod"}
    _run([go, "install", H2SPEC_MODULE], env=env)
    return binary


def otel_collector() -> Path:
    """An OpenTelemetry Collector (otlp receiver, debug exporter), built from its Go modules."""
    binary = cache_root() / "otelcol" / "bin" / f"otelcol-{OTELCOL_VERSION}"
    if binary.is_file():
        return binary
    refuse_when_offline("otelcol", f"the OpenTelemetry Collector {OTELCOL_VERSION}", binary)
    go = _tool("go", fallback=Path("/usr/local/go/bin/go"))
    build = binary.parent.parent / f"build-{OTELCOL_VERSION}"
    build.mkdir(parents=True, exist_ok=True)
    (build / "go.mod").write_text(_OTELCOL_GO_MOD)
    (build / "main.go").write_text(_OTELCOL_MAIN)
    _run([go, "-C", str(build), "build", "-mod=mod", "-trimpath", "-o", str(binary), "."])
    return binary


STEPS: dict[str, Step] = {
    step.name: step
    for step in (
        Step("kafka", "the Kafka broker's jars from Maven Central", _kafka, demo=True),
        Step(
            "spark-connector",
            "Spark's Kafka connector and Avro jars from Maven Central",
            _spark_connector,
            demo=True,
        ),
        Step("asyncapi-specs", "the AsyncAPI JSON Schemas (npm @asyncapi/specs)", asyncapi_specs),
        Step("h2spec", "h2spec, built with go install", h2spec),
        Step("otelcol", "the OpenTelemetry Collector, built with Go (minutes)", otel_collector),
        Step(
            "registry",
            "Apicurio Registry, built with Maven (minutes)",
            _registry,
            extent=lambda jar: jar.parent,  # the runner jar and its lib/
        ),
        Step("mercure", "the Mercure hub, built with Go (minutes)", _mercure),
        Step("kafkasse", "KafkaSSE with npm, compiling librdkafka (minutes)", _kafkasse),
        Step("sse-floor", "the reference fan-out server, compiled with cc and OpenSSL", _sse_floor),
    )
}
"""Every step, in the order ``./run`` runs them."""


def prepared(name: str) -> Path:
    """What step ``name`` left, found without fetching or building anything.

    Raises :class:`~ssegate.cache.NotPrepared` (or :class:`SetupFailed`) naming the step when it
    is missing; :func:`ssegate_lab.testing.tools.prepared` turns that into a failed test.
    """
    return _find(STEPS[name])


def _find(step: Step) -> Path:
    with offline_mode():
        return step.ensure()


def _tool(name: str, *, fallback: Path | None = None) -> str:
    found = shutil.which(name)
    if found is None and fallback is not None and fallback.is_file():
        found = str(fallback)
    if found is None:
        raise SetupFailed(f"{name} is not on PATH")
    return found


def _run(argv: list[str], *, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=SLOW_BUILD_TIMEOUT, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise SetupFailed(
            f"`{' '.join(argv)}` did not finish within {SLOW_BUILD_TIMEOUT:.0f} s"
        ) from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-_OUTPUT_TAIL_LINES:])
        raise SetupFailed(f"`{' '.join(argv)}` failed (exit {done.returncode}):\n{tail}")


def size_of(path: Path) -> str:
    """What ``du -sh`` says of ``path``: ``43M``, ``1.2G``."""
    if path.is_file():
        total = path.stat().st_size
    else:
        files = (f for f in path.rglob("*") if f.is_file() and not f.is_symlink())
        total = sum(f.stat().st_size for f in files)
    size = float(total)
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:.0f}{unit}" if size >= 10 or unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _say(step: Step, text: str) -> None:
    print(f"==> setup {step.name}: {text}", file=sys.stderr, flush=True)


def run_step(step: Step) -> bool:
    """Fetch or build what ``step`` needs unless it is present; False when that failed."""
    try:
        where = _find(step)
    except (NotPrepared, SetupFailed):
        pass
    else:
        _say(step, f"present, {size_of(step.extent(where))} in {where}")
        return True
    _say(step, f"fetching {step.fetches}")
    started = time.monotonic()
    try:
        where = step.ensure()
    except Exception as exc:  # every failure of a step is reported, then the next step runs
        _say(step, f"FAILED: {exc}")
        return False
    _say(step, f"{size_of(step.extent(where))} in {where} ({time.monotonic() - started:.0f} s)")
    return True


def steps_for(names: Sequence[str]) -> list[Step]:
    """``test`` → every step; ``demo`` → the demo's; otherwise the steps named."""
    chosen: list[Step] = []
    for name in names or ["test"]:
        if name == "test":
            chosen += STEPS.values()
        elif name == "demo":
            chosen += (step for step in STEPS.values() if step.demo)
        else:
            chosen.append(STEPS[name])
    return list(dict.fromkeys(chosen))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ssegate_lab.setup_tools",
        description="Fetch and build what the tests (test, the default) or the demo (demo) need,"
        " or the steps named.",
    )
    names = ["test", "demo", *STEPS]
    parser.add_argument("steps", nargs="*", metavar="STEP", help=f"one of {', '.join(names)}")
    args = parser.parse_args(argv)
    unknown = [name for name in args.steps if name not in names]
    if unknown:
        parser.error(f"no step {', '.join(unknown)}; the steps are {', '.join(names)}")
    os.environ.pop(OFFLINE, None)  # fetching is what this is for
    failed = [step.name for step in steps_for(args.steps) if not run_step(step)]
    if failed:
        print(f"==> setup failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
