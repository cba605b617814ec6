"""The local Apache Kafka broker ssegate's demo, tests and benchmarks run against.

This module owns one single-node KRaft broker per data directory: getting the broker's jars
(:mod:`ssegate.jars`), writing ``server.properties``, formatting storage once, starting
the JVM detached from the caller, waiting until a Kafka client gets metadata from it, and stopping
it again. Everything a broker needs lives in its data directory::

    <data dir>/server.properties   written on every start
    <data dir>/cluster.id          chosen at the first start, reused after
    <data dir>/logs/               Kafka's log.dirs (topics, metadata log)
    <data dir>/broker.log          the JVM's stdout and stderr (previous run: broker.log.1)
    <data dir>/broker.pid          the JVM's process id while it runs

A node of a local cluster (:mod:`ssegate_lab.cluster`) is such a broker too, with its own data
directory, started by :func:`spawn_node` on the ``server.properties`` of its
:class:`NodeSettings` (:func:`server_properties`).

It also holds the ``ssegate kafka start|stop|status`` commands (:func:`add_kafka_parser`); with
``--brokers N``, or on a cluster's data directory, they hand over to :mod:`ssegate_lab.cluster`.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from confluent_kafka.admin import AdminClient

from ssegate.cache import cache_root
from ssegate.jars import JarsError, ensure_maven_jars, tail_lines
from ssegate.telemetry.log import event
from ssegate_lab import daemons
from ssegate_lab.daemons import log_tail, port_is_free

SETUP_STEP = "kafka"
KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"
DEFAULT_PORT = 9092
STOP_TIMEOUT = 30.0

__all__ = [
    "BrokerError",
    "BrokerInfo",
    "add_kafka_parser",
    "broker_status",
    "cli_kafka",
    "default_data_dir",
    "ensure_broker_jars",
    "start_broker",
    "stop_broker",
]


class BrokerError(RuntimeError):
    """The broker's jars could not be resolved, or the broker could not start or answer."""


def ensure_broker_jars(cache_dir: Path | None = None) -> Path:
    """Return the directory holding the broker's jars, resolving them with Maven the first time.

    ``cache_dir`` replaces the cache root; the jars land in ``<root>/kafka-<version>/lib``. A
    marker file written after a complete resolution makes later calls return at once.
    """
    try:
        return _broker_jars(cache_dir)
    except JarsError as exc:
        raise BrokerError(str(exc)) from None


def _broker_jars(cache_dir: Path | None) -> Path:
    return ensure_maven_jars(
        (cache_dir or cache_root()) / f"kafka-{KAFKA_VERSION}",
        resources.files(__package__).joinpath("broker-pom.xml").read_bytes(),
        [f"-Dkafka.version={KAFKA_VERSION}", f"-Dlog4j.version={LOG4J_VERSION}"],
        expected="kafka_2.13-*.jar",
        marker=f"kafka {KAFKA_VERSION}\nlog4j {LOG4J_VERSION}\n",
        step=SETUP_STEP,
        what=f"the jars of the Kafka {KAFKA_VERSION} broker",
    )


# librdkafka reports every refused connection while the broker boots; keep that off stderr.
_client_log = logging.Logger("ssegate.kafka.probe")
_client_log.addHandler(logging.NullHandler())


@dataclass(frozen=True)
class BrokerInfo:
    bootstrap: str
    pid: int
    data_dir: Path
    log_path: Path


def default_data_dir(port: int) -> Path:
    return cache_root() / f"kafka-data-{port}"


def start_broker(
    port: int = DEFAULT_PORT,
    data_dir: Path | None = None,
    *,
    controller_port: int | None = None,
    heap: str = "512m",
    timeout: float = 90,
    java_options: Sequence[str] = (),
) -> BrokerInfo:
    """Start a broker on 127.0.0.1:``port`` and return once a Kafka client gets metadata from it.

    A broker already running on ``data_dir`` with that port is left alone and described. The
    JVM runs in its own session and outlives the caller until :func:`stop_broker`.
    ``java_options`` go to the JVM before the class name (``-XX:TieredStopAtLevel=1`` starts
    a test broker faster on few cores, at the cost of peak throughput).
    """
    data_dir = (data_dir or default_data_dir(port)).resolve()
    if holds_cluster(data_dir):
        nodes = len(list(data_dir.glob("node-*/server.properties")))
        raise BrokerError(f"{data_dir} holds a cluster of {nodes} nodes: start it with --brokers")
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / ".start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two callers starting one data dir start one broker
        running = broker_status(data_dir)
        if running is None:
            return _launch(port, data_dir, controller_port, heap, timeout, java_options)
    if running.bootstrap != _bootstrap(port):
        raise BrokerError(f"a broker on {data_dir} already runs at {running.bootstrap}")
    wait_until_answering(running, None, time.monotonic() + timeout)
    return running


