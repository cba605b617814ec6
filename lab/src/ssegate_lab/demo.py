"""The demo behind ``./run demo``: sensor data from a Spark pipeline, live in a browser.

``./run demo`` runs the whole stack on this machine, each part a process of its own:

1. a local Kafka broker (``--kafka-port``, default 9092, another free port when that one is
   taken), its data under ``.cache/demo/kafka``;
2. the Spark pipeline ``examples/pipeline/sensors.yaml``: its generator makes readings of 12
   devices of three tenants, a server room, an office, a lab and a warehouse each, on a "day" of
   4 minutes (some readings broken on purpose, for the dead-letter topic); the pipeline writes
   ``events`` (10 s aggregates per device), ``alerts`` (the server rooms overheat in turn),
   ``alert-counts`` and the compacted ``devices`` (a tombstone for the device that goes silent
   after a minute), one micro-batch a second;
3. the gateway on ``examples/dashboard/zilla.yaml``, serving the dashboard page and streaming
   those topics over SSE.

It prints the dashboard's URL once the gateway is up; Ctrl-C (or SIGTERM) stops the gateway, the
pipeline (its queries between two micro-batches, then Spark), then the broker, and exits 0.
Broker data and pipeline checkpoints start empty on every run, so each run tells the whole story
again; logs go to ``.cache/demo/*.log``.

Tokens: the dashboard's streams are guarded by a JWT guard. The demo makes its signing keys once
(under ``.cache/demo``), gives the gateway the public half through the environment
(:func:`example_guard_env`) and puts the EC private key in the URL's fragment
(:func:`page_fragment`): the page mints its own short-lived tokens with WebCrypto and answers
every challenge. That stands in for an authorization server; the fragment never leaves the
browser.

``./run demo --proxy`` runs the older, smaller demo instead: an upstream SSE server behind the
``examples/sse.proxy`` gateway (:func:`run_proxy_demo`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

from ssegate.tools.token import (
    PrivateKey,
    generate_key,
    load_private_key,
    private_jwk,
    private_pem,
    public_jwk,
)

ROOT = Path(__file__).resolve().parents[3]
WORKDIR = ROOT / ".cache" / "demo"
DASHBOARD = ROOT / "examples" / "dashboard"
SENSORS_PIPELINE = ROOT / "examples" / "pipeline" / "sensors.yaml"
DASHBOARD_TOPICS = ("events", "alerts", "alert-counts", "devices")
PIPELINE_TRIGGER = 5.0
"""Seconds per micro-batch. The six queries of the pipeline share two cores; a micro-batch
takes one to four seconds when the machine is busy, so each query pauses between two of them,
which is where a stop ends it without cancelling any work (and logging that)."""
PIPELINE_CONF = {"spark.sql.shuffle.partitions": "1"}
"""One task per stateful step: half the tasks of a micro-batch, on a small machine."""
PASSWORD = "ssegate-demo"
RSA_KID = "example"
EC_KID = "example_ec"


class DemoError(Exception):
    """A part of the demo could not start; the message says which and where its log is."""


def example_guard_env(rsa_key: PrivateKey, ec_key: PrivateKey) -> dict[str, str]:
    """The environment that gives the examples' ``authn_jwt`` guards their public keys."""
    rsa_jwk = public_jwk(rsa_key, RSA_KID)
    ec_jwk = public_jwk(ec_key, EC_KID)
    return {
        "SSEGATE_JWT_RSA_N": rsa_jwk["n"],
        "SSEGATE_JWT_EC_X": ec_jwk["x"],
        "SSEGATE_JWT_EC_Y": ec_jwk["y"],
    }


def page_fragment(ec_key: PrivateKey, *, ttl: int | None = None, answer: bool = True) -> str:
    """The ``#...`` that lets the example pages mint tokens (see their ``www/index.html``)."""
    jwk = json.dumps(private_jwk(ec_key, EC_KID), separators=(",", ":")).encode()
    fragment = "#key=" + base64.urlsafe_b64encode(jwk).decode().rstrip("=")
    if ttl is not None:
        fragment += f"&ttl={ttl}"
    if not answer:
        fragment += "&answer=no"
    return fragment


def dashboard_env(
    keystore: Path, password: str, https_port: int, bootstrap: str, ec_key: PrivateKey
) -> dict[str, str]:
    """What ``examples/dashboard/zilla.yaml`` reads from the environment."""
    ec_jwk = public_jwk(ec_key, EC_KID)
    return {
        "SSEGATE_HOST": "0.0.0.0",
        "SSEGATE_HTTPS_PORT": str(https_port),
        "SSEGATE_KEYSTORE": str(keystore),
        "KEYSTORE_PASSWORD": password,
        "SSEGATE_WWW": str(DASHBOARD / "www"),
        "SSEGATE_JWT_EC_X": ec_jwk["x"],
        "SSEGATE_JWT_EC_Y": ec_jwk["y"],
        "KAFKA_BOOTSTRAP": bootstrap,
    }


