"""The ``tcp`` server binding: which addresses to listen on, and where each port leads.

``options.port`` is an int, a ``"a-b"`` range or a list of both; ``routes[].when[].port`` picks
the exit for a port (an int, a range or a list, like the option), the plain ``exit`` takes the
rest. The listeners themselves are opened by the runtime; this module only decides, once at
start-up, which binding serves which port.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ssegate.config.errors import ConfigError, NotSupportedYet
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext

MAX_PORTS = 1024


def parse_ports(value: Any, path: str) -> list[int]:
    """Ports from ``8080``, ``"8080"``, ``"8080-8089"`` or a list of those, in order."""
    items = value if isinstance(value, list) else [value]
    ports: list[int] = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]" if isinstance(value, list) else path
        ports.extend(_parse_port_item(item, where))
    if len(ports) > MAX_PORTS:
        raise ConfigError(path, f"{len(ports)} ports is more than the {MAX_PORTS} allowed")
    return ports


def _parse_port_item(item: int | str, path: str) -> list[int]:
    # The schema's ``port`` lets through a number in 0-65535 or a string of digits with an
    # optional "-high": the numbers in a string are checked here.
    if isinstance(item, int):
        return [item]
    low, _, high = item.strip().partition("-")
    first = _check_port(int(low), path)
    last = _check_port(int(high), path) if high else first
    if last < first:
        raise ConfigError(path, f"port range '{item}' ends before it starts")
    return list(range(first, last + 1))


def _check_port(port: int, path: str) -> int:
    if not 0 <= port <= 65535:
        raise ConfigError(path, f"port {port} is outside 0-65535")
    return port


@dataclass(frozen=True, slots=True)
class Listener:
    """One listening address and the binding its connections go to."""

    host: str
    port: int
    exit: str


@dataclass(frozen=True, slots=True)
class TcpServer:
    name: str
    listeners: list[Listener]


def build(binding: Binding, ctx: BuildContext) -> TcpServer:
    options = binding.options
    host = str(options.get("host", "0.0.0.0"))
    if "port" not in options:
        raise ConfigError(f"{binding.path}.options.port", "a tcp server needs a port")
    ports = parse_ports(options["port"], f"{binding.path}.options.port")
    routed: list[tuple[set[int], str]] = []
    for route in binding.routes:
        if not route.exit:
            continue
        route_ports: set[int] = set()
        for index, when in enumerate(route.when):
            unsupported = sorted(set(when) - {"port"})
            if unsupported:
                raise NotSupportedYet(
                    f"{route.path}.when[{index}].{unsupported[0]}",
                    "tcp routes by port only in this version of ssegate",
                )
            if "port" in when:
                route_ports.update(parse_ports(when["port"], f"{route.path}.when[{index}].port"))
        routed.append((route_ports, route.exit))
    listeners = []
    for port in ports:
        exit_name = _exit_for(port, routed, binding.exit)
        if exit_name is None:
            raise ConfigError(f"{binding.path}.routes", f"no route and no exit for port {port}")
        listeners.append(Listener(host, port, exit_name))
    return TcpServer(binding.name, listeners)


def _exit_for(port: int, routed: list[tuple[set[int], str]], default: str | None) -> str | None:
    for ports, exit_name in routed:
        if not ports or port in ports:
            return exit_name
    return default