def _launch(
    port: int,
    data_dir: Path,
    controller_port: int | None,
    heap: str,
    timeout: float,
    java_options: Sequence[str],
) -> BrokerInfo:
    if not port_is_free(port):
        raise BrokerError(f"port {port} on 127.0.0.1 is already in use by another process")
    lib = ensure_broker_jars()
    properties = data_dir / "server.properties"
    if controller_port is None:
        controller_port = _saved_controller_port(properties) or _pick_controller_port(port)
    if controller_port == port or not port_is_free(controller_port):
        raise BrokerError(f"controller port {controller_port} on 127.0.0.1 is not free")
    properties.write_text(server_properties(NodeSettings(data_dir, port, controller_port)))
    started = time.monotonic()
    child, info = spawn_node(lib, data_dir, heap, java_options)
    try:
        wait_until_answering(info, child, started + timeout)
    except BrokerError:
        stop_broker(data_dir)
        raise
    event("kafka.broker.started", bootstrap=info.bootstrap, pid=info.pid,
          seconds=round(time.monotonic() - started, 2))  # fmt: skip
    return info


def spawn_node(
    lib: Path, data_dir: Path, heap: str, java_options: Sequence[str]
) -> tuple[subprocess.Popen[bytes], BrokerInfo]:
    """Format ``data_dir`` once and start the JVM on its ``server.properties``, detached.

    Returns at once, without waiting for the node to answer; its ``broker.pid`` is written.
    """
    properties = data_dir / "server.properties"
    port = listener_port(properties, "PLAINTEXT")
    if port is None:
        raise BrokerError(f"{properties} names no PLAINTEXT listener")
    _format_storage_once(lib, data_dir, properties)
    log_path = data_dir / "broker.log"
    command = [*_java(lib, heap), *java_options, "kafka.Kafka", str(properties)]
    child = daemons.spawn(command, log_path, data_dir)
    (data_dir / "broker.pid").write_text(f"{child.pid}\n")
    return child, BrokerInfo(_bootstrap(port), child.pid, data_dir, log_path)


def stop_broker(
    target: Path | int | None = None, *, timeout: float = STOP_TIMEOUT, kill: bool = False
) -> bool:
    """Stop the broker of a data directory (or of a port's default data directory).

    Sends SIGTERM, waits up to ``timeout`` seconds for Kafka's clean shutdown, then SIGKILL;
    with ``kill``, SIGKILL at once (a crash, as failover tests need). Returns False when no
    broker was running there.
    """
    data_dir = _data_dir_of(target)
    pid_file = data_dir / "broker.pid"
    info = broker_status(data_dir)
    if info is None:
        pid_file.unlink(missing_ok=True)
        return False
    clean = daemons.stop(info.pid, *_broker_arguments(data_dir), timeout=0.0 if kill else timeout,
                         signum=signal.SIGKILL if kill else signal.SIGTERM)  # fmt: skip
    pid_file.unlink(missing_ok=True)
    event("kafka.broker.stopped", pid=info.pid, data_dir=data_dir, clean=clean and not kill)
    return True


def broker_status(target: Path | int | None = None) -> BrokerInfo | None:
    """Describe the broker running on a data directory (or a port's default one), if any."""
    data_dir = _data_dir_of(target)
    try:
        pid = int((data_dir / "broker.pid").read_text().strip())
        port = listener_port(data_dir / "server.properties", "PLAINTEXT")
    except (OSError, ValueError):
        return None
    if port is None or not daemons.is_running(pid, *_broker_arguments(data_dir)):
        return None
    return BrokerInfo(_bootstrap(port), pid, data_dir, data_dir / "broker.log")