def start_pipeline(
    config: Path,
    bootstrap: str,
    checkpoint: Path,
    log: IO[bytes],
    *,
    conf: Mapping[str, str] | None = None,
    trigger: float = PIPELINE_TRIGGER,
) -> subprocess.Popen[bytes]:
    """``ssegate pipeline run`` in its own session (a terminal's Ctrl-C reaches only us).

    ``conf`` holds Spark settings, over :data:`PIPELINE_CONF`; Spark's console progress bar is
    always off (it is a log file). ``trigger`` is the seconds per micro-batch.
    """
    command = [sys.executable, "-m", "ssegate", "pipeline", "run", "-c", str(config),
               "--bootstrap", bootstrap, "--checkpoint", str(checkpoint),
               "--trigger", str(trigger)]  # fmt: skip
    settings = {"spark.ui.showConsoleProgress": "false", **PIPELINE_CONF, **(conf or {})}
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def start_gateway(config: Path, env: dict[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    """``ssegate start`` in its own session; its telemetry lines go to ``log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "ssegate", "start", "-c", str(config), "--workers", "1"],
        env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def wait_for_topics(
    bootstrap: str, topics: Iterable[str], watched: subprocess.Popen[bytes], timeout: float
) -> None:
    """Return once every topic exists; raise :class:`DemoError` if ``watched`` exits first."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = set(topics)
    _wait_for(
        lambda: wanted <= set(admin.list_topics(timeout=5).topics),
        watched,
        timeout,
        f"topics {sorted(wanted)} did not appear",
    )


def wait_for_message(
    bootstrap: str, topic: str, watched: subprocess.Popen[bytes], timeout: float
) -> None:
    """Return once partition 0 of ``topic`` holds a message (the pipeline's first micro-batch
    is written); raise :class:`DemoError` if ``watched`` exits first."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ssegate-demo"})
    try:
        _wait_for(
            lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] > 0,
            watched,
            timeout,
            f"nothing was written to {topic!r}",
        )
    finally:
        consumer.close()


def _wait_for(
    done: Callable[[], bool], watched: subprocess.Popen[bytes], timeout: float, failure: str
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if watched.poll() is not None:
            raise DemoError(f"the pipeline exited with status {watched.returncode}")
        try:
            if done():
                return
        except Exception:  # the broker not answering yet: ask again
            pass
        time.sleep(1.0)
    raise DemoError(f"{failure} within {timeout:.0f} s")


def wait_for_port(port: int, watched: subprocess.Popen[bytes], timeout: float) -> None:
    """Return once 127.0.0.1:``port`` accepts; raise :class:`DemoError` if ``watched`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if watched.poll() is not None:
            raise DemoError(f"the gateway exited with status {watched.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.2)
    raise DemoError(f"the gateway did not listen on port {port} within {timeout:.0f} s")


def stop_child(child: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL."""
    if child is None or child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def demo_keys(workdir: Path = WORKDIR) -> tuple[Path, PrivateKey, PrivateKey]:
    """The demo's keystore for ``localhost`` and its RSA and EC signing keys, made once."""
    from ssegate_lab.testing.certs import make_keystore

    workdir.mkdir(parents=True, exist_ok=True)
    keystore = workdir / "localhost.p12"
    if not keystore.exists():
        make_keystore(keystore, alias="localhost", password=PASSWORD)
    return (
        keystore,
        _demo_key(workdir / "jwt-rsa.pem", "rsa"),
        _demo_key(workdir / "jwt-ec.pem", "ec"),
    )


def _demo_key(path: Path, kind: str) -> PrivateKey:
    if not path.exists():
        path.write_bytes(private_pem(generate_key(kind)))
        path.chmod(0o600)
    return load_private_key(path)


def _stop_request(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _say(message: str) -> None:
    print(f"ssegate demo: {message}", flush=True)


def _kafka_port(wanted: int) -> int:
    from ssegate.engine.runtime import free_port

    try:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker does
            probe.bind(("127.0.0.1", wanted))
        return wanted
    except OSError:
        port = free_port()
        _say(f"port {wanted} is taken; the broker listens on {port} instead")
        return port


def run_dashboard_demo(args: argparse.Namespace) -> int:
    """The whole stack: broker, pipeline, gateway; see the module docstring."""
    from ssegate_lab.broker import BrokerError, start_broker, stop_broker

    keystore, _rsa_key, ec_key = demo_keys()
    kafka_dir = WORKDIR / "kafka"
    checkpoints = WORKDIR / "checkpoints"
    for signum in (signal.SIGINT, signal.SIGTERM):  # explicit: a shell may start us ignoring them
        signal.signal(signum, _stop_request)
    pipeline: subprocess.Popen[bytes] | None = None
    gateway: subprocess.Popen[bytes] | None = None
    status = 0
    try:
        stop_broker(kafka_dir)  # one left over from a run that was killed
        shutil.rmtree(kafka_dir, ignore_errors=True)
        shutil.rmtree(checkpoints, ignore_errors=True)
        _say("starting Kafka")
        broker = start_broker(_kafka_port(args.kafka_port), kafka_dir)
        _say(f"Kafka at {broker.bootstrap}; starting the Spark pipeline (log: pipeline.log)")
        with open(WORKDIR / "pipeline.log", "wb") as pipeline_log:
            pipeline = start_pipeline(SENSORS_PIPELINE, broker.bootstrap, checkpoints, pipeline_log)
        wait_for_topics(broker.bootstrap, DASHBOARD_TOPICS, pipeline, timeout=300)
        env = dashboard_env(keystore, PASSWORD, args.port, broker.bootstrap, ec_key)
        with open(WORKDIR / "gateway.log", "wb") as gateway_log:
            gateway = start_gateway(DASHBOARD / "zilla.yaml", env, gateway_log)
        wait_for_port(args.port, gateway, timeout=30)
        _say("the gateway is up; waiting for the pipeline's first readings")
        wait_for_message(broker.bootstrap, "devices", pipeline, timeout=300)
        _say(
            f"dashboard: https://localhost:{args.port}/index.html{page_fragment(ec_key)}\n"
            "(a self-signed certificate: accept it once; the part after # is a development\n"
            "signing key the page mints its tokens with, it never leaves the browser).\n"
            "Live readings show at once, the first full 10-s window within half a minute.\n"
            "Ctrl-C stops."
        )
        while pipeline.poll() is None and gateway.poll() is None:
            time.sleep(0.5)
        failed = "pipeline" if pipeline.poll() is not None else "gateway"
        _say(f"the {failed} exited; see .cache/demo/{failed}.log")
        status = 1
    except KeyboardInterrupt:
        _say("stopping")
    except (DemoError, BrokerError) as exc:
        _say(f"{exc}; logs are in {WORKDIR}")
        status = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_child(gateway, timeout=10)
        stop_child(pipeline, timeout=60)
        stop_broker(kafka_dir)
    return status


def run_proxy_demo(args: argparse.Namespace) -> int:
    """An upstream SSE server publishing a line a second, behind ``examples/sse.proxy``."""
    keystore, rsa_key, ec_key = demo_keys()
    example = ROOT / "examples" / "sse.proxy"
    env = {
        **os.environ,
        **example_guard_env(rsa_key, ec_key),
        "SSEGATE_KEYSTORE": str(keystore),
        "KEYSTORE_PASSWORD": PASSWORD,
        "SSEGATE_HOST": "0.0.0.0",
        "SSEGATE_HTTPS_PORT": str(args.port),
        "SSEGATE_WWW": str(example / "www"),
        "SSE_SERVER_HOST": "127.0.0.1",
        "SSE_SERVER_PORT": str(args.upstream_port),
    }
    python = sys.executable
    upstream = subprocess.Popen(
        [python, "-m", "ssegate.tools.sse_server", "--http-port", str(args.upstream_port),
         "--publish-port", str(args.publish_port)],
        env=env,
    )  # fmt: skip
    gateway = subprocess.Popen(
        [python, "-m", "ssegate", "start", "-c", str(example / "zilla.yaml")],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    children = [gateway, upstream]
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop_request)
    _say(
        f"open https://localhost:{args.port}/index.html{page_fragment(ec_key)}"
        "\n(self-signed certificate: accept it once; the part after # is a development"
        " signing key the page uses to mint its tokens). Ctrl-C stops."
    )
    tick = 0
    stopping = False
    publisher: socket.socket | None = None
    try:
        while all(child.poll() is None for child in children):
            time.sleep(1.0)
            tick += 1
            try:
                if publisher is None:
                    publisher = socket.create_connection(("127.0.0.1", args.publish_port), 1.0)
                publisher.sendall(f"tick {tick} at {time.strftime('%H:%M:%S')}\n".encode())
            except OSError:
                publisher = None
    except KeyboardInterrupt:
        stopping = True
    finally:
        if publisher is not None:
            publisher.close()
        for child in children:
            stop_child(child, timeout=6)
    failed = [c.returncode for c in children if c.returncode not in (0, -signal.SIGTERM)]
    return 0 if stopping and not failed else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./run demo",
        description="Kafka, the Spark sensor pipeline and ssegate with a live dashboard.",
    )
    parser.add_argument("--port", type=int, default=7143, help="https port (default 7143)")
    parser.add_argument(
        "--kafka-port", type=int, default=9092, help="Kafka broker port (default 9092)"
    )
    parser.add_argument("--proxy", action="store_true", help="run the small SSE proxy demo instead")
    parser.add_argument("--upstream-port", type=int, default=8001, help="--proxy: upstream")
    parser.add_argument("--publish-port", type=int, default=7001, help="--proxy: publishing")
    args = parser.parse_args(argv)
    return run_proxy_demo(args) if args.proxy else run_dashboard_demo(args)


if __name__ == "__main__":
    sys.exit(main())