def add_kafka_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``kafka start|stop|status``; each sets ``func`` to a handler returning a status."""
    kafka = subparsers.add_parser(
        "kafka",
        help="run the local Kafka broker or cluster",
        description=f"A single-node Apache Kafka {KAFKA_VERSION} broker (KRaft) on 127.0.0.1, or"
        " a cluster of N nodes (--brokers N), running detached until `ssegate kafka stop`.",
    )
    commands = kafka.add_subparsers(title="commands", metavar="COMMAND", required=True)
    start = commands.add_parser("start", help="start the broker and print its bootstrap address")
    _add_location_arguments(start)
    start.add_argument(
        "--brokers",
        type=_node_count,
        default=1,
        metavar="N",
        help="nodes (default: 1); N > 1 starts a cluster on client ports PORT ... PORT+N-1,"
        " each node a broker and a controller, every topic replicated N times",
    )
    start.add_argument(
        "--controller-port",
        type=int,
        metavar="PORT",
        help="KRaft controller port, the first one of a cluster (default: the saved one, else"
        " PORT+1, or PORT+N for a cluster)",
    )
    start.add_argument("--heap", default="512m", help="JVM maximum heap per node (default: 512m)")
    start.add_argument("--timeout", type=float, default=90.0, metavar="SECONDS",
                       help="how long to wait for the broker to answer (default: 90)")  # fmt: skip
    start.set_defaults(func=_start_command)
    stop = commands.add_parser(
        "stop", help="stop the broker or every node (SIGTERM, SIGKILL after 30 s)"
    )
    _add_location_arguments(stop)
    stop.set_defaults(func=_stop_command)
    status = commands.add_parser(
        "status", help="say whether the broker (every node) runs (exit 0) or not (1)"
    )
    _add_location_arguments(status)
    status.set_defaults(func=_status_command)


def _node_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a node count (1 or more)")
    return int(text)


def cli_kafka(argv: Sequence[str]) -> int:
    """Run ``ssegate kafka ARGV`` and return its exit status."""
    return daemons.run_command(add_kafka_parser, "kafka", argv)


def _add_location_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"client port on 127.0.0.1 (default: {DEFAULT_PORT})",
    )
    parser.add_argument("--data-dir", type=Path, metavar="DIR",
                        help="broker state (default: $SSEGATE_CACHE or ~/.cache/ssegate,"
                        " then kafka-data-PORT)")  # fmt: skip


def _start_command(args: argparse.Namespace) -> int:
    data_dir = args.data_dir or default_data_dir(args.port)
    if args.brokers > 1 or holds_cluster(data_dir):
        from ssegate_lab.cluster import start_command

        return start_command(args)
    try:
        info = start_broker(args.port, args.data_dir, controller_port=args.controller_port,
                            heap=args.heap, timeout=args.timeout)  # fmt: skip
    except BrokerError as exc:
        print(f"ssegate: {exc}", file=sys.stderr)
        return 1
    print(f"bootstrap: {info.bootstrap}")
    return 0


def _stop_command(args: argparse.Namespace) -> int:
    data_dir = args.data_dir or default_data_dir(args.port)
    if holds_cluster(data_dir):
        from ssegate_lab.cluster import KafkaCluster, stop_command

        return stop_command(KafkaCluster.saved(data_dir))
    stopped = stop_broker(data_dir)
    print(f"{'stopped' if stopped else 'no broker was running on'} {data_dir}")
    return 0


def _status_command(args: argparse.Namespace) -> int:
    data_dir = args.data_dir or default_data_dir(args.port)
    if holds_cluster(data_dir):
        from ssegate_lab.cluster import KafkaCluster, status_command

        return status_command(KafkaCluster.saved(data_dir))
    info = broker_status(data_dir)
    if info is None:
        print("not running")
        return 1
    print(f"bootstrap: {info.bootstrap} pid: {info.pid} data-dir: {info.data_dir}")
    return 0


def _data_dir_of(target: Path | int | None) -> Path:
    if isinstance(target, int):
        return default_data_dir(target).resolve()
    return (target or default_data_dir(DEFAULT_PORT)).resolve()


def holds_cluster(data_dir: Path) -> bool:
    """Whether ``data_dir`` is a cluster's (:mod:`ssegate_lab.cluster`): a ``node-<id>``
    directory per node, rather than one broker's state."""
    return any(data_dir.glob("node-*/server.properties"))


def _bootstrap(port: int) -> str:
    return f"127.0.0.1:{port}"


def _java(lib: Path, heap: str) -> list[str]:
    logging_config = lib.parent / "log4j2.properties"
    wanted = resources.files(__package__).joinpath("log4j2.properties").read_bytes()
    if not logging_config.is_file() or logging_config.read_bytes() != wanted:
        staged = logging_config.with_name(f".log4j2.{os.getpid()}.tmp")
        staged.write_bytes(wanted)
        staged.replace(logging_config)  # a JVM starting meanwhile never reads half a file
    return [
        "java", f"-Xmx{heap}", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={logging_config}", "-cp", f"{lib}/*",
    ]  # fmt: skip


@dataclass(frozen=True)
class NodeSettings:
    """What one KRaft node's ``server.properties`` say: a single broker by default."""

    data_dir: Path
    port: int
    controller_port: int
    node_id: int = 1
    voters: str = ""
    """``controller.quorum.voters``; empty: this node alone."""
    replicas: int = 1
    """The cluster's size: the replication factor of new and internal topics."""


def server_properties(node: NodeSettings) -> str:
    """The ``server.properties`` of a combined broker and controller node.

    A node of a cluster (``replicas`` > 1) replicates every topic to ``replicas`` nodes and
    refuses ``acks=all`` writes while fewer than 2 replicas are in sync, so one node may be
    down and nothing acknowledged is on one node only; it heartbeats every second and is fenced
    after 6 s of silence, which moves its partitions' leadership to another replica that
    quickly.
    """
    replicas, min_isr = str(node.replicas), str(min(2, node.replicas))
    voters = node.voters or f"{node.node_id}@127.0.0.1:{node.controller_port}"
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
        f"CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(node.data_dir / "logs"),
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": "0",
    }
    if node.replicas > 1:
        settings.update(
            {
                "unclean.leader.election.enable": "false",
                "broker.heartbeat.interval.ms": "1000",
                "broker.session.timeout.ms": "6000",
                "num.replica.fetchers": "1",
                "background.threads": "2",
                "log.cleaner.threads": "1",
            }
        )
    lines = [f"{key}={value}" for key, value in settings.items()]
    return "# Written by ssegate on every start; edits are overwritten.\n" + "\n".join(lines) + "\n"


def _format_storage_once(lib: Path, data_dir: Path, properties: Path) -> None:
    if (data_dir / "logs" / "meta.properties").is_file():
        return
    id_file = data_dir / "cluster.id"
    if not id_file.is_file():
        id_file.write_text(new_cluster_id() + "\n")
    cluster_id = id_file.read_text().strip()
    # a one-shot tool: the C1 compiler alone starts it sooner and takes less of the cores
    command = [*_java(lib, "256m"), "-XX:TieredStopAtLevel=1", "kafka.tools.StorageTool",
               "format", "-t", cluster_id, "-c", str(properties), "--ignore-formatted"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        tail = tail_lines((done.stdout + done.stderr).splitlines())
        raise BrokerError(f"formatting Kafka storage in {data_dir} failed:\n{tail}")


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, no leading '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def wait_until_answering(
    info: BrokerInfo, child: subprocess.Popen[bytes] | None, deadline: float
) -> None:
    host, port = info.bootstrap.split(":")
    while True:
        if child is not None and child.poll() is not None:
            raise BrokerError(
                f"the Kafka broker exited with status {child.returncode} while starting;"
                f" last lines of {info.log_path}:\n{log_tail(info.log_path)}"
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BrokerError(
                f"the Kafka broker at {info.bootstrap} did not answer in time;"
                f" last lines of {info.log_path}:\n{log_tail(info.log_path)}"
            )
        if not port_is_free(int(port), host) and _answers_metadata(info.bootstrap, remaining):
            return
        time.sleep(0.1)


def admin_client(bootstrap: str) -> AdminClient:
    """An admin client that keeps librdkafka's refused-connection lines off stderr."""
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}, logger=_client_log)


def _answers_metadata(bootstrap: str, within: float) -> bool:
    client = admin_client(bootstrap)
    try:
        return bool(client.list_topics(timeout=max(0.5, min(within, 5.0))).brokers)
    except Exception:  # KafkaException while the broker is still booting
        return False


def _pick_controller_port(port: int) -> int:
    if port < 65535 and port_is_free(port + 1):
        return port + 1
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as spare:
        spare.bind(("127.0.0.1", 0))
        return int(spare.getsockname()[1])


def _saved_controller_port(properties: Path) -> int | None:
    return listener_port(properties, "CONTROLLER")


def listener_port(properties: Path, name: str) -> int | None:
    try:
        text = properties.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("listeners="):
            for listener in line.removeprefix("listeners=").split(","):
                if listener.startswith(f"{name}://"):
                    return int(listener.rsplit(":", 1)[1])
    return None


def _broker_arguments(data_dir: Path) -> tuple[str, str]:
    """What the command line of the broker of ``data_dir`` holds."""
    return "kafka.Kafka", str(data_dir / "server.properties")
